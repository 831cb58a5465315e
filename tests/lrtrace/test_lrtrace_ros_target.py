"""The ROS 2 target is imported lazily: without ROS 2 it is one clear error, and the
timely_ros module's failures become one clear error too."""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

import pytest

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.replay.targets import make_target
from lrtrace.replay.targets.ros import RosTarget
from lrtrace.results_format import TaskRecord
from lrtrace.workload import preset


def test_missing_ros_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def no_ros(name: str, package: str | None = None) -> ModuleType:
        if name.startswith(("timely_ros", "rclpy")):
            raise ImportError("No module named 'rclpy'")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", no_ros)
    with pytest.raises(LrtraceError, match="--target ros needs ROS 2"):
        make_target("ros", profile="", model=None, threads=None, network_latency_s=0.008)


def test_planner_errors_become_lrtrace_errors() -> None:
    module = ModuleType("fake_replay_target")
    calls: list[dict[str, object]] = []

    def replay(**kwargs: object) -> None:
        calls.append(kwargs)
        raise RuntimeError("no timely planner answered within 30 s")

    module.replay = replay  # type: ignore[attr-defined]
    target = RosTarget(module, 0.008)
    trace = compose(preset(1).model_copy(update={"duration_s": 10.0}), load_catalog())
    records: list[TaskRecord] = []
    with pytest.raises(LrtraceError, match="ROS 2 replay: no timely planner answered"):
        target.run(trace, "timely", None, records, lambda r: None, threading.Event())
    assert calls and calls[0]["policy"] == "timely" and calls[0]["trace"] is trace
    with pytest.raises(LrtraceError, match="--max-batch is not supported"):
        target.run(trace, "timely", 4, records, lambda r: None, threading.Event())


def test_a_goal_that_ended_without_a_result_is_a_failed_record() -> None:
    """The planner went away or restarted: the call settles with no result (two
    planners on one domain made the replay crash on it)."""
    from timely_interfaces.action import PlanTask
    from timely_ros.plan_client import PlanCall
    from timely_ros.replay_target import _finish, _Open

    from lrtrace.results_format import TaskRecord
    from timely_core.scheduling.tuf import Tuf

    record = TaskRecord(
        task_id="t00001", trace_id=1, agent_id="drone1", robot_type="drone",
        urgency="normal", tuf=Tuf.preset("normal"), arrival_s=0.0,
    )  # fmt: skip
    call = PlanCall(goal=PlanTask.Goal(robot_id="drone1"), accepted=True)
    call.client_error = "goal for drone1 ended without a result: the planner restarted"
    _finish(_Open(record, call), lambda _robot, _text: 1)
    assert record.finished and not record.success
    assert record.error == call.client_error
