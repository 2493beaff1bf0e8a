import pytest

from engine.model.signing import BadSignature, sign, verify

BODY = b'{"id":"evt_1"}'


def test_roundtrip() -> None:
    verify("s3cret", BODY, sign("s3cret", BODY, 1000), now_s=1000, tolerance_s=300)


@pytest.mark.parametrize(
    ("header", "now", "why"),
    [
        (None, 1000, "missing"),
        ("garbage", 1000, "malformed"),
        ("t=abc,v1=00", 1000, "malformed"),
        (sign("other", BODY, 1000), 1000, "mismatch"),
        (sign("s3cret", BODY + b" ", 1000), 1000, "mismatch"),
        (sign("s3cret", BODY, 1000), 1301, "stale"),
        (sign("s3cret", BODY, 1000), 699, "future"),
        ("t=1000,v1=\xff\xfe", 1000, "mismatch"),  # non-ASCII (a latin-1 decoded header)
    ],
)
def test_refusals(header: str | None, now: int, why: str) -> None:
    with pytest.raises(BadSignature, match=why):
        verify("s3cret", BODY, header, now_s=now, tolerance_s=300)
