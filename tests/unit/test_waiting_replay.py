"""The replay of a waiting room's recorded moves (engine/waiting/restore.py), pure: the moves
the ledger may hold with gaps still make a room that admits in place order and never fail a
rebuild."""

from engine.model.records import Marker
from engine.waiting.restore import Move, replay
from engine.waiting.room import AFTER_T0, SEQ_SPAN

PLACE, ADMIT, SPEND = Marker.PLACE_TAKEN, Marker.ADMITTED, Marker.ADMISSION_SPENT


def test_a_spend_or_an_admission_of_a_login_the_ledger_never_saw_join_is_skipped() -> None:
    """A join before the ledger recorded rooms, or one the ledger refused, is not there: the
    rebuild goes on with what it has instead of failing on every attempt."""
    line = replay(
        [
            Move(SPEND, "ann", None, None, 0, "h1", 1),
            Move(PLACE, "bob", AFTER_T0 + 5, None, 0, "", 2),
        ]
    )
    assert list(line.entries) == ["bob"] and line.used == 0 and line.skipped == 1


def test_the_next_place_follows_the_largest_place_recorded_not_their_count() -> None:
    """Places 3 and 9 recorded (the rest joined before the ledger recorded rooms): the next
    join must take a place after 9, or a restored cursor at 9 would never admit it."""
    line = replay(
        [
            Move(PLACE, "ann", 77 * SEQ_SPAN + 3, None, 0, "", 1),
            Move(PLACE, "bob", AFTER_T0 + 9, None, 0, "", 2),
            Move(ADMIT, "", AFTER_T0 + 9, -1, 2, "", 3),
        ]
    )
    assert line.seq == 9 and line.cursor == AFTER_T0 + 9
