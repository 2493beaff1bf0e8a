"""A waiting room's draw that anyone can check (engine/waiting/draw.py, ADR 0040): the order the
seed gives is recomputed from the published list alone, and a seed other than the committed
one, a reordered list or a changed arrival number is found."""

import re
from dataclasses import replace
from pathlib import Path

from engine.waiting import room as waiting_room
from engine.waiting.draw import (
    Arrival,
    commitment_of,
    draw_of,
    entry_of,
    order_of,
    seed_of,
    verify,
)

SECRET = "ab" * 32
SEED = seed_of(SECRET)
ARRIVALS = [Arrival(entry_of("gala", f"fan{i}"), i + 1) for i in range(50)]
PUBLISHED = order_of(SEED, ARRIVALS)


def test_an_honest_draw_checks_out_and_reveals_nothing_of_the_secret() -> None:
    assert verify(commitment_of(SEED), SEED, PUBLISHED) == []
    assert SEED != SECRET and len(bytes.fromhex(SEED)) == 32
    assert PUBLISHED != ARRIVALS  # the draw, not the arrival order
    # The formula, spelled out as docs/decisions/0040 gives it.
    assert [a.entry for a in PUBLISHED] == [
        a.entry for a in sorted(ARRIVALS, key=lambda a: (draw_of(SEED, a.entry), a.seq))
    ]


def test_a_seed_other_than_the_committed_one_is_found() -> None:
    other = seed_of("cd" * 32)
    problems = verify(commitment_of(SEED), other, order_of(other, ARRIVALS))
    assert problems == ["the seed does not match the commitment published before T0"]


def test_a_reordered_list_is_found_at_its_first_wrong_place() -> None:
    swapped = [PUBLISHED[0], PUBLISHED[2], PUBLISHED[1], *PUBLISHED[3:]]
    assert verify(commitment_of(SEED), SEED, swapped) == ["place 2 is not the one the seed gives"]


def test_a_tie_of_draws_goes_by_arrival_and_a_changed_arrival_number_is_found() -> None:
    same = Arrival(PUBLISHED[0].entry, 999)  # the same entry twice: two arrivals, one draw
    assert order_of(SEED, [same, PUBLISHED[0]]) == [PUBLISHED[0], same]
    twice = [*PUBLISHED[:-1], replace(PUBLISHED[-1], seq=PUBLISHED[0].seq)]
    assert "an entry or an arrival number appears twice" in verify(commitment_of(SEED), SEED, twice)


def test_the_place_scores_agree_with_the_queue_scripts() -> None:
    lua = (Path(waiting_room.__file__).parents[2] / "lua" / "_queue.lua").read_text()
    span = re.search(r"local SEQ_SPAN = (\d+)", lua)
    after = re.search(r"local AFTER_T0 = (\d+)", lua)
    assert span and after
    assert (int(span[1]), int(after[1])) == (waiting_room.SEQ_SPAN, waiting_room.AFTER_T0)
