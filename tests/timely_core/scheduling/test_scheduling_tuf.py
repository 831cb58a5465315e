"""Eq. 1 presets, TUF0/TUF1, and validation with errors naming the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from timely_core.scheduling.tuf import Tuf


def test_presets_follow_the_paper() -> None:
    normal, urgent = Tuf.normal(), Tuf.urgent()
    assert normal.utility(1.0) == 1.0 and normal.utility(1.5) == pytest.approx(0.0)
    assert urgent.utility(0.2) == 2.0 and urgent.zero_utility_time_s() == pytest.approx(0.5, 1e-3)
    assert Tuf.preset("urgent") == urgent


def test_tuf1_has_zero_ert_and_the_same_slope() -> None:
    tuf = Tuf.normal()
    assert tuf.resumed_utility(-3.0) == tuf.resumed_utility(0.0) == 1.0
    assert tuf.resumed_utility(0.25) == pytest.approx(0.5)


def test_user_defined_level() -> None:
    tuf = Tuf(expected_response_time_s=0.5, slope=-4.0, initial_utility=3.0)
    assert tuf.utility(0.75) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"expected_response_time_s": 0.0, "slope": -1.0, "initial_utility": 1.0}, "expected_"),
        ({"expected_response_time_s": 1.0, "slope": 0.5, "initial_utility": 1.0}, "slope"),
        ({"expected_response_time_s": 1.0, "slope": -1.0, "initial_utility": 0.0}, "initial_"),
        ({"expected_response_time_s": float("nan"), "slope": -1.0, "initial_utility": 1}, "exp"),
        # past the bounds that keep a priority (utility over slack) finite
        ({"expected_response_time_s": 1e308, "slope": -1.0, "initial_utility": 1.0}, "expected_"),
        ({"expected_response_time_s": 1.0, "slope": -1e308, "initial_utility": 1.0}, "slope"),
        ({"expected_response_time_s": 1.0, "slope": -1.0, "initial_utility": 1e308}, "initial_"),
    ],
)
def test_invalid_tuf_names_the_field(fields: dict[str, float], name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        Tuf(**fields)


def test_unknown_preset() -> None:
    with pytest.raises(ValueError, match="unknown urgency preset"):
        Tuf.preset("later")  # type: ignore[arg-type]


def test_a_nan_wait_is_refused_not_given_full_utility() -> None:
    tuf = Tuf.normal()
    for utility in (tuf.utility, tuf.resumed_utility):
        with pytest.raises(ValueError, match="NaN"):
            utility(float("nan"))
    assert tuf.utility(float("inf")) == 0.0
