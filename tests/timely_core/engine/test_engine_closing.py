"""The closing window's rule (closing.py): when a generation closes, and with which
ids, for its own token limit and when the service asks."""

from __future__ import annotations

import pytest

from timely_core.engine.closing import banned_now, check_closing_within, closing_ids_now

SOFT = (94,)  # a block's end
HARD = (28, 265, 8)  # a statement's, a call's, a name's


def ids(
    generated: int,
    asked_at: int | None = None,
    within: int = 8,
    limit: int = 100,
    asked_within: int | None = None,
) -> object:
    return closing_ids_now(
        max_tokens=limit,
        close_within=within,
        closing_ids=SOFT,
        hard_closing_ids=HARD,
        generated=generated,
        asked_at=asked_at,
        asked_within=asked_within,
    )


def test_the_token_limits_window_closes_softly_then_hard() -> None:
    assert ids(91) is None  # 9 left: before the window
    assert [ids(g) for g in range(92, 96)] == [SOFT] * 4  # 8..5 left
    assert [ids(g) for g in range(96, 100)] == [SOFT + HARD] * 4  # the last 4
    assert ids(100) == SOFT + HARD  # past the limit (appended ids): still hard


def test_an_odd_window_closes_hard_for_its_larger_half() -> None:
    assert [ids(g, within=3) for g in (96, 97, 98, 99)] == [None, SOFT, SOFT + HARD, SOFT + HARD]
    assert ids(99, within=1) == SOFT + HARD  # a window of one token is all hard


def test_asked_to_close_its_window_starts_there() -> None:
    assert [ids(g, asked_at=10) for g in range(10, 14)] == [SOFT] * 4
    assert [ids(g, asked_at=10) for g in range(14, 30)] == [SOFT + HARD] * 16
    assert ids(95, asked_at=90) == SOFT + HARD  # the token limit's window is nearer


def test_without_a_window_it_never_closes_unless_asked_and_then_softly() -> None:
    assert ids(99, within=0) is None
    assert ids(99, asked_at=3, within=0) == SOFT


def test_asked_with_fewer_tokens_left_than_a_window_its_window_is_those() -> None:
    """A segment limit 4 tokens away: the window is those 4, its hard half the last
    2 (a whole window of 8 would only turn hard past the limit)."""
    assert [ids(g, asked_at=10, asked_within=4) for g in range(10, 14)] == [SOFT] * 2 + [
        SOFT + HARD
    ] * 2
    assert ids(11, asked_at=10) == SOFT  # a whole window: still soft there
    # more tokens left than a window: the window as ever
    assert ids(13, asked_at=10, asked_within=50) == ids(13, asked_at=10) == SOFT
    assert ids(10, asked_at=10, asked_within=1) == SOFT + HARD


@pytest.mark.parametrize("within", [0, -3, True, 2.5, "4"])
def test_a_window_of_no_tokens_is_refused_by_name(within: object) -> None:
    with pytest.raises(ValueError, match="within must be"):
        check_closing_within(within)  # type: ignore[arg-type]
    check_closing_within(None)
    check_closing_within(1)


def test_new_conditions_are_banned_only_in_the_hard_half() -> None:
    banned = (63, 64)
    assert banned_now(SOFT, SOFT, banned) == ()  # soft: the model's choice goes on
    assert banned_now(SOFT + HARD, SOFT, banned) == banned
    assert banned_now(SOFT + HARD, SOFT, ()) == ()
