"""A robot runs one goal at a time (robot_turns.py): two goals for one arm, planned
at once, run one after the other on it, never a segment of one between two of the
other's; a goal waiting for the arm takes it when the running goal is cancelled.
Each segment's progress on /timely/robot_progress has its `start` and its `end`,
with how it ended ("done", "cancelled"); a cancelled goal's result holds the plan
as far as it was streamed."""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from timely_ros.robot_turns import RobotTurns

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    NodeProcess,
    RosClient,
    StartNodes,
    lrtrace_goal_fields,
    start_arm_and_planner,
    wait_until,
)

pytestmark = pytest.mark.ros


def test_turns_go_first_come_first_served_and_a_cancelled_waiter_leaves_the_line() -> None:
    turns = RobotTurns()
    never = threading.Event()
    assert turns.take("arm1", "a", never)
    assert turns.take("arm1", "a", never)  # the holder again: at once
    assert turns.take("drone1", "c", never)  # another robot: its own turn
    order: list[str] = []
    waited: list[str] = []
    gone = threading.Event()

    def wait_for(goal: str, cancelled: threading.Event) -> None:
        if turns.take("arm1", goal, cancelled, waited.append):
            order.append(goal)

    b = threading.Thread(target=wait_for, args=("b", never))
    b.start()
    wait_until(lambda: len(waited) == 1, 5, "b waiting")
    d = threading.Thread(target=wait_for, args=("d", gone))
    d.start()
    wait_until(lambda: len(waited) == 2, 5, "d waiting")
    assert waited == ["a", "a"]  # each was told who runs
    gone.set()  # d is cancelled while it waits: it leaves the line
    d.join(5)
    turns.give_back("arm1", "b")  # not b's to give: nothing changes
    assert turns.holder("arm1") == "a" and order == []
    turns.give_back("arm1", "a")
    b.join(5)
    assert order == ["b"] and turns.holder("arm1") == "b"
    assert turns.holder("drone1") == "c"


@dataclass
class _Arm:
    robot: NodeProcess
    planner: NodeProcess
    client: Any  # PlanClient
    progress: list[dict[str, Any]]  # /timely/robot_progress, as received


def _arm(start: StartNodes, ros_client: RosClient, tmp_path: Path, time_scale: float) -> _Arm:
    """The simulated arm, a planner and a client, /timely/robot_progress recorded."""
    from std_msgs.msg import String
    from timely_ros.plan_client import PlanClient

    robot, planner = start_arm_and_planner(start, tmp_path, time_scale=time_scale)
    progress: list[dict[str, Any]] = []
    ros_client.node.create_subscription(
        String, "/timely/robot_progress", lambda m: progress.append(json.loads(m.data)), 200
    )
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60), planner.output()
    return _Arm(robot, planner, client, progress)


def _goal(trace_id: int) -> Any:
    from timely_ros.plan_client import make_goal

    task = lrtrace_goal_fields(trace_id)  # the arm's tasks 9 and 10: several segments each
    return make_goal("arm1", task["instruction"], scene=task["scene"])


def _started(robot_output: str) -> list[str]:
    """The tasks of the segments the arm started, in order."""
    return re.findall(r"event=segment_started robot=arm1 task=(\S+) ", robot_output)


def test_two_goals_for_one_robot_run_one_after_the_other(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus

    arm = _arm(node_processes, ros_client, tmp_path, time_scale=0.05)
    robot, planner, progress = arm.robot, arm.planner, arm.progress
    calls = [arm.client.send(_goal(10)), arm.client.send(_goal(9))]
    for call in calls:
        assert call.done.wait(120), planner.output()[-3000:]
        assert call.status == GoalStatus.STATUS_SUCCEEDED, call.final_result().error
    tasks = {call.segments[0].task_id for call in calls}
    order = _started(robot.output())
    assert set(order) == tasks and len(order) >= 4
    # one goal's segments, then the other's: the arm switched tasks once
    assert sum(a != b for a, b in itertools.pairwise(order)) == 1, order
    planner.wait_for_output(r"event=robot_busy robot=arm1", 10)
    # every segment sent has its start and its end, done
    wait_until(lambda: sum(p["event"] == "end" for p in progress) == len(order), 10, "ends")
    starts = sorted((p["task_id"], p["segment"]) for p in progress if p["event"] == "start")
    ends = [p for p in progress if p["event"] == "end"]
    assert starts == sorted((p["task_id"], p["segment"]) for p in ends)
    assert {p["outcome"] for p in ends} == {"done"}


def test_a_cancelled_goal_ends_its_segment_and_hands_the_robot_on(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from action_msgs.msg import GoalStatus

    arm = _arm(node_processes, ros_client, tmp_path, time_scale=1.0)
    robot, planner, progress = arm.robot, arm.planner, arm.progress
    running = arm.client.send(_goal(10))
    wait_until(lambda: bool(_started(robot.output())), 60, "the arm to start a segment")
    waiting = arm.client.send(_goal(9))
    planner.wait_for_output(r"event=robot_busy robot=arm1", 30)
    arm.client.cancel(running)
    assert running.done.wait(30)
    assert running.status == GoalStatus.STATUS_CANCELED
    # its result holds the plan as far as it was streamed
    ended = running.final_result()
    assert ended.segment_count == len(ended.segments) >= 1
    assert ended.plan == "".join(segment.text for segment in ended.segments)
    assert waiting.done.wait(120), planner.output()[-3000:]
    assert waiting.status == GoalStatus.STATUS_SUCCEEDED, waiting.final_result().error
    cancelled_task = running.segments[0].task_id
    wait_until(
        lambda: any(p["event"] == "end" and p["task_id"] == cancelled_task for p in progress),
        10,
        "the cancelled segment's end",
    )
    end = next(p for p in progress if p["event"] == "end" and p["task_id"] == cancelled_task)
    assert end["outcome"] == "cancelled" and "cancelled" in end["error"]
    # the arm stopped the cancelled segment before it started the next goal's first
    output = robot.output()
    stopped = output.index(f"event=segment_cancelled robot=arm1 task={cancelled_task}")
    next_task = waiting.segments[0].task_id
    assert stopped < output.index(f"event=segment_started robot=arm1 task={next_task}")
