"""Safety limits in the planner's configuration and the approval desk's rules, on
their own (no DDS here)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from timely_ros.approval_desk import ApprovalAnswer, ApprovalDesk
from timely_ros.config import (
    ConfigError,
    parse_bringup,
    planner_params,
    planner_to_parameters,
    unflatten,
)

FENCE = {"x_min": -100, "x_max": 300, "y_min": -200, "y_max": 200, "z_min": 0, "z_max": 250}


def _planner(drone: dict[str, Any], **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"robots": ["drone1"], "drone1": {"type": "drone", **drone}, **params}
    return {"timely_planner": {"ros__parameters": body}}


def test_limits_round_trip_through_ros_parameters() -> None:
    limits = {"geofence_cm": FENCE, "max_altitude_cm": 200, "approval_skills": ["tc"]}
    params = parse_bringup(_planner({"limits": limits}, approval_timeout_s=12.5)).planner
    assert params is not None and params.approval_timeout_s == 12.5
    flat = planner_to_parameters(params)
    assert flat["drone1.limits.geofence_cm.x_min"] == -100
    assert flat["drone1.limits.approval_skills"] == ["tc"]
    assert "drone1.limits.workspace_mm" not in flat  # unset limits are not parameters
    assert planner_params(unflatten(flat)) == params
    bare = parse_bringup(_planner({})).planner
    assert bare is not None and bare.robots[0].limits is None
    assert not any(k.startswith("drone1.limits") for k in planner_to_parameters(bare))


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"geofence_cm": {**FENCE, "x_min": 400}}, "geofence_cm.*x_min .* must be below x_max"),
        ({"max_altitude_cm": -5}, "limits.max_altitude_cm"),
        ({"forbidden_skills": ["fly_to_moon"]}, "limits.forbidden_skills: 'fly_to_moon'"),
        ({"workspace_mm": FENCE}, "limits.workspace_mm: not a limit of the drone"),
        ({"speed": 3}, "limits.speed"),
    ],
)
def test_bad_limits_name_the_field(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_bringup(_planner({"limits": limits}))


def _desk() -> tuple[ApprovalDesk, list[list[dict[str, object]]]]:
    published: list[list[dict[str, object]]] = []
    return ApprovalDesk(published.append), published


def test_an_answer_decides_the_robots_oldest_request() -> None:
    desk, published = _desk()
    first = desk.open("drone1", "g1", "t1", 1, "tc(180);", ("tc needs approval",))
    second = desk.open("drone1", "g2", "t2", 1, "tc(90);", ("tc needs approval",))
    assert [p["request_id"] for p in published[-1]] == [first.request_id, second.request_id]
    assert "denied" in desk.answer(ApprovalAnswer(robot_id="drone1", approve=False, reason="no"))
    assert first.outcome == "denied" and first.reason == "no" and second.outcome is None
    assert desk.answer(ApprovalAnswer(request_id=second.request_id, approve=True)).endswith(
        "approved"
    )
    assert desk.wait(second, 5.0, threading.Event()).outcome == "approved"
    assert published[-1] == [] and desk.pending() == []
    assert "no pending approval" in desk.answer(ApprovalAnswer(robot_id="drone1", approve=True))


def test_an_unanswered_request_times_out_and_a_cancel_ends_the_wait() -> None:
    desk, _ = _desk()
    waiting = desk.open("drone1", "g1", "t1", 1, "tc(180);", ("tc needs approval",))
    assert desk.wait(waiting, 0.01, threading.Event()).outcome == "timed out"
    assert desk.pending() == []
    # a late answer changes nothing
    desk.answer(ApprovalAnswer(request_id=waiting.request_id, approve=True))
    assert waiting.outcome == "timed out"
    stop = threading.Event()
    stop.set()
    cancelled = desk.open("drone1", "g2", "t2", 1, "tc(180);", ())
    assert desk.wait(cancelled, 60.0, stop).outcome == "cancelled"
