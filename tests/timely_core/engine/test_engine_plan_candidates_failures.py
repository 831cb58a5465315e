"""Plan candidates when the inner engine fails generations on their own
(`GenerationsFailed`): a failed alternative is one candidate fewer and the plan is
still chosen among the rest; a generation fails, under its own id and with the inner
engine's reason, only once none of its candidates is left; the other generations'
tokens of that step are handed on (simulated engine)."""

from __future__ import annotations

import pytest
from engine_testkit import drive_to_end

from timely_core.clock import VirtualClock
from timely_core.engine.plan_candidates import CandidateEngine
from timely_core.engine.protocol import (
    GenerationsFailed,
    SamplingParams,
    StepOutput,
    UnknownGeneration,
)
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel

EOS = 0
PLAN = [5, 6, 7, 8]


class FailingSim(SimulatedEngine):
    """The simulator, reporting log-probabilities, that fails the ids in `doomed` at
    their next step as an engine does: ended inside, the others' outputs carried."""

    reports_logprobs = True

    def __init__(self) -> None:
        config = SimulatedEngineConfig(eos_token_id=EOS, block_size=4, device_blocks=64)
        super().__init__(VirtualClock(), LatencyModel(), lambda _: list(PLAN), config)
        self.doomed: set[int] = set()

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        failing = [g for g in gen_ids if g in self.doomed]
        for gen_id in failing:
            self.abort(gen_id)
        self.doomed -= set(failing)
        outputs = super().step([g for g in gen_ids if g not in failing])
        if failing:
            raise GenerationsFailed({g: f"generation {g} refused" for g in failing}, outputs)
        return outputs


def _engine() -> tuple[CandidateEngine, FailingSim]:
    inner = FailingSim()
    return CandidateEngine(inner, lambda ids: " ".join(map(str, ids))), inner


def _run(
    engine: CandidateEngine, gen_ids: list[int]
) -> tuple[dict[int, list[int]], dict[int, str]]:
    """Step until every generation finished or failed: the ids handed out (an
    alternative's id, never the caller's, would be a KeyError there), the failures."""
    handed, raised = drive_to_end(engine, gen_ids)
    return handed, {g: reason for exc in raised for g, reason in exc.failures.items()}


def test_a_failed_alternative_is_one_candidate_fewer() -> None:
    engine, inner = _engine()
    engine.add(1, [1, 2, 3], SamplingParams(max_tokens=8, candidates=2))
    engine.step([1])  # every candidate prefilled
    inner.doomed = {min(engine._owner)}  # one alternative
    handed, failed = _run(engine, [1])
    assert failed == {}
    assert handed[1] == [*PLAN, EOS]
    assert engine.choices[-1].candidates == 2  # its own and the one alternative left


def test_a_generation_fails_once_none_of_its_candidates_is_left() -> None:
    engine, inner = _engine()
    engine.add(1, [1, 2, 3], SamplingParams(max_tokens=8, candidates=2))
    engine.add(2, [4, 5, 6], SamplingParams(max_tokens=8))
    first = [o.token_id for o in engine.step([1, 2])]  # 1 hands nothing out yet
    inner.doomed = {1, *engine._owner}  # its own and both alternatives
    handed, failed = _run(engine, [1, 2])
    assert failed == {1: "generation 1 refused"}
    assert first + handed[2] == [*PLAN, EOS]  # the other went on, no token lost
    with pytest.raises(UnknownGeneration):  # ended: nothing of it is left
        inner.generation(1)
    assert not engine._owner  # no alternative left behind
