"""An order's number (engine/model/orders.py, ADR 0042) and its QR code (api/qr.py): derived from
the event and the hold alone, the same every time, nothing to misread, and a QR code segno made."""

import base64
import re

from api.qr import qr_data_url
from engine.model.orders import order_number

SHAPE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{2}$")


def test_a_number_is_the_holds_own_and_reads_without_ambiguity() -> None:
    first = order_number("gala", "h1")
    assert SHAPE.match(first) and not set(first) & set("ILOU")
    assert order_number("gala", "h1") == first  # a replay, a rebuild, the ledger: the same
    assert order_number("gala", "h2") != first and order_number("gala2", "h1") != first
    numbers = {order_number("gala", f"h{i}") for i in range(20_000)}
    assert len(numbers) == 20_000  # 50 bits: no collision among twenty thousand


def test_the_qr_code_is_an_svg_image_the_page_can_show() -> None:
    url = qr_data_url(order_number("gala", "h1"))
    assert url.startswith("data:image/svg+xml")
    body = url.split(",", 1)[1]
    svg = base64.b64decode(body).decode() if ";base64" in url.split(",", 1)[0] else body
    assert "<svg" in svg.replace("%3C", "<")
