"""Results records for report and plot tests: one drone task of trace 1, done (one
segment, executed 1.008 s to `exec_end_s`) or left open by an interrupted replay."""

from __future__ import annotations

from typing import Literal

from lrtrace.results_format import SegmentRecord, TaskRecord
from timely_core.scheduling.tuf import Tuf


def task_record(
    task_id: str,
    done: bool = True,
    urgency: Literal["normal", "urgent"] = "normal",
    exec_end_s: float = 4.0,
) -> TaskRecord:
    segment = SegmentRecord(
        index=0,
        text="mf(100);",
        statements=1,
        emitted_s=1.0,
        dispatched_s=1.008,
        exec_start_s=1.008,
        exec_end_s=exec_end_s,
    )
    return TaskRecord(
        task_id=task_id,
        trace_id=1,
        agent_id="drone1",
        robot_type="drone",
        urgency=urgency,
        tuf=Tuf.preset("normal"),
        arrival_s=0.5,
        segments=[segment] if done else [],
        success=done,
        finished=done,
        error="" if done else "interrupted",
    )
