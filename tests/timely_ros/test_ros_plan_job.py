"""How a PlanTask goal's end is recorded in the service: a robot's failure of a
segment ends its task as failed with the robot's reason, a lost robot as failed,
and only a client's cancel as cancelled. The job runs on a real service (a
background thread on a real clock, the simulated engine at no cost) with a
scripted robot link and goal handle: no DDS needed."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from builtin_interfaces.msg import Time
from timely_ros.config import RobotSpec
from timely_ros.goals import CheckedGoal
from timely_ros.plan_job import JobHooks, PlanJob
from timely_ros.robot_link import Outcome, SegmentRun

from tests.timely_core.core_support import TinyLanguage, eos_id, make_tokenizer, plan_script
from timely_core.clock import MonotonicClock, VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.request import TaskRequest
from timely_core.service import PlanningService

PLANS = {"evade": "mu(30); tr(45); md(30);"}


@dataclass
class ScriptedLink:
    """The robot: each segment ends as `outcomes` says (index -> Outcome; done
    otherwise); `cancel_at` stands for a client cancelling while that one runs."""

    outcomes: dict[int, Outcome] = field(default_factory=dict)
    on_execute: Callable[[int], None] = lambda _index: None
    robot: Any = field(default_factory=lambda: SimpleNamespace(action_name="/drone1/execute"))
    ran: list[int] = field(default_factory=list)
    hangs: tuple[int, ...] = ()  # segments the robot runs until they are stopped

    def wait_ready(self, _timeout_s: float) -> bool:
        return True

    def execute(self, segment: Any, run: SegmentRun, _relay: Any) -> Outcome:
        self.ran.append(segment.index)
        self.on_execute(segment.index)
        if segment.index in self.hangs:  # runs until it is stopped
            run.cancelled.wait(30)
            return Outcome(success=False, cancelled=True, message="cancelled")
        return self.outcomes.get(segment.index, Outcome(success=True, cancelled=False, message=""))


class GoalHandle:
    """The action server's view of the goal, as far as a job touches it."""

    def __init__(self) -> None:
        self.goal_id = SimpleNamespace(uuid=bytes(range(16)))
        self.is_cancel_requested = False
        self.status = ""

    def publish_feedback(self, _feedback: Any) -> None:
        return None

    def succeed(self) -> None:
        self.status = "succeeded"

    def abort(self) -> None:
        self.status = "aborted"

    def canceled(self) -> None:
        self.status = "cancelled"


@pytest.fixture
def service() -> Iterator[PlanningService]:
    engine = SimulatedEngine(
        VirtualClock(),
        LatencyModel(),
        plan_script(PLANS),
        SimulatedEngineConfig(eos_token_id=eos_id()),
    )
    service = PlanningService(engine, make_tokenizer(), clock=MonotonicClock())
    service.register_robot("drone1", TinyLanguage())
    service.start()
    yield service
    service.stop()


def _job(
    service: PlanningService, link: ScriptedLink, result_timeout_s: float = math.inf, **hooks: Any
) -> tuple[PlanJob, GoalHandle]:
    goal = GoalHandle()
    checked = CheckedGoal(
        TaskRequest(robot_id="drone1", instruction="evade"),
        RobotSpec(id="drone1", type="drone"),
        dispatch=True,
    )
    job = PlanJob(
        service,
        goal,
        checked,
        link,
        JobHooks(
            now_stamp=lambda: Time(),
            publish_segment=lambda _msg: None,
            publish_progress=lambda _report: None,
            log=lambda _line: None,
            **hooks,
        ),
        executor_wait_s=1.0,
        result_timeout_s=result_timeout_s,
    )
    return job, goal


def _run(service: PlanningService, link: ScriptedLink, **hooks: Any) -> tuple[Any, GoalHandle]:
    job, goal = _job(service, link, **hooks)
    return job.execute(), goal


def _failed(reason: str) -> Outcome:
    return Outcome(success=False, cancelled=False, message=reason)


def test_a_robots_failure_ends_the_task_as_failed_with_its_reason(
    service: PlanningService,
) -> None:
    link = ScriptedLink({1: _failed("motor stalled")})
    result, goal = _run(service, link)
    assert goal.status == "aborted" and link.ran == [0, 1]  # nothing after the failure
    assert result.error == "robot drone1 aborted segment 1: motor stalled"
    stats = service.stats()
    assert (stats.failed, stats.cancelled, stats.succeeded) == (1, 0, 0)
    [task_result] = _results(service)
    assert "robot drone1: segment 1 failed: motor stalled" in task_result.error
    assert result.response_time_s == pytest.approx(task_result.response_time_s)


def test_a_lost_robot_ends_the_task_as_failed(service: PlanningService) -> None:
    lost = Outcome(
        success=False, cancelled=False, message="robot drone1 stopped responding", robot_lost=True
    )
    result, goal = _run(service, ScriptedLink({0: lost}), replan_on_failure=True)
    assert goal.status == "aborted" and result.error == "robot drone1 stopped responding"
    stats = service.stats()
    assert (stats.failed, stats.cancelled, stats.rollbacks) == (1, 0, 0)  # not replanned
    [task_result] = _results(service)
    assert task_result.error == "robot drone1 stopped responding"


def test_only_a_clients_cancel_ends_the_task_as_cancelled(service: PlanningService) -> None:
    def cancel_during(index: int) -> None:
        if index == 1:  # the client cancels while segment 1 runs; the robot stops
            goal.is_cancel_requested = True
            threading.Thread(target=job.cancel).start()

    cancelled = Outcome(success=False, cancelled=True, message="cancelled")
    link = ScriptedLink({1: cancelled}, on_execute=cancel_during)
    job, goal = _job(service, link)
    result = job.execute()
    assert goal.status == "cancelled" and result.error == "cancelled by the client"
    stats = service.stats()
    assert (stats.failed, stats.cancelled) == (0, 1)


def _results(service: PlanningService) -> list[Any]:
    """The results of the service's ended tasks."""
    state = service._state
    return [state.handles[t].result(timeout_s=5) for t in state.finished]


def test_a_goal_the_planner_stops_ends_the_task_as_failed_with_its_reason(
    service: PlanningService,
) -> None:
    """The goal runs past its result timeout while the robot runs segment 1: the
    planner stops the robot and the plan, and the task fails with the reason."""
    link = ScriptedLink(hangs=(1,))
    job, goal = _job(service, link, result_timeout_s=0.5)
    result = job.execute()
    assert goal.status == "aborted" and link.ran == [0, 1]
    assert result.error.startswith("timed out: no result within result_timeout_s=0.5 s")
    stats = service.stats()
    assert (stats.failed, stats.cancelled) == (1, 0)
    [task_result] = _results(service)
    assert task_result.error == result.error
