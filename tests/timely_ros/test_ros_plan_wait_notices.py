"""`PlanWaitNotices`: what `timely plan` tells about its goal's waits, each once:
its robot busy with another goal (from the status), a segment held for approval
(from the approvals list, by goal id); nothing about other goals, nothing before
the goal is sent or after it ended, nothing from a message it cannot read."""

from __future__ import annotations

import json

import pytest
from std_msgs.msg import String
from timely_interfaces.msg import ServiceStatus
from timely_ros.config import planner_names
from timely_ros.plan_wait_notices import PlanWaitNotices

from tests.timely_ros.ros_support import RosClient

pytestmark = pytest.mark.ros

MINE, OTHER = "ab" * 16, "cd" * 16


def _notices(ros_client: RosClient, turns: bool = True) -> tuple[PlanWaitNotices, list[str]]:
    told: list[str] = []
    notices = PlanWaitNotices(
        ros_client.node, planner_names("notices_test"), "arm1", turns, told.append
    )
    return notices, told


def _status(goal_ids: list[str]) -> ServiceStatus:
    return ServiceStatus(robot_ids=["arm1", "drone1"], robot_goal_ids=goal_ids)


def test_a_robot_busy_with_another_goal_is_told_once(ros_client: RosClient) -> None:
    notices, told = _notices(ros_client)
    notices._on_status(_status([OTHER, ""]))
    assert told == []  # not sent yet
    notices.goal_id = MINE
    notices._on_status(_status([MINE, OTHER]))  # the robot runs this goal
    notices._on_status(_status(["", OTHER]))  # another robot's goal
    assert told == []
    notices._on_status(_status([OTHER, ""]))
    notices._on_status(_status([OTHER, ""]))
    assert told == [
        f"robot arm1 is busy with goal {OTHER}; this goal's segments go to it once that goal ends"
    ]
    plan_only, quiet = _notices(ros_client, turns=False)  # takes no turns
    plan_only.goal_id = MINE
    plan_only._on_status(_status([OTHER, ""]))
    assert quiet == []


def test_a_segment_held_for_approval_is_told_once_with_the_command(ros_client: RosClient) -> None:
    notices, told = _notices(ros_client)
    notices.goal_id = MINE
    mine = {"request_id": "r1", "goal_id": MINE, "segment": 1, "text": "tc(180); "}
    other = {**mine, "request_id": "r2", "goal_id": OTHER}
    for pending in ([other], [other, mine], [mine]):
        notices._on_approvals(String(data=json.dumps({"pending": pending})))
    notices._on_approvals(String(data="not json"))
    notices._on_approvals(String(data=json.dumps({"pending": ["r1"]})))
    assert told == [
        "segment 1 ('tc(180);') waits for an operator's approval: timely approve r1 (or --deny)"
    ]
    notices.ended.set()
    notices._on_approvals(String(data=json.dumps({"pending": [{**mine, "request_id": "r3"}]})))
    assert len(told) == 1
