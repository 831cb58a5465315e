"""PlanTask goal -> TaskRequest, checked at goal time with errors that name the field."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError
from timely_interfaces.action import PlanTask

from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_ros.config import PlannerParams, RobotSpec


class GoalError(ValueError):
    """A PlanTask goal with an invalid field; the message names the field."""


@dataclass(frozen=True)
class CheckedGoal:
    request: TaskRequest
    robot: RobotSpec
    dispatch: bool


DEFAULT_URGENCY: Final = "normal"
_SHUTTING_DOWN = re.compile(r"planner \S+ is shutting down")


def shutting_down(planner: str) -> str:
    """The error of a goal its planner aborted because the planner is going down."""
    return f"planner {planner} is shutting down"


def ended_by_shutdown(error: str) -> bool:
    """The goal was aborted by its planner's shutdown (`shutting_down`), not by its
    own plan: a client may send it again to the next planner."""
    return _SHUTTING_DOWN.fullmatch(error) is not None


def goal_tuf(goal: PlanTask.Goal) -> Tuf:
    """The goal's TUF: a preset by name, or the explicit `tuf` field; never both.
    Neither (urgency empty, every tuf field zero, as a client that fills only the
    robot and the instruction sends it): the 'normal' preset."""
    t = goal.tuf
    values = (t.expected_response_time_s, t.slope, t.initial_utility)
    if not goal.urgency and all(v == 0 for v in values):
        return Tuf.preset(DEFAULT_URGENCY)
    if goal.urgency:
        if goal.urgency not in ("normal", "urgent"):
            raise GoalError(f"urgency {goal.urgency!r} is not 'normal', 'urgent' or empty")
        if any(v != 0 for v in values):  # NaN too: nothing set is silently ignored
            raise GoalError(
                f"urgency {goal.urgency!r} and tuf are both set; give one "
                "(leave urgency empty to use tuf)"
            )
        return Tuf.preset(goal.urgency)
    if not all(math.isfinite(v) for v in values):
        raise GoalError("tuf: all fields must be finite numbers")
    if t.expected_response_time_s <= 0:
        raise GoalError(
            f"tuf.expected_response_time_s must be > 0 (got {t.expected_response_time_s}); "
            "set it or use urgency 'normal'/'urgent'"
        )
    if t.slope > 0:
        raise GoalError(f"tuf.slope must be <= 0 (got {t.slope})")
    if t.initial_utility <= 0:
        raise GoalError(f"tuf.initial_utility must be > 0 (got {t.initial_utility})")
    try:
        return Tuf(
            expected_response_time_s=t.expected_response_time_s,
            slope=t.slope,
            initial_utility=t.initial_utility,
        )
    except ValidationError as err:  # past the bounds that keep priorities finite
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise GoalError(f"tuf.{field}: {first['msg']}") from None


def check_goal(goal: PlanTask.Goal, params: PlannerParams) -> CheckedGoal:
    """Validate every field of a goal against the planner's configuration."""
    robot = params.robot(goal.robot_id)
    if robot is None:
        known = ", ".join(r.id for r in params.robots)
        raise GoalError(
            f"robot_id {goal.robot_id!r} is not served by this planner (robots: {known})"
        )
    if goal.robot_type and goal.robot_type != robot.type:
        raise GoalError(
            f"robot_type {goal.robot_type!r} does not match robot {robot.id!r}, a {robot.type}"
        )
    if goal.dispatch and not robot.dispatch:
        raise GoalError(f"dispatch requested but robot {robot.id!r} is configured without dispatch")
    tuf = goal_tuf(goal)
    try:
        request = TaskRequest(
            robot_id=goal.robot_id, instruction=goal.instruction, scene=goal.scene, tuf=tuf
        )
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise GoalError(f"{field}: {first['msg']}") from None
    return CheckedGoal(request=request, robot=robot, dispatch=goal.dispatch)
