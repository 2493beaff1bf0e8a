"""Seats in words (engine/views/seatmap.py `seats_in_words`), as the pages say them
(api/static/seatmap.js `namesOf`, checked in the browser by tests/browser/test_buyer_page.py):
grouped by section and row in the order given, a seat the map does not place named by its id."""

from engine.views.seatmap import seats_in_words

PLACES = {
    "a12": ("A", "1", "12"), "a13": ("A", "1", "13"), "a15": ("A", "1", "15"),
    "b1": ("B", "", "1"), "c1": ("", "", ""), "d4": ("", "4", "7"),
}  # fmt: skip


def test_seats_are_grouped_by_section_and_row_in_the_order_given() -> None:
    assert seats_in_words(["a12", "a13", "a15"], PLACES) == "Section A, row 1, seats 12, 13, 15"
    assert seats_in_words(["a12", "b1"], PLACES) == "Section A, row 1, seat 12; Section B, seat 1"
    assert seats_in_words(["a12", "b1", "a13"], PLACES) == (
        "Section A, row 1, seat 12; Section B, seat 1; Section A, row 1, seat 13"
    )


def test_a_seat_without_a_place_is_named_by_its_id() -> None:
    assert seats_in_words(["c1"], PLACES) == "Seat c1"
    assert seats_in_words(["zz"], {}) == "Seat zz"
    assert seats_in_words(["d4"], PLACES) == "Row 4, seat 7"
