"""The planner's link to a robot, against a real ExecuteSkill server in the test
process (over Fast DDS) that confirms goals only when told to:
- a segment cancelled after it was sent but before the robot accepted it must still
  be cancelled on the robot once it is accepted (it used to run whole: the cancel
  found no goal handle yet);
- a robot that is up but does not answer a goal request within the answer timeout
  fails the segment instead of holding it forever, and the goal, accepted late, is
  stopped;
- a segment cancelled while the robot runs it returns once the robot has stopped
  (so its task ends after the motion, not during it), or after the bound when the
  robot never says so."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.timely_ros.ros_support import (
    RosClient,
    assert_stopped_unrun,
    run_until_cancelled,
    wait_until,
)

if TYPE_CHECKING:
    from timely_ros.robot_link import Outcome

pytestmark = pytest.mark.ros


@contextlib.contextmanager
def slow_robot(
    ros_client: RosClient, name: str, braking_s: float = 0.0, answers_cancel: bool = True
) -> Iterator[tuple[threading.Event, list[str]]]:
    """An ExecuteSkill server at /NAME/execute_skill that accepts a goal once the
    yielded event is set, and records what happens to it in the yielded list;
    told to stop, it takes `braking_s` to, and without `answers_cancel` it never
    ends the goal."""
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.action.server import ServerGoalHandle
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.node import Node
    from timely_interfaces.action import ExecuteSkill
    from timely_ros.qos import action_server_qos

    accept = threading.Event()
    closed = threading.Event()
    events: list[str] = []

    def on_goal(_request: ExecuteSkill.Goal) -> GoalResponse:
        accept.wait(10)  # the robot is slow to confirm the goal
        events.append("accepted")
        return GoalResponse.ACCEPT

    def on_cancel(_handle: ServerGoalHandle) -> CancelResponse:
        events.append("cancel requested")
        return CancelResponse.ACCEPT

    def execute(handle: ServerGoalHandle) -> ExecuteSkill.Result:
        if braking_s or not answers_cancel:
            while not handle.is_cancel_requested:
                time.sleep(0.01)
            if not answers_cancel:
                closed.wait(30)  # the goal stays open until the test is done
            time.sleep(braking_s)
            events.append("stopped")
            handle.canceled()
            return ExecuteSkill.Result(success=False, message="stopped")
        if not run_until_cancelled(handle, 3.0):  # the segment's motion
            events.append("stopped")
            return ExecuteSkill.Result(success=False, message="stopped")
        events.append("ran the whole segment")
        return ExecuteSkill.Result(success=True)

    group = ReentrantCallbackGroup()
    robot = Node(f"{name}_robot", context=ros_client.context)
    server = ActionServer(
        robot,
        ExecuteSkill,
        f"/{name}/execute_skill",
        execute_callback=execute,
        goal_callback=on_goal,
        cancel_callback=on_cancel,
        callback_group=group,
        **action_server_qos(),
    )
    ros_client.executor.add_node(robot)
    try:
        yield accept, events
    finally:
        accept.set()
        closed.set()
        server.destroy()
        ros_client.executor.remove_node(robot)
        robot.destroy_node()


def cancelled_while_sent(
    ros_client: RosClient, name: str, once: Callable[[], bool], join_s: float
) -> Outcome:
    """A segment sent to robot NAME and cancelled once `once()` holds; its outcome."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from timely_interfaces.msg import Segment as SegmentMsg
    from timely_ros.config import RobotSpec
    from timely_ros.robot_link import RobotLink, SegmentRun

    link = RobotLink(ros_client.node, RobotSpec(id=name, type="drone"), ReentrantCallbackGroup())
    assert link.wait_ready(10)
    run = SegmentRun()
    outcome: list[Outcome] = []
    segment = SegmentMsg(task_id=f"{name}-t", index=0, text="mf(50);")
    sender = threading.Thread(
        target=lambda: outcome.append(link.execute(segment, run, lambda _f: None))
    )
    sender.start()
    wait_until(once, 10, "the moment to cancel")
    run.cancel()
    sender.join(join_s)
    assert outcome and outcome[0].cancelled, outcome
    return outcome[0]


def test_a_cancel_before_the_robot_accepts_still_stops_the_robot(ros_client: RosClient) -> None:
    with slow_robot(ros_client, "slow1") as (accept, events):
        sent_at = time.monotonic()
        # the goal is on its way; the robot has not confirmed it
        cancelled_while_sent(ros_client, "slow1", lambda: time.monotonic() > sent_at + 0.5, 10)
        accept.set()  # now the robot confirms it
        wait_until(lambda: "stopped" in events or "ran the whole segment" in events, 10, "the end")
        assert_stopped_unrun(events)


def test_a_robot_that_never_answers_the_goal_is_given_up_and_stopped(
    ros_client: RosClient,
) -> None:
    from rclpy.callback_groups import ReentrantCallbackGroup
    from timely_interfaces.msg import Segment as SegmentMsg
    from timely_ros.config import RobotSpec
    from timely_ros.robot_link import RobotLink, SegmentRun

    with slow_robot(ros_client, "mute1") as (accept, events):
        link = RobotLink(
            ros_client.node,
            RobotSpec(id="mute1", type="drone"),
            ReentrantCallbackGroup(),
            answer_timeout_s=lambda: 0.5,
        )
        assert link.wait_ready(10)
        segment = SegmentMsg(task_id="t2", index=3, text="mf(50);")
        outcome = link.execute(segment, SegmentRun(), lambda _f: None)
        assert not outcome.success and not outcome.cancelled and outcome.robot_lost
        assert "robot mute1 did not answer segment 3's goal within 0.5 s" in outcome.message
        assert events == []  # nothing reached the robot's goal callback's end yet
        accept.set()  # the robot confirms it after all: it must not run the segment
        wait_until(lambda: "stopped" in events or "ran the whole segment" in events, 10, "the end")
        assert_stopped_unrun(events)


def test_a_cancelled_segment_returns_once_the_robot_has_stopped(ros_client: RosClient) -> None:
    with slow_robot(ros_client, "brake1", braking_s=0.5) as (accept, events):
        accept.set()
        outcome = cancelled_while_sent(ros_client, "brake1", lambda: "accepted" in events, 10)
        # it returned after the robot ended the goal, never while it still braked
        assert events == ["accepted", "cancel requested", "stopped"], events
        assert outcome.message.endswith("(stopped)"), outcome.message


def test_a_robot_that_never_confirms_its_stop_is_not_waited_for_past_the_bound(
    ros_client: RosClient,
) -> None:
    from timely_ros.robot_link import STOP_CONFIRM_S

    with slow_robot(ros_client, "deaf1", answers_cancel=False) as (accept, events):
        accept.set()
        outcome = cancelled_while_sent(
            ros_client, "deaf1", lambda: "accepted" in events, 10 + STOP_CONFIRM_S
        )
        assert f"no answer within {STOP_CONFIRM_S:g} s" in outcome.message
        assert "stopped" not in events
