"""Every replay target refuses, before any run, a task on a robot of another type than
its catalog task's, naming the task, its type, the agent and the agent's type."""

from __future__ import annotations

import threading
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from lrtrace import trace_format
from lrtrace.catalog import load_catalog
from lrtrace.cli import main
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.profiles import PAPER_PROFILE
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.target import ReplayTarget
from lrtrace.replay.targets.ros import RosTarget
from lrtrace.replay.targets.service import ServiceTarget
from lrtrace.replay.targets.sim import SimTarget
from lrtrace.replay.task_check import check_robot_types
from lrtrace.results_format import TaskRecord
from lrtrace.trace_format import TraceFile
from lrtrace.workload import WorkloadSpec
from timely_core.engine.protocol import Engine

CATALOG = load_catalog()
# drone task 1 and arm task 9, one agent of each type
TRACE = compose(
    WorkloadSpec(eps=1, max_tpe=1, trace_ids=(1, 9), agents=1, duration_s=8, seed=3), CATALOG
)


def on_arm(trace: TraceFile, count: int) -> TraceFile:
    """`trace` with its first `count` drone tasks given to the arm agent (and typed as
    arm tasks, so the trace itself is consistent)."""
    tasks = list(trace.tasks)
    drone = [i for i, t in enumerate(tasks) if CATALOG[t.trace_id].robot_type == "drone"]
    assert len(drone) >= count
    for i in drone[:count]:
        tasks[i] = tasks[i].model_copy(update={"agent_id": "arm1", "robot_type": "arm"})
    doc = trace.model_copy(update={"tasks": tuple(tasks)}).model_dump(mode="json")
    return TraceFile.model_validate(doc)


def targets(tokenizer: Any) -> list[ReplayTarget]:
    """The three targets, none of them able to run (no engine, no planner): the check
    must not need one."""
    fake_engine = cast(Engine, object())
    return [
        SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG),
        ServiceTarget(fake_engine, tokenizer, ExecTimeSampler(), "torch:none"),
        RosTarget(ModuleType("no_planner"), 0.008),
    ]


def test_every_target_refuses_a_drone_task_on_an_arm(tokenizer: Any) -> None:
    bad = on_arm(TRACE, 1)
    task = next(t for t in bad.tasks if t.trace_id == 1 and t.agent_id == "arm1")
    index = bad.tasks.index(task)
    for target in targets(tokenizer):
        with pytest.raises(LrtraceError) as caught:
            target.check(bad)
        message = str(caught.value)
        assert message.count("\n") == 0, message  # one task: one line
        where = f"tasks.{index}.agent_id ({task.task_id})"
        what = "trace 1 is a drone task but its agent arm1 is an arm"
        assert f"{where}: {what}" in message, (target.kind, message)
        target.check(TRACE)  # the composed trace passes every target


def test_every_wrong_task_is_listed_one_per_line() -> None:
    bad = on_arm(TRACE, 3)
    with pytest.raises(LrtraceError, match=r"robots of another type") as caught:
        check_robot_types(bad, CATALOG)
    lines = str(caught.value).splitlines()
    assert lines[0].endswith("3 problems:"), lines
    assert len(lines) == 4 and all(
        "is a drone task but its agent arm1 is an arm" in x for x in lines[1:]
    )


def test_a_trace_id_the_catalog_does_not_know_is_left_to_the_target() -> None:
    odd = TRACE.tasks[0].model_copy(update={"trace_id": 99})
    check_robot_types(TRACE.model_copy(update={"tasks": (odd,)}), CATALOG)


def test_replay_refuses_it_before_the_first_run(
    tmp_path: Path, tokenizer_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, out = tmp_path / "t.lrt", tmp_path / "r.json"
    trace_format.write(on_arm(TRACE, 1), path)
    argv = ["replay", str(path), "--tokenizer", str(tokenizer_path), "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "trace 1 is a drone task but its agent arm1 is an arm" in err, err
    assert not out.exists()  # no run started


def test_the_sim_target_would_otherwise_fail_at_run_time(tokenizer: Any) -> None:
    """Why the check is there: the run plans the drone's golden plan for the arm."""
    target = SimTarget(PAPER_PROFILE, tokenizer, ExecTimeSampler(), CATALOG)
    records: list[TaskRecord] = []
    target.run(on_arm(TRACE, 1), "timely", None, records, lambda r: None, threading.Event())
    failed = [r for r in records if not r.success]
    assert [(r.trace_id, r.agent_id) for r in failed] == [(1, "arm1")], failed
