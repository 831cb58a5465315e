"""Metrics follow the paper's definitions exactly, on hand-built task records."""

from __future__ import annotations

import math

import pytest

from lrtrace.metrics import Summary, run_stats, task_metrics
from lrtrace.results_format import RunRecord, SegmentRecord, TaskRecord
from timely_core.scheduling.tuf import Tuf


def seg(i: int, emitted: float, start: float, end: float) -> SegmentRecord:
    return SegmentRecord(
        index=i,
        text="x;",
        statements=1,
        emitted_s=emitted,
        dispatched_s=emitted + 0.008,
        exec_start_s=start,
        exec_end_s=end,
    )


def record(
    task_id: str, trace_id: int, urgency: str, arrival: float, segs: list[SegmentRecord]
) -> TaskRecord:
    return TaskRecord(
        task_id=task_id,
        trace_id=trace_id,
        agent_id="drone1",
        robot_type="drone",
        urgency=urgency,  # type: ignore[arg-type]
        tuf=Tuf.preset(urgency),  # type: ignore[arg-type]
        arrival_s=arrival,
        segments=segs,
        success=True,
        finished=True,
    )


def test_two_segment_task() -> None:
    # arrival 10; first action at 10.3; exec 10.3-12.3; second segment waits 0.1 s; exec 12.4-13.4
    t = record("a", 6, "urgent", 10.0, [seg(0, 10.292, 10.3, 12.3), seg(1, 12.392, 12.4, 13.4)])
    m = task_metrics(t)
    assert m is not None
    assert m.response_s == pytest.approx(0.3)
    assert m.completion_s == pytest.approx(3.4)
    assert m.execution_s == pytest.approx(3.0)
    assert m.waiting_s == pytest.approx(0.4)  # 0.3 before the first + 0.1 between
    assert m.utility == pytest.approx(2 - 6.67 * 0.1)  # Eq. 1, urgent TUF


def test_unfinished_or_failed_tasks_have_no_metrics() -> None:
    t = record("a", 1, "normal", 0.0, [seg(0, 1.0, 1.0, 2.0)])
    assert task_metrics(t.model_copy(update={"finished": False})) is None
    assert task_metrics(t.model_copy(update={"success": False})) is None
    assert task_metrics(t.model_copy(update={"segments": []})) is None


def test_summary_percentiles() -> None:
    s = Summary.of([float(i) for i in range(1, 101)])
    assert (s.n, s.mean, s.p50) == (100, 50.5, 50.5)
    assert s.p99 == pytest.approx(99.01)
    assert math.isnan(Summary.of([]).mean)


def test_groups_per_trace_class_and_all() -> None:
    tasks = [
        record("a", 1, "normal", 0.0, [seg(0, 0.5, 0.508, 1.0)]),  # response 0.508 -> utility 1
        record("b", 6, "urgent", 0.0, [seg(0, 0.492, 0.5, 1.0)]),  # response 0.5 -> utility 0
        record("c", 6, "urgent", 0.0, []).model_copy(update={"finished": False}),
    ]
    stats = {
        g.group: g
        for g in run_stats(
            RunRecord(label="p", policy="p", target="sim", engine="e", simulated=True, tasks=tasks)
        )
    }
    assert set(stats) == {"trace 1", "trace 6", "normal-drone", "urgent-drone", "all"}
    assert stats["trace 6"].tasks == 2 and stats["trace 6"].completed == 1
    assert stats["trace 6"].utility.mean == pytest.approx(0.0, abs=1e-9)
    assert stats["trace 1"].utility.mean == 1.0
    assert stats["all"].utility_of_max == pytest.approx(0.5 / 1.5)  # mean 0.5 of mean max 1.5


def test_report_json_has_null_for_groups_without_completed_tasks() -> None:
    import json

    from lrtrace.report import stats_json
    from lrtrace.results_format import ResultsFile
    from lrtrace.workload import preset

    failed = record("a", 6, "urgent", 0.0, []).model_copy(update={"success": False, "error": "x"})
    run = RunRecord(
        label="p", policy="p", target="service", engine="torch:x", simulated=False, tasks=[failed]
    )
    doc = stats_json(ResultsFile(workload=preset(1), runs=[run]))
    text = json.dumps(doc, allow_nan=False)  # strict JSON: no NaN anywhere
    assert doc["simulated"] is False and "measured" in doc["note"]
    cell = next(s for s in doc["stats"] if s["group"] == "trace 6")
    assert cell["tasks"] == 1 and cell["completed"] == 0 and cell["utility"]["mean"] is None
    assert "NaN" not in text
