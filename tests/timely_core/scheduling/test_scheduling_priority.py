"""Eq. 4 properties (hypothesis) and the vectorised form's agreement with it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from timely_core.scheduling.priority import pud_priorities, pud_priority
from timely_core.scheduling.tuf import Tuf

G = 0.09
tufs = st.builds(
    Tuf,
    expected_response_time_s=st.floats(0.05, 5.0),
    slope=st.floats(-20.0, -0.1),
    initial_utility=st.floats(0.1, 5.0),
)
times = st.floats(0.0, 100.0)


@settings(max_examples=200, deadline=None)
@given(tufs, times, st.floats(0.005, 3.0), st.floats(0.005, 3.0))
def test_priority_falls_as_slack_grows_for_equal_utility(
    tuf: Tuf, now: float, slack_a: float, slack_b: float
) -> None:
    """Two first segments with the same utility now (both within their ERT) but
    different slack: the one with more slack ranks lower."""
    assume(abs(slack_a - slack_b) > 1e-3)
    # Both are within ERT, so utility is beta for both; slack = ref + ERT - now - G.
    ref_a = now + G + slack_a - tuf.expected_response_time_s
    ref_b = now + G + slack_b - tuf.expected_response_time_s
    assume(ref_a <= now and ref_b <= now)  # both have arrived
    p_a = pud_priority(now, tuf, True, ref_a, G)
    p_b = pud_priority(now, tuf, True, ref_b, G)
    assert tuf.utility(now + G - ref_a) == tuf.utility(now + G - ref_b)
    assert (p_a > p_b) == (slack_a < slack_b)


@settings(max_examples=200, deadline=None)
@given(tufs, times, st.floats(0.001, 0.05))
def test_first_segment_past_its_ert_loses_priority_at_its_slope(
    tuf: Tuf, arrival: float, dt: float
) -> None:
    late = arrival + tuf.expected_response_time_s  # waiting past ERT from here on
    assume(G + dt < tuf.initial_utility / -tuf.slope)  # utility not yet 0 at `late + dt`
    p_late = pud_priority(late, tuf, True, arrival, G)
    p_later = pud_priority(late + dt, tuf, True, arrival, G)
    min_slack = 1e-3
    assert p_later < p_late
    assert p_later - p_late == pytest.approx(tuf.slope * dt / (G * min_slack), rel=1e-6)


@settings(max_examples=200, deadline=None)
@given(tufs, times, st.floats(0.2, 30.0), st.floats(0.01, 0.9))
def test_resumed_segment_gains_priority_as_the_robot_nears_its_end(
    tuf: Tuf, emitted: float, execution: float, fraction: float
) -> None:
    completion = emitted + execution  # estimated end of the previous segment
    early = emitted + fraction * (execution - G) / 2
    later = emitted + fraction * (execution - G)
    assume(later - early > 1e-3 and later + G < completion - 1e-3)
    assert pud_priority(later, tuf, False, completion, G) > pud_priority(
        early, tuf, False, completion, G
    )
    assert tuf.resumed_utility(later + G - completion) == tuf.initial_utility


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(tufs, st.booleans(), st.floats(-10.0, 10.0)), min_size=1, max_size=30))
def test_vectorised_priorities_equal_eq4(rows: list[tuple[Tuf, bool, float]]) -> None:
    now = 5.0
    expected = [pud_priority(now, tuf, first, ref, G) for tuf, first, ref in rows]
    got = pud_priorities(
        now,
        np.array([ref for _, _, ref in rows]),
        np.array([tuf.expected_response_time_s if first else 0.0 for tuf, first, _ in rows]),
        np.array([tuf.slope for tuf, _, _ in rows]),
        np.array([tuf.initial_utility for tuf, _, _ in rows]),
        np.full(len(rows), G),
    )
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_urgent_outranks_normal_at_arrival() -> None:
    assert pud_priority(0.0, Tuf.urgent(), True, 0.0) > pud_priority(0.0, Tuf.normal(), True, 0.0)


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="segment_generation_s"):
        pud_priority(0.0, Tuf.normal(), True, 0.0, segment_generation_s=0.0)
    with pytest.raises(ValueError, match="min_slack_s"):
        pud_priority(0.0, Tuf.normal(), True, 0.0, min_slack_s=-1.0)
