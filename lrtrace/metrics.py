"""Per-task metrics (the paper's §7.1 definitions) and their distributions.

- response time: arrival -> start of the first action on the robot (dispatch of the
  first segment, network latency included);
- time utility: the task's TUF (Eq. 1) on its response time;
- completion time: arrival -> end of the last segment's execution;
- waiting time: completion time minus the robot's own execution time, i.e. all the
  delay due to planning.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lrtrace.results_format import RunRecord, TaskRecord

METRICS: tuple[str, ...] = ("utility", "response_s", "waiting_s", "completion_s")


@dataclass(frozen=True)
class TaskMetrics:
    task_id: str
    trace_id: int
    urgency: str
    robot_type: str
    utility: float
    max_utility: float
    response_s: float
    waiting_s: float
    completion_s: float
    execution_s: float


def task_metrics(task: TaskRecord) -> TaskMetrics | None:
    """None for a task that did not complete (failed or interrupted): it has no
    response or completion time to report."""
    if not (task.finished and task.success and task.segments):
        return None
    response = task.segments[0].exec_start_s - task.arrival_s
    completion = task.segments[-1].exec_end_s - task.arrival_s
    execution = sum(s.exec_end_s - s.exec_start_s for s in task.segments)
    return TaskMetrics(
        task_id=task.task_id,
        trace_id=task.trace_id,
        urgency=task.urgency,
        robot_type=task.robot_type,
        utility=task.tuf.utility(response),
        max_utility=task.tuf.initial_utility,
        response_s=response,
        waiting_s=completion - execution,
        completion_s=completion,
        execution_s=execution,
    )


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        if not values:
            nan = float("nan")
            return cls(0, nan, nan, nan, nan)
        arr = np.asarray(values, dtype=float)
        p50, p95, p99 = np.percentile(arr, [50, 95, 99])
        return cls(len(arr), float(arr.mean()), float(p50), float(p95), float(p99))


@dataclass(frozen=True)
class GroupStats:
    """One (run, task group) cell of the report."""

    run: str
    group: str  # "trace 6", "urgent-drone", "all"
    tasks: int  # tasks of this group in the run
    completed: int
    utility: Summary
    utility_of_max: float  # mean utility / mean maximum utility (the paper's "81.5%")
    response_s: Summary
    waiting_s: Summary
    completion_s: Summary


def _group(run: str, group: str, tasks: int, ms: list[TaskMetrics]) -> GroupStats:
    max_u = float(np.mean([m.max_utility for m in ms])) if ms else float("nan")
    util = Summary.of([m.utility for m in ms])
    return GroupStats(
        run=run,
        group=group,
        tasks=tasks,
        completed=len(ms),
        utility=util,
        utility_of_max=util.mean / max_u if ms else float("nan"),
        response_s=Summary.of([m.response_s for m in ms]),
        waiting_s=Summary.of([m.waiting_s for m in ms]),
        completion_s=Summary.of([m.completion_s for m in ms]),
    )


def run_stats(run: RunRecord) -> list[GroupStats]:
    """Per trace id (the paper's task types), per task class, per fleet variant (when
    the trace's agents name any; `variant base` the others), and overall."""
    pairs = [(t, task_metrics(t)) for t in run.tasks]
    out: list[GroupStats] = []
    for trace_id in sorted({t.trace_id for t in run.tasks}):
        sel = [(t, m) for t, m in pairs if t.trace_id == trace_id]
        out.append(_group(run.label, f"trace {trace_id}", len(sel), _done(sel)))
    for cls in sorted({f"{t.urgency}-{t.robot_type}" for t in run.tasks}):
        sel = [(t, m) for t, m in pairs if f"{t.urgency}-{t.robot_type}" == cls]
        out.append(_group(run.label, cls, len(sel), _done(sel)))
    if any(t.variant for t in run.tasks):
        for variant in sorted({t.variant for t in run.tasks}):
            sel = [(t, m) for t, m in pairs if t.variant == variant]
            out.append(_group(run.label, f"variant {variant or 'base'}", len(sel), _done(sel)))
    out.append(_group(run.label, "all", len(pairs), _done(pairs)))
    return out


def _done(pairs: Iterable[tuple[TaskRecord, TaskMetrics | None]]) -> list[TaskMetrics]:
    return [m for _, m in pairs if m is not None]
