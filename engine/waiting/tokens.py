"""What the waiting room derives from its secret (ADR 0029): a login's draw, its place among
those who join before T0, and the admission token that lets it claim once.

Each room has its own secret (32 random bytes, hex, set once in its queue hash by
lua/queue_setup.lua and never changed): every API process reads it from Redis, none has to be
configured with it, and nobody outside can compute a login's draw or forge an admission.

- The draw is engine/waiting/draw.py's: HMAC-SHA256 of the login's anonymous entry under a seed
  derived from the secret, its first 32 bits: fixed per login, so a second tab, a rejoin or a
  retry draws the same; unpredictable before the seed is revealed after T0, and checkable by
  anyone then (ADR 0040).
- An admission token is "<admitted_ms>.<expires_ms>.<mac>": engine/model/signing.py's HMAC-SHA256,
  timestamped with the admission's time, over the event, the login and the expiry. It names its
  admission and binds it to one login and one event; single use and the deadline are decided in
  Redis (lua/queue_use.lua), by the server clock."""

import hmac
import re
from dataclasses import dataclass

from engine.model import signing
from engine.waiting.draw import draw_of, entry_of, seed_of
from engine.waiting.errors import AdmissionInvalid

TOKEN_CHARS_MAX = 128
_TOKEN_RE = re.compile(r"^([0-9]{1,16})\.([0-9]{1,16})\.([0-9a-f]{64})$")


def draw(secret: str, event_id: str, login: str) -> int:
    """The login's place among those who join before T0 (0 comes first)."""
    return draw_of(seed_of(secret), entry_of(event_id, login))


@dataclass(frozen=True, slots=True)
class Admission:
    admitted_ms: int
    expires_ms: int
    token: str


def _mac(secret: str, event_id: str, login: str, admitted_ms: int, expires_ms: int) -> str:
    body = "\x00".join(("admission", event_id, login, str(expires_ms))).encode()
    return signing.sign(secret, body, admitted_ms).split("v1=", 1)[1]


def issue(secret: str, event_id: str, login: str, admitted_ms: int, expires_ms: int) -> Admission:
    """The token of the login's admission (the same one at every poll: nothing is stored)."""
    assert admitted_ms > 0 and expires_ms > admitted_ms
    mac = _mac(secret, event_id, login, admitted_ms, expires_ms)
    return Admission(admitted_ms, expires_ms, f"{admitted_ms}.{expires_ms}.{mac}")


def admitted_ms_of(secret: str, event_id: str, login: str, token: str) -> int:
    """The admission a token names, if this room gave it to this login for this event; else
    AdmissionInvalid. Whether it is still live and unspent is the queue's to say."""
    m = _TOKEN_RE.match(token) if len(token) <= TOKEN_CHARS_MAX else None
    if m is None:
        raise AdmissionInvalid("malformed admission token")
    admitted_ms, expires_ms = int(m[1]), int(m[2])
    expected = _mac(secret, event_id, login, admitted_ms, expires_ms)
    if not hmac.compare_digest(expected.encode(), m[3].encode()):
        raise AdmissionInvalid("admission token does not match this login and event")
    return admitted_ms
