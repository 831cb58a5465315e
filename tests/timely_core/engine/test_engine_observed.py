"""Observations in a generation's ids (observed.py): the spans a rewrite leaves,
the ids a grammar reads, and the spans a rewrite refuses."""

from __future__ import annotations

import pytest

from timely_core.clock import VirtualClock
from timely_core.engine.observed import check_observed, plan_ids, rewritten_spans
from timely_core.engine.protocol import HandlingStrategy, SamplingParams
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel


def test_a_rewrite_keeps_the_spans_before_its_cut_and_adds_the_new_one() -> None:
    spans = rewritten_spans([], 4, (1, 3))  # 4 kept, then x o o x appended
    assert spans == [(5, 7)]
    assert rewritten_spans(spans, 9, (0, 2)) == [(5, 7), (9, 11)]
    assert rewritten_spans(spans, 6, None) == [(5, 6)]  # the cut goes through it
    assert rewritten_spans(spans, 5, (0, 0)) == []  # cut before it; nothing observed
    ids = list(range(12))
    assert plan_ids(ids, [(5, 7), (9, 11)]) == [0, 1, 2, 3, 4, 7, 8, 11]
    assert plan_ids(ids, [(5, 7), (7, 9)]) == [0, 1, 2, 3, 4, 9, 10, 11]  # back to back
    assert plan_ids(ids, []) == ids


@pytest.mark.parametrize(
    ("observed", "message"),
    [
        ((2, 1), r"observed=\(2, 1\) is not a span of the 3 appended ids"),
        ((0, 4), r"observed=\(0, 4\) is not a span of the 3 appended ids"),
        ((-1, 2), r"observed=\(-1, 2\) is not a span"),
        ([0, 1], r"observed must be a \(start, end\) pair of ints, got \[0, 1\]"),
        ((0, 1.5), r"observed must be a \(start, end\) pair of ints"),
    ],
)
def test_a_span_that_is_not_one_of_the_appended_ids_is_refused(
    observed: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        check_observed(observed, 3, "generation 1")  # type: ignore[arg-type]


def test_a_refused_span_changes_nothing_and_a_later_rollback_keeps_the_spans() -> None:
    config = SimulatedEngineConfig(eos_token_id=0, block_size=4, device_blocks=64)
    engine = SimulatedEngine(VirtualClock(), LatencyModel(), lambda p: [9] * 20, config)
    engine.add(1, [5, 6, 7], SamplingParams(max_tokens=20))
    engine.step([1])
    engine.suspend(1, HandlingStrategy.PRESERVE)
    with pytest.raises(ValueError, match=r"generation 1: observed=\(1, 5\)"):
        engine.rewrite(1, 1, [3, 4, 3], observed=(1, 5))
    assert engine.token_ids(1) == [5, 6, 7, 9] and engine.generation(1).observed == []
    engine.rewrite(1, 1, [3, 4, 3], observed=(1, 2))
    assert engine.generation(1).observed == [(2, 3)]
    engine.rewrite(1, 3, [], observed=None)  # a rollback past the observation keeps it
    assert engine.generation(1).observed == [(2, 3)]
    engine.rewrite(1, 1, [])  # one before it drops it
    assert engine.generation(1).observed == []
