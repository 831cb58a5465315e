"""Runs a segment on a robot with the plan's own semantics.

A segment is plan text (`?sw('cat')==True{tp();->True;}`, `_1=lk('cup');lg(_1);`):
conditionals, loops, variables and returns only mean something when the robot
evaluates them, with each task's variables kept from one segment to the next. The
flat list of calls in an ExecuteSkill goal is for display and for checking the
skills up front; this is what actually runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from robot_models.errors import PlanRuntimeError
from robot_models.executors import ProgressCallback
from robot_models.interpreter import PlanInterpreter
from robot_models.language import RobotPlanLanguage, load_language
from robot_models.parser import PlanParser
from robot_models.plan_ast import BoundCall
from robot_models.skills import Skill, SkillValue
from timely_ros.backends.base import Backend, SkillFailed

CallProgress = Callable[[int, float, str], None]  # (index of the call, fraction done, status)


class SegmentStopped(Exception):
    """The segment was cancelled while a call was running."""


def typed_value(skill: Skill, text: str) -> SkillValue:
    """A backend's text result as the value the skill declares it returns."""
    if skill.returns == "none":
        return None
    if skill.returns == "bool":
        return text.strip() == "True"
    try:
        if skill.returns == "int":
            return int(float(text))
        if skill.returns == "float":
            return float(text)
    except ValueError:
        raise PlanRuntimeError(
            f"{skill.short} returned {text!r}, expected a {skill.returns}"
        ) from None
    return text


class BackendExecutor:
    """robot_models' `SkillExecutor` over a ROS backend, for one segment at a time."""

    def __init__(self, backend: Backend, robot_type: str) -> None:
        self._backend = backend
        self._robot_type = robot_type
        self.stop = threading.Event()
        self.on_progress: CallProgress = lambda _i, _f, _s: None
        self.calls = 0  # calls started in the current segment

    @property
    def robot_type(self) -> str:
        return self._robot_type

    def execute(self, call: BoundCall, progress: ProgressCallback | None = None) -> SkillValue:
        if self.stop.is_set():
            raise SegmentStopped
        skill = self._backend.skill_set.get(call.name)
        index = self.calls
        self.calls += 1
        try:
            text = self._backend.run(
                skill, call.args, self.stop, lambda f, status: self.on_progress(index, f, status)
            )
        except SkillFailed as err:
            raise SkillFailed(f"{skill.name}: {err}") from None
        if self.stop.is_set():
            raise SegmentStopped
        return typed_value(skill, text)


@dataclass
class _TaskPlan:
    parser: PlanParser  # fed every segment in order: it knows the plan's variables
    interpreter: PlanInterpreter
    executor: BackendExecutor


@dataclass(frozen=True)
class SegmentOutcome:
    calls: int  # skill calls executed
    returned: bool  # the plan ran a `->value;` statement
    value: str  # returned value as text ("" if none)


class SegmentRunner:
    """One per robot: parses each segment and runs it, keeping every task's plan
    state (variables, whether it returned) for its later segments."""

    def __init__(self, backend: Backend, robot_type: str, max_tasks: int = 256) -> None:
        self._backend = backend
        self._language: RobotPlanLanguage = load_language(robot_type)
        self._robot_type = robot_type
        self._tasks: OrderedDict[str, _TaskPlan] = OrderedDict()
        self._max_tasks = max_tasks

    def _plan(self, task_id: str) -> _TaskPlan:
        plan = self._tasks.pop(task_id, None)
        if plan is None:
            executor = BackendExecutor(self._backend, self._robot_type)
            plan = _TaskPlan(
                self._language.new_parser(),
                PlanInterpreter(executor, self._backend.skill_set),
                executor,
            )
        self._tasks[task_id] = plan  # most recently used last
        while len(self._tasks) > self._max_tasks:
            self._tasks.popitem(last=False)
        return plan

    def run(
        self,
        task_id: str,
        text: str,
        stop: threading.Event,
        on_progress: CallProgress,
        segment_index: int | None = None,
    ) -> SegmentOutcome:
        """Run `text` (complete statements) for `task_id`. Segment 0 opens a new plan:
        whatever an earlier task of the same id left (a planner that restarted and
        reused its ids) is dropped, so it can neither skip nor misread the new plan.
        Raises ValueError (syntax, validation, runtime) naming the problem,
        SegmentStopped on cancel, and the backend's SkillFailed when the robot cannot
        do a call."""
        if segment_index == 0:
            self.forget(task_id)
        plan = self._plan(task_id)
        statements = plan.parser.feed(text)  # text of an unfinished statement waits for more
        plan.executor.stop = stop
        plan.executor.on_progress = on_progress
        plan.executor.calls = 0
        outcome = plan.interpreter.run(statements)
        value = "" if outcome.value is None else str(outcome.value)
        return SegmentOutcome(plan.executor.calls, outcome.returned, value)

    def forget(self, task_id: str) -> None:
        self._tasks.pop(task_id, None)
