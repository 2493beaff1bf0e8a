"""An order's number (ADR 0042): what a buyer reads, says on the phone and shows at the door.

It is derived, never stored: the first 50 bits of SHA-256(event_id NUL hold_id) in ten
characters of Crockford's base 32 (no I, L, O or U: nothing to misread), grouped 4-4-2, e.g.
`7K2F-9QX3-MT`. The same hold always has the same number (a replayed callback, a rebuild, the
ledger and the merchant's notification agree without a column or a counter); two holds of one
event share one with a chance of about n^2 / 2^51 (about one in two and a half million for
30,000 orders)."""

import hashlib

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base 32
DIGITS = 10


def order_number(event_id: str, hold_id: str) -> str:
    digest = hashlib.sha256(f"{event_id}\x00{hold_id}".encode()).digest()
    value = int.from_bytes(digest[:8], "big") >> (64 - 5 * DIGITS)
    chars = "".join(ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(DIGITS)))
    return f"{chars[:4]}-{chars[4:8]}-{chars[8:]}"
