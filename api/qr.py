"""An order number's QR code for the buyer's page (ADR 0042), made by segno: an SVG as a data
URL the page shows as an image (the pages' CSP allows data: images), cached per number."""

import functools

import segno


@functools.lru_cache(maxsize=4096)
def qr_data_url(text: str) -> str:
    """A QR code of `text` (error correction M, a quiet zone of 4 modules), 4 px a module."""
    return str(segno.make(text, error="m").svg_data_uri(scale=4, border=4))
