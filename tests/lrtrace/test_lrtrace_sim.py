"""The simulator target: the real service policies on the SimulatedEngine in virtual
time. Everything asserted here is virtual time, so it is deterministic."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.metrics import run_stats, task_metrics
from lrtrace.profiles import PAPER_PROFILE
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.targets.sim import SimTarget
from lrtrace.results_format import RunRecord, TaskRecord
from lrtrace.workload import preset
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.service_config import ServiceConfig

CATALOG = load_catalog()
TRACE = compose(preset(1).model_copy(update={"duration_s": 60.0, "seed": 3}), CATALOG)


def run(tokenizer: Any, policy: str, max_batch: int | None = None) -> list[TaskRecord]:
    target = SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG)
    records: list[TaskRecord] = []
    target.run(TRACE, policy, max_batch, records, lambda r: None, threading.Event())
    return records


@pytest.fixture(scope="module")
def by_policy(tokenizer: Any) -> dict[str, list[TaskRecord]]:
    return {p: run(tokenizer, p) for p in ("timely", "fcfs", "stream")}


def test_every_task_gets_its_golden_plan_in_order(by_policy: dict[str, list[TaskRecord]]) -> None:
    for policy, records in by_policy.items():
        assert len(records) == len(TRACE.tasks) > 10
        for rec, task in zip(records, TRACE.tasks, strict=True):
            assert rec.task_id == task.task_id and rec.finished and rec.success, (policy, rec.error)
            golden = CATALOG[task.trace_id].golden_plan
            assert rec.plan_text == golden
            assert "".join(s.text for s in rec.segments) == golden
            assert [s.index for s in rec.segments] == list(range(len(rec.segments)))


def test_robot_timeline_is_causal(by_policy: dict[str, list[TaskRecord]]) -> None:
    for records in by_policy.values():
        for rec in records:
            prev_end = rec.arrival_s
            for s in rec.segments:
                assert s.emitted_s >= rec.arrival_s
                assert s.dispatched_s == pytest.approx(s.emitted_s + 0.008)
                assert s.exec_start_s >= max(s.dispatched_s, prev_end) - 1e-9
                assert s.exec_end_s >= s.exec_start_s
                prev_end = s.exec_end_s


def test_fcfs_dispatches_the_whole_plan_once_and_timely_segments(
    by_policy: dict[str, list[TaskRecord]],
) -> None:
    assert all(len(r.segments) == 1 for r in by_policy["fcfs"])
    multi = [r for r in by_policy["timely"] if r.plan_text.count(";") + r.plan_text.count("}") > 2]
    assert any(len(r.segments) > 1 for r in multi)


def test_timely_raises_urgent_utility_over_fcfs(by_policy: dict[str, list[TaskRecord]]) -> None:
    def urgent(policy: str) -> float:
        run_ = RunRecord(
            label=policy,
            policy=policy,
            target="sim",
            engine="s",
            simulated=True,
            tasks=by_policy[policy],
        )
        return next(g for g in run_stats(run_) if g.group == "urgent-drone").utility.mean

    assert urgent("timely") > urgent("fcfs")


def test_same_trace_same_results(tokenizer: Any, by_policy: dict[str, list[TaskRecord]]) -> None:
    again = run(tokenizer, "timely")
    assert [r.model_dump() for r in again] == [r.model_dump() for r in by_policy["timely"]]


def test_batch_cap_limits_concurrency(tokenizer: Any) -> None:
    # With one generation at a time, fcfs serves tasks strictly one after another:
    # no two first segments can be emitted in the same iteration.
    records = run(tokenizer, "fcfs", max_batch=1)
    emitted = sorted(r.segments[0].emitted_s for r in records)
    assert all(b > a for a, b in itertools.pairwise(emitted))
    base = [task_metrics(r) for r in run(tokenizer, "fcfs")]
    capped = [task_metrics(r) for r in records]
    assert sum(m.response_s for m in capped if m) >= sum(m.response_s for m in base if m)


def step_sizes(
    monkeypatch: pytest.MonkeyPatch, target: SimTarget, max_batch: int | None
) -> list[int]:
    """How many generations each engine iteration of one fcfs run of BURSTS was given."""
    sizes: list[int] = []
    step = SimulatedEngine.step

    def counting(self: SimulatedEngine, gen_ids: list[int]) -> Any:
        sizes.append(len(gen_ids))
        return step(self, gen_ids)

    monkeypatch.setattr(SimulatedEngine, "step", counting)
    records: list[TaskRecord] = []
    target.run(BURSTS, "fcfs", max_batch, records, lambda r: None, threading.Event())
    monkeypatch.undo()
    assert all(r.finished and r.success for r in records)
    return sizes


# WID 2's bursts (up to 16 tasks at once) are wider than the paper's engine ran
BURSTS = compose(preset(2).model_copy(update={"duration_s": 40.0, "seed": 1}), CATALOG)


def test_paper_profile_runs_at_most_its_engines_8_sequences(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert PAPER_PROFILE.max_batch_size == 8
    target = SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG)
    assert target.batch_cap(None) == 8 and target.batch_cap(16) == 16
    assert max(step_sizes(monkeypatch, target, None)) == 8
    # an explicit cap (a sweep, or a what-if) overrides the profile's
    assert max(step_sizes(monkeypatch, target, 16)) > 8
    # so does a service config that sets one
    config = ServiceConfig(max_batch_size=12)
    configured = SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG, 0.008, config)
    assert configured.batch_cap(None) == 12
    # a profile without a cap of its own leaves the service's default
    uncapped = PAPER_PROFILE.model_copy(update={"max_batch_size": None})
    target = SimTarget(uncapped, tokenizer, ExecTimeSampler(), CATALOG)
    assert target.batch_cap(None) == ServiceConfig().max_batch_size
    assert max(step_sizes(monkeypatch, target, None)) > 8


def test_a_cap_beyond_the_engine_is_recorded_as_the_engine_runs_it(tokenizer: Any) -> None:
    target = SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG)
    most = SimulatedEngineConfig(eos_token_id=0).max_generations
    assert target.batch_cap(most + 1) == most  # the service clamps it so
    assert target.batch_cap(most) == most and target.batch_cap(None) == 8


def test_tasks_the_simulator_has_no_plan_for_are_refused_up_front(tokenizer: Any) -> None:
    odd = [t.model_copy(update={"instruction": "Dance."}) for t in TRACE.tasks[1:6]]
    target = SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG)
    one = TRACE.model_copy(update={"tasks": (TRACE.tasks[0], odd[0])})
    with pytest.raises(LrtraceError, match=f"no plan for task {odd[0].task_id}: its instruction"):
        target.check(one)
    many = TRACE.model_copy(update={"tasks": (TRACE.tasks[0], *odd)})
    ids = ", ".join(t.task_id for t in odd[:3])
    with pytest.raises(LrtraceError, match=f"no plan for tasks {ids} \\(\\+2 more\\): their"):
        target.check(many)
    target.check(TRACE)  # the catalog's tasks are all known
