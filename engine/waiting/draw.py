"""A waiting room's draw that anyone can check (ADR 0040), pure: no Redis here.

Before T0 the room publishes a commitment to the seed of its draw; after T0 it publishes the
seed and, in place order, the anonymous entries that joined before T0 with their arrival
numbers. Anyone can then recompute every place from those alone:

    seed        = HMAC-SHA256(room secret, "draw-seed")             (32 bytes; hex when published)
    commitment  = SHA-256(seed)                                     (hex, published before T0)
    entry       = SHA-256(event_id NUL login), its first 16 bytes   (hex: a buyer finds their own)
    draw        = HMAC-SHA256(seed, "draw" NUL entry), first 4 bytes, big-endian
    place order = the entries sorted by (draw, arrival number)

The seed is derived from the room's secret, never the secret itself: the secret also signs the
admissions (engine/waiting/tokens.py), and revealing it would let anyone forge one. A seed
fixed and committed before anyone joined cannot be chosen afterwards to favour an arrival; the
order of a published list that was changed, or a seed other than the committed one, fails the
check (`verify`)."""

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

DRAW_BITS = 32
ENTRY_BYTES = 16


def seed_of(secret: str) -> str:
    """The draw's seed (hex), derived from the room's secret."""
    return hmac.new(bytes.fromhex(secret), b"draw-seed", hashlib.sha256).hexdigest()


def commitment_of(seed: str) -> str:
    return hashlib.sha256(bytes.fromhex(seed)).hexdigest()


def entry_of(event_id: str, login: str) -> str:
    """The anonymous name of a login's entry in an event's room."""
    digest = hashlib.sha256(f"{event_id}\x00{login}".encode()).digest()
    return digest[:ENTRY_BYTES].hex()


def draw_of(seed: str, entry: str) -> int:
    """The entry's draw: its place among those who joined before T0 (0 comes first)."""
    mac = hmac.new(bytes.fromhex(seed), b"draw\x00" + entry.encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[: DRAW_BITS // 8], "big")


@dataclass(frozen=True, slots=True)
class Arrival:
    entry: str  # entry_of(event, login)
    seq: int  # its arrival number: breaks a tie of draws


def order_of(seed: str, arrivals: Sequence[Arrival]) -> list[Arrival]:
    """The place order the seed gives these arrivals."""
    return sorted(arrivals, key=lambda a: (draw_of(seed, a.entry), a.seq))


def verify(commitment: str, seed: str, published: Sequence[Arrival]) -> list[str]:
    """What is wrong with a published draw: the seed is not the committed one, an entry or an
    arrival number appears twice, or the published order is not the one the seed gives."""
    problems = []
    if commitment_of(seed) != commitment:
        problems.append("the seed does not match the commitment published before T0")
    entries, seqs = [a.entry for a in published], [a.seq for a in published]
    if len(set(entries)) != len(entries) or len(set(seqs)) != len(seqs):
        problems.append("an entry or an arrival number appears twice")
    expected = order_of(seed, published)
    wrong = next((i for i, (a, b) in enumerate(zip(published, expected, strict=True)) if a != b),
                 None)  # fmt: skip
    if wrong is not None:
        problems.append(f"place {wrong + 1} is not the one the seed gives")
    return problems
