"""`timely cancel`: cancel PlanTask goals by id, every goal of a robot, or all.

Goes through the action's own cancel service, so the planner stops the generation,
frees its KV and cancels the robot's segment exactly as for a client's cancel.
Goal ids (hex) are what `timely plan` prints and `timely status` lists."""

from __future__ import annotations

import sys
import time
from typing import Any

import rclpy
from action_msgs.srv import CancelGoal
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from timely_ros.config import planner_names
from timely_ros.qos import DEEP
from timely_ros.robot_goals import UnknownRobotId, robot_goals

CANCEL_ALL = bytes(16)  # the cancel request's goal id for every goal (with a zero stamp)
_RETURN = {
    CancelGoal.Response.ERROR_REJECTED: "the planner refused to cancel it",
    CancelGoal.Response.ERROR_UNKNOWN_GOAL_ID: "no such goal",
    CancelGoal.Response.ERROR_GOAL_TERMINATED: "the goal had already ended",
}


def parse_goal_id(text: str) -> bytes:
    """A goal id: 32 hex digits (dashes allowed, as in a printed UUID). Not all
    zeros: to the action's cancel service that id means every goal (`--all`)."""
    raw = text.replace("-", "").strip().lower()
    try:
        value = bytes.fromhex(raw)
    except ValueError:
        value = b""
    if len(value) != 16:
        raise ValueError(f"goal id {text!r} is not 32 hex digits")
    if value == CANCEL_ALL:
        raise ValueError(
            f"goal id {text!r} is all zeros, which ROS reads as every goal; no goal has "
            "it (to cancel every goal: --all)"
        )
    return value


def _cancel(node: Node, client: Any, goal_id: bytes, wait_s: float) -> tuple[bool, str]:
    request = CancelGoal.Request()
    request.goal_info.goal_id.uuid = list(goal_id)  # zero id and stamp: every goal
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=wait_s)
    if not future.done():
        return False, f"no answer from the planner after {wait_s:g} s"
    response = future.result()
    if response.return_code != CancelGoal.Response.ERROR_NONE:
        return False, _RETURN.get(response.return_code, f"error {response.return_code}")
    cancelling = [bytes(g.goal_id.uuid).hex() for g in response.goals_canceling]
    return bool(cancelling), ", ".join(cancelling) or "nothing to cancel"


def run_cancel(
    goal_ids: list[str], robot: str, everything: bool, wait_s: float, namespace: str
) -> int:
    try:
        targets = [parse_goal_id(g) for g in goal_ids]
    except ValueError as err:
        print(f"timely cancel: {err}", file=sys.stderr)
        return 2
    if not (targets or robot or everything):
        print("timely cancel: give goal ids, --robot ROBOT or --all", file=sys.stderr)
        return 2
    names = planner_names(namespace)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # client_signals.py
    node = Node("timely_cancel_cli")
    try:
        client: Any = node.create_client(
            CancelGoal,
            names.absolute(f"{names.plan_task}/_action/cancel_goal"),
            qos_profile=DEEP,
        )
        if not client.wait_for_service(timeout_sec=wait_s):
            print(f"timely cancel: no planner after {wait_s:g} s", file=sys.stderr)
            return 1
        if everything:
            targets.append(CANCEL_ALL)
        failed = False
        if robot:  # one goal at a time: the status names each robot's oldest
            for attempt in range(1000):
                try:
                    goals = robot_goals(node, names, robot, wait_s)
                except UnknownRobotId as err:
                    print(f"timely cancel: {err}", file=sys.stderr)
                    return 2
                if goals is None:
                    print("timely cancel: no planner status", file=sys.stderr)
                    return 1
                if not goals:
                    if attempt == 0:
                        print(f"{robot}: no goal to cancel")
                        failed = not targets  # as --all with nothing running
                    break
                ok, text = _cancel(node, client, parse_goal_id(goals[0]), wait_s)
                print(f"{robot}: cancelled {text}" if ok else f"{robot}: {text}")
                failed |= not ok
                time.sleep(0.3)  # the next status shows the robot's next goal
        for goal_id in targets:
            ok, text = _cancel(node, client, goal_id, wait_s)
            label = "all goals" if goal_id == CANCEL_ALL else goal_id.hex()
            print(f"{label}: cancelled {text}" if ok else f"{label}: {text}")
            failed |= not ok
        return 1 if failed else 0
    except KeyboardInterrupt:
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
