"""The replay loop in virtual time: idle time is skipped, not stepped through, and
skipping it changes no result. Speed is asserted as service passes, not seconds."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.profiles import PAPER_PROFILE
from lrtrace.replay import drive
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.targets.sim import SimTarget
from lrtrace.results_format import TaskRecord
from lrtrace.trace_format import TraceFile
from lrtrace.workload import WorkloadSpec
from timely_core.service import PlanningService

CATALOG = load_catalog()
# sparse: events 20 s apart on average, so the service is idle most of the time
SPARSE = compose(
    WorkloadSpec(eps=0.05, max_tpe=3, trace_ids=(1, 2, 9), agents=3, duration_s=200, seed=4),
    CATALOG,
)


def replay(
    tokenizer: Any, trace: TraceFile, policy: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[dict[str, Any]], int]:
    """(the records, as dicts; how many times the service was stepped)."""
    passes = [0]
    run_until = PlanningService.run_until

    def counting(self: PlanningService, t_s: float, max_iterations: int = 1_000_000) -> None:
        passes[0] += 1
        run_until(self, t_s, max_iterations)

    monkeypatch.setattr(PlanningService, "run_until", counting)
    records: list[TaskRecord] = []
    target = SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG)
    target.run(trace, policy, None, records, lambda r: None, threading.Event())
    monkeypatch.setattr(PlanningService, "run_until", run_until)
    assert records and all(r.finished and r.success for r in records)
    return [r.model_dump() for r in records], passes[0]


@pytest.mark.parametrize("policy", ["timely", "lamps"])
def test_skipping_idle_time_changes_no_result(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    skipped, fewer = replay(tokenizer, SPARSE, policy, monkeypatch)
    monkeypatch.setattr(drive, "QUIET_STEPS_BEFORE_SKIP", 10**12)  # step through idle time
    stepped, every = replay(tokenizer, SPARSE, policy, monkeypatch)
    assert skipped == stepped
    # lamps keeps a task open while its robot executes (it waits for the call), so
    # less of its time is idle
    assert fewer < every / (10 if policy == "timely" else 1.5)


def test_a_late_arrival_does_not_step_through_the_idle_time(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, last = SPARSE.tasks[0], SPARSE.tasks[-1]
    late = last.model_copy(update={"arrival_s": 3000.0})
    trace = SPARSE.model_copy(update={"tasks": (first, late)})
    records, passes = replay(tokenizer, trace, "timely", monkeypatch)
    assert records[1]["arrival_s"] == 3000.0
    assert records[1]["segments"][0]["emitted_s"] >= 3000.0
    # stepping through the idle time 0.02 s at a time takes 150,000 passes
    assert passes < 1000
