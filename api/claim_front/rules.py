"""The rules both lanes of the claim front apply (api/claim_front/__init__.py): which claims the
front may answer before the normal path, and when a claim the gate let through is refused after
all. A refusal from memory changes nothing and tells nothing that is not public, so it needs no
proof of who asks; a claim whose hold exists (a retry) goes on only with a good token, and a
forged one is told what everyone else is, so an answer never says whether a login used a key."""

from typing import Any, NamedTuple

from api.context import Context
from engine.gate.soldout import SoldOutMemory
from engine.model import keys

ROUTE = "claim"  # the metrics' and access log's name of the claim route (api/routes/checkout)
HEADERS = (b"authorization", b"idempotency-key", b"content-length", b"transfer-encoding")
TOKEN_MAX = 4096  # a longer bearer token is not read here (the normal path answers it)


class Claim(NamedTuple):
    """A claim as the front reads it: its hold id ("" without an Idempotency-Key: a fresh one,
    never a retry), its bearer token, and the login the token names, unverified."""

    hold_id: str
    token: str
    login: str


def _headers(headers: Any) -> dict[bytes, bytes] | None:
    """The headers the front reads, the first of each (as Starlette's `get`); None when one it
    reads comes twice (the normal path decides what that means)."""
    found: dict[bytes, bytes] = {}
    for name, value in headers:
        if name in HEADERS:
            if name in found:
                return None
            found[name] = value
    return found


def _claim_of(c: Context, event_id: str, found: dict[bytes, bytes]) -> Claim | None:
    """The claim as the normal path would see it; None when the front cannot tell."""
    scheme, _, raw = found.get(b"authorization", b"").partition(b" ")
    token = raw.strip().decode("ascii", "replace") if scheme.lower() == b"bearer" else ""
    raw_key = found.get(b"idempotency-key")
    if raw_key is None:
        return Claim("", token, "")
    if not token or len(token) > TOKEN_MAX or not raw_key.isascii():
        return None
    key = raw_key.decode()
    login = c.identity.peek_login(token)
    if login is None or not keys.valid_id(key):
        return None
    return Claim(keys.hold_key(event_id, login, key), token, login)


def readable(c: Context, event_id: str, scope: Any, body_max: int | None = None) -> Claim | None:
    """The claim, read from its headers, when the front may answer it: None when it goes the
    normal way (an unusable event id, a token it cannot decode, an Idempotency-Key the normal
    path would refuse, a repeated header, a body without a Content-Length or over `body_max`,
    the body limit by default)."""
    found = _headers(scope["headers"])
    if found is None or not keys.valid_id(event_id) or b"transfer-encoding" in found:
        return None
    length = found.get(b"content-length")
    limit = c.settings.body_max_bytes if body_max is None else body_max
    if length is None or not length.isdigit() or int(length) > limit:
        return None
    return _claim_of(c, event_id, found)


def refused_after(
    c: Context, memory: SoldOutMemory, event_id: str, refused: bool, claim: Claim
) -> bool:
    """The gate's verdict (True: refused), a retry's token checked. A claim let through only
    because its hold exists (a retry) goes on only if its token is good; a forged one is told
    what everyone else is and gives its place in flight back."""
    retry = not refused and claim.hold_id and memory.remembers(event_id)
    if retry and c.identity.names(claim.token, claim.login) is False:
        memory.release(event_id)
        return True
    return refused
