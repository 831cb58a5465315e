"""Range expressions: an integer matches exactly when it lies in the range (and is
written canonically); a decimal matches exactly when its exact value does, and then
`float()` of it passes the float bounds as the skill checks compare them."""

# mypy: disable-error-code="no-untyped-def"

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_models.grammar_numbers import (
    MAX_FRACTION_DIGITS,
    MAX_INT_DIGITS,
    decimal_range_regex,
    int_range_regex,
)

bounds = st.integers(-5000, 5000)


@given(bounds, st.integers(0, 6000), st.lists(st.integers(-12000, 12000), max_size=40))
@settings(max_examples=300, deadline=None)
def test_integers_match_exactly_inside_the_range(low, width, probes) -> None:
    high = low + width
    regex = re.compile(int_range_regex(low, high))
    edges = [low - 1, low, low + 1, high - 1, high, high + 1, 0, -1, 1]
    for n in probes + edges:
        assert bool(regex.fullmatch(str(n))) == (low <= n <= high), (low, high, n)
    for text in ("-0", "00", "007", "+5", "5 ", ""):
        assert not regex.fullmatch(text)


def test_unbounded_integers_stop_at_the_digit_cap() -> None:
    regex = re.compile(int_range_regex(None, None))
    assert regex.fullmatch("9" * MAX_INT_DIGITS)
    assert regex.fullmatch("-" + "9" * MAX_INT_DIGITS)
    assert not regex.fullmatch("1" + "0" * MAX_INT_DIGITS)
    assert regex.fullmatch("0") and not regex.fullmatch("-0")


def test_an_empty_range_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        int_range_regex(5, 4)
    with pytest.raises(ValueError, match="empty"):
        decimal_range_regex(0.5, 0.4)


def _decimal_text(draw: st.DrawFn) -> str:
    whole = draw(st.integers(0, 60))
    digits = draw(st.text(alphabet="0123456789", min_size=1, max_size=MAX_FRACTION_DIGITS + 2))
    sign = draw(st.sampled_from(["", "-"]))
    return f"{sign}{whole}.{digits}" if draw(st.booleans()) else f"{sign}{whole}"


@st.composite
def decimal_cases(draw: st.DrawFn) -> tuple[float | None, float | None, list[str]]:
    low = draw(st.one_of(st.none(), st.decimals(-50, 50, places=draw(st.integers(0, 4)))))
    width = draw(st.decimals(0, 60, places=draw(st.integers(0, 4))))
    high = draw(st.one_of(st.none(), st.just(None if low is None else low + width)))
    if high is None and low is None and draw(st.booleans()):
        high = draw(st.decimals(-50, 50, places=2))
    texts = [_decimal_text(draw) for _ in range(30)]
    return (
        None if low is None else float(low),
        None if high is None else float(high),
        texts,
    )


@given(decimal_cases())
@settings(max_examples=300, deadline=None)
def test_decimals_match_exactly_inside_the_range(case) -> None:
    low, high, texts = case
    regex = re.compile(decimal_range_regex(low, high))
    lo = None if low is None else Decimal(repr(low))
    hi = None if high is None else Decimal(repr(high))
    for text in texts:
        value = Decimal(text)
        fraction = text.partition(".")[2]
        canonical = len(fraction) <= MAX_FRACTION_DIGITS and not (
            text.startswith("-") and value == 0
        )
        inside = (lo is None or value >= lo) and (hi is None or value <= hi)
        assert bool(regex.fullmatch(text)) == (canonical and inside), (low, high, text)
        if regex.fullmatch(text):  # what the skill check then sees
            assert (low is None or float(text) >= low) and (high is None or float(text) <= high)


def test_the_drone_delay_range() -> None:
    regex = re.compile(decimal_range_regex(0.1, 30.0))
    for text in ("0.1", "0.10", "2", "2.5", "29.999", "30", "30.0", "30.000000000"):
        assert regex.fullmatch(text), text
    for text in ("0", "0.09", "0.0999", "30.01", "31", "-1", ".5", "5.", "05.5"):
        assert not regex.fullmatch(text), text
