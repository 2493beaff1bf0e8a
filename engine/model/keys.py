"""Every Redis key of the engine. All keys of one event share the hash tag {event_id}, so each
script call touches one Redis Cluster slot. Scripts receive keys only through KEYS."""

import functools
import hashlib
import re
from typing import NewType

from redis.crc import key_slot

EventId = NewType("EventId", str)
HoldId = NewType("HoldId", str)
ChargeId = NewType("ChargeId", str)
SeatId = NewType("SeatId", str)
Login = NewType("Login", str)

PREFIX = "onsale:v1"

# The order is the contract with lua/_lib.lua (KEYS[1] .. KEYS[21]).
EVENT_KEYS: tuple[str, ...] = (
    "event",
    "seats",
    "free",
    "owners",
    "holds",
    "charges",
    "logins",
    "deadlines",
    "quarantines",
    "refunds",
    "attempts",
    "callbacks",
    "outbox",
    "sections",
    "alerts",
    "event:restocked",  # a pub/sub channel, not a key: passed like one so scripts never build it
    "watch",  # charges provider reconciliation asks about (CHARGING, recent declines)
    "quota",  # per-login counters: claim and charge-start rate buckets, units bought
    "ended",  # ended holds that never had a charge -> decided ms (trimmed after retention)
    "stock",  # quantity stock: per sku and location, on hand and where its units are
    "corrections",  # stock correction id -> what it did (a replay is answered from here)
    "codes",  # presale windows, access codes and their uses (ADR 0049)
)

_ID_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def valid_id(value: str) -> bool:
    """Ids go into keys and Lua arguments: a small safe alphabet, bounded length."""
    return bool(_ID_RE.match(value))


_CODE_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def valid_code(value: str) -> bool:
    """A presale access code (ADR 0049): no ':' (its uses are counted under 'l:<code>:<login>'),
    typed by hand."""
    return bool(_CODE_RE.match(value))


# The charge id is also the provider idempotency key, so the server mints it: derived from the
# event, the hold, its owner and the client's own Idempotency-Key (which then deduplicates only
# that client's requests on that hold), and naming its event so a provider message is routed by
# the key we minted, not by metadata it carries (ADR 0014).
CHARGE_KEY_SEP = "~"
_CHARGE_KEY_RE = re.compile(r"^(?P<event>[A-Za-z0-9_.:-]{1,64})~[0-9a-f]{24}$")


def charge_key(event_id: str, hold_id: str, login: str, client_key: str) -> str:
    digest = hashlib.sha256("\x00".join((event_id, hold_id, login, client_key)).encode())
    return f"{event_id}{CHARGE_KEY_SEP}{digest.hexdigest()[:24]}"


def hold_key(event_id: str, login: str, client_key: str) -> str:
    """A claim's hold id: the same login and Idempotency-Key give the same hold (a retry finds
    it); another login's same key gives another hold (no cross-login collision to observe)."""
    digest = hashlib.sha256("\x00".join((event_id, login, client_key)).encode())
    return f"h{digest.hexdigest()[:31]}"


def event_of_charge_key(key: str) -> str | None:
    """The event a charge key of ours names; None for anything we did not mint."""
    m = _CHARGE_KEY_RE.match(key)
    return m["event"] if m else None


# A part of an order's money given back (ADR 0043) is a charge of its own, named after the
# charge whose money it returns: '<winner>:r<12 hex>', the hex from the operator's
# Idempotency-Key (all zeros: the rest given back after the provider returned a part itself).
PART_SEP = ":r"
_PART_RE = re.compile(r"^(?P<parent>.+~[0-9a-f]{24}):r[0-9a-f]{12}$")


def part_id(winner: str, event_id: str, hold_id: str, client_key: str) -> str:
    digest = hashlib.sha256("\x00".join((event_id, hold_id, "part", client_key)).encode())
    return f"{winner}{PART_SEP}{digest.hexdigest()[:12]}"


def part_parent(charge_id: str) -> str | None:
    """The charge whose money a part gives back; None for any other charge."""
    m = _PART_RE.match(charge_id)
    return m["parent"] if m else None


def valid_charge_id(value: str) -> bool:
    return (
        valid_id(value)
        or event_of_charge_key(value) is not None
        or event_of_charge_key(part_parent(value) or "") is not None
    )


def event_keys(event_id: str, prefix: str = PREFIX) -> list[str]:
    if not valid_id(event_id):
        raise ValueError(f"invalid event id {event_id!r}")
    return [f"{prefix}:{{{event_id}}}:{name}" for name in EVENT_KEYS]


# Indexes across events, KEYS[23..26] of every event script after the event's own keys, each
# events -> a score no later than the moment the event has work of that kind, kept by the
# scripts, so a worker reads only the events with work, however many there are (ADR 0044,
# ADR 0051):
# - due: the earliest deadline or quarantine end of its holds (the sweeper);
# - trims: when its oldest ended hold without a charge ended (the trimmer, after the retention);
# - refunds: its earliest refund due (the refund worker);
# - watches: its oldest charge to ask the provider about (reconciliation, after `stale_ms`).
# One zset each on a single server; on a cluster one per slot (under a tag that hashes to the
# event's slot), since a script touches one slot.
DUE, TRIMS, REFUNDS, WATCHES = "due", "trims", "refunds", "watches"
INDEXES = (DUE, TRIMS, REFUNDS, WATCHES)
# The event's own zset each index besides the due index follows (its score: that zset's first;
# the due index follows two, deadlines and quarantines).
FOLLOWS = {TRIMS: "ended", REFUNDS: "refunds", WATCHES: "watch"}


def index_key(kind: str, event_id: str, prefix: str = PREFIX, *, cluster: bool = False) -> str:
    assert kind in INDEXES, kind
    if not cluster:
        return f"{prefix}:{kind}"
    return f"{prefix}:{kind}:{{{slot_tag(slot_of(event_id))}}}"


def script_keys(event_id: str, prefix: str = PREFIX, *, cluster: bool = False) -> list[str]:
    """What every event script gets as KEYS: the event's keys, then the indexes across events."""
    return [
        *event_keys(event_id, prefix),
        *(index_key(kind, event_id, prefix, cluster=cluster) for kind in INDEXES),
    ]


def event_key(event_id: str, name: str, prefix: str = PREFIX) -> str:
    if name in EXTRA_KEYS:
        return f"{event_keys(event_id, prefix)[0].rsplit(':', 1)[0]}:{name}"
    return event_keys(event_id, prefix)[EVENT_KEYS.index(name)]


# Keys of an event that no script touches (Python only), still under the event's hash tag.
# raw_callbacks: verified provider messages; refused: holds whose decision the ledger refused;
# seatmap: the seats' places a page draws (engine/views/seatmap.py, written once at the create);
# prices: the seats' own prices (engine/store/prices.py, written once at the create).
EXTRA_KEYS: tuple[str, ...] = ("raw_callbacks", "refused", "seatmap", "prices")


def event_of_channel(channel: str) -> str:
    return channel.partition("{")[2].partition("}")[0]


def slot_of(event_id: str) -> int:
    """The Redis Cluster slot of every key of the event (CRC16 of its hash tag)."""
    return key_slot(event_id.encode())


@functools.lru_cache(maxsize=16_384)
def slot_tag(slot: int) -> str:
    """The first of `x0`, `x1`, ... whose slot is `slot`: a hash tag that puts a key in the same
    slot as the events of that slot (about 16k tries, once per slot and process)."""
    n = 0
    while key_slot(f"x{n}".encode()) != slot:
        n += 1
    return f"x{n}"


def event_index(event_id: str, prefix: str = PREFIX) -> str:
    """The set of event ids of one cluster slot, in the slot of those events: an event and its
    index entry live (and fail over) together, on one server or one primary of a cluster.
    Written before the event (a half-created event is still walked), found by SCAN on every
    primary (engine/store/reads.py `event_ids`)."""
    return f"{prefix}:index:{{{slot_tag(slot_of(event_id))}}}"


def index_pattern(prefix: str = PREFIX) -> str:
    return f"{prefix}:index:{{*}}"


def lost_events(prefix: str = PREFIX) -> str:
    """Events the ledger has and this Redis lost (restarted empty): hash event id -> when it was
    noticed. Set by the ledger writer, cleared by the rebuild; read only on a not-found answer."""
    return f"{prefix}:lost"


def revoked_logins(prefix: str = PREFIX) -> str:
    """Hash login -> ms: the login's tokens issued up to then are refused (api/identity.py).
    Read whole by every API process each poll; written by the admin revoke route."""
    return f"{prefix}:revoked_logins"


# The waiting room of an event (engine/waiting/room.py, ADR 0029). Only lua/queue_*.lua touch
# these keys; they get them after the event hash, which their clock and config read.
QUEUE_KEYS: tuple[str, ...] = ("queue", "queue:entries", "queue:order", "queue:lapses")


def queue_keys(event_id: str, prefix: str = PREFIX) -> list[str]:
    """KEYS of the queue scripts: the event hash, then QUEUE_KEYS, then the event's outbox (the
    room's changes are recorded there for the ledger), all under the event's hash tag."""
    event = event_key(event_id, "event", prefix)
    base = event.rsplit(":", 1)[0]
    outbox = event_key(event_id, "outbox", prefix)
    return [event, *(f"{base}:{name}" for name in QUEUE_KEYS), outbox]
