"""`timely approve`: list the segments waiting for an operator, approve or deny one.

The planner publishes what waits on `approvals` (latched JSON) and takes answers
on `approval_answers`. An answer is confirmed when its request leaves the pending
list; one that never does (a wrong id, or it was answered or timed out first) is
reported as not applied.
"""

from __future__ import annotations

import getpass
import json
import sys
import time
from typing import Any

import rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import String

from timely_ros.approval_desk import ApprovalAnswer
from timely_ros.config import planner_names
from timely_ros.qos import LATCHED, TOPIC
from timely_ros.robot_goals import UnknownRobotId, robot_goals


class _Pending:
    def __init__(self, node: Node, topic: str) -> None:
        self.latest: list[dict[str, Any]] | None = None
        node.create_subscription(String, topic, self._on, LATCHED)

    def _on(self, msg: String) -> None:
        self.latest = list(json.loads(msg.data).get("pending", []))


def _spin_until(node: Node, done: Any, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while not done() and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
    return bool(done())


def _by_id(pending: list[dict[str, Any]], given: str) -> list[dict[str, Any]]:
    """The requests whose id is `given`, or starts with it (any case): as with a git
    hash, enough of an id to tell it from the others will do."""
    given = given.strip().lower()
    exact = [r for r in pending if str(r["request_id"]).lower() == given]
    return exact or [r for r in pending if str(r["request_id"]).lower().startswith(given)]


def _describe(request: dict[str, Any]) -> str:
    reasons = "; ".join(request.get("reasons", []))
    opened = request.get("opened_at")  # a planner before it sent waiting_s only
    waiting = time.time() - float(opened) if opened else float(request["waiting_s"])
    return (
        f"{request['request_id']}  robot {request['robot_id']}  segment {request['segment']}  "
        f"{str(request['text']).strip()!r}  waiting for {max(waiting, 0.0):.0f} s  ({reasons})"
    )


def run_approve(
    request_id: str,
    robot: str,
    deny: bool,
    listing: bool,
    reason: str,
    wait_s: float,
    namespace: str,
) -> int:
    if not listing and not (request_id or robot):
        print("timely approve: give a REQUEST_ID, --robot ROBOT or --list", file=sys.stderr)
        return 2
    if listing and (request_id or robot or deny or reason):
        print(
            "timely approve: --list only lists; give it no REQUEST_ID, --robot, --deny or "
            "--reason (answer in a second command)",
            file=sys.stderr,
        )
        return 2
    names = planner_names(namespace)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # client_signals.py
    node = Node("timely_approve_cli")
    try:
        pending = _Pending(node, names.absolute(names.approvals))
        if not _spin_until(node, lambda: pending.latest is not None, wait_s):
            print(f"timely approve: no planner after {wait_s:g} s", file=sys.stderr)
            return 1
        assert pending.latest is not None
        if listing:
            for request in pending.latest:
                print(_describe(request))
            if not pending.latest:
                print("no segment waits for approval")
            return 0
        if request_id:
            matches = _by_id(pending.latest, request_id)
            if len(matches) > 1:
                ids = ", ".join(str(r["request_id"]) for r in matches)
                print(
                    f"timely approve: {request_id!r} starts several request ids ({ids}); "
                    "give more of it",
                    file=sys.stderr,
                )
                return 2
        else:
            matches = [r for r in pending.latest if r["robot_id"] == robot]
        if not matches:
            if robot:
                try:
                    robot_goals(node, names, robot, wait_s)
                except UnknownRobotId as err:
                    print(f"timely approve: {err}", file=sys.stderr)
                    return 2
            what = request_id or f"robot {robot}"
            print(f"timely approve: nothing waits for approval for {what}", file=sys.stderr)
            return 1
        target = matches[0]  # by robot: its oldest request, listed first
        answer = ApprovalAnswer(
            request_id=str(target["request_id"]),
            approve=not deny,
            reason=reason,
            operator=getpass.getuser(),
        )
        publisher = node.create_publisher(String, names.absolute(names.approval_answers), TOPIC)
        if not _spin_until(node, lambda: publisher.get_subscription_count() > 0, wait_s):
            print("timely approve: the planner does not listen for answers", file=sys.stderr)
            return 1
        publisher.publish(String(data=answer.model_dump_json()))
        gone = _spin_until(
            node,
            lambda: (
                pending.latest is not None
                and all(r["request_id"] != answer.request_id for r in pending.latest)
            ),
            wait_s,
        )
        verb = "denied" if deny else "approved"
        if not gone:
            print(f"timely approve: {answer.request_id} was not applied", file=sys.stderr)
            return 1
        print(f"{verb} {_describe(target)}")
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
