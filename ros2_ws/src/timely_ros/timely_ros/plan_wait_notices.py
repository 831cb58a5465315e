"""Why a `timely plan` goal waits, told once each on stderr: a segment held for an
operator's approval (the planner's latched `approvals` list names the goal), or its
robot running another goal (the planner's status names the goal each robot runs).
Without these the command printed nothing for as long as the wait lasted."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable

from rclpy.node import Node
from std_msgs.msg import String
from timely_interfaces.msg import ServiceStatus

from timely_ros.config import PlannerNames
from timely_ros.qos import LATCHED, TOPIC


class PlanWaitNotices:
    """Watches for `goal_id` (hex, set once the goal is sent) of a goal for
    `robot_id`; `turns`: the goal takes the robot's turns (it dispatches)."""

    def __init__(
        self,
        node: Node,
        names: PlannerNames,
        robot_id: str,
        turns: bool,
        tell: Callable[[str], None] | None = None,
    ) -> None:
        self.robot_id = robot_id
        self.goal_id = ""
        self.ended = threading.Event()  # the goal ended: nothing more to tell
        self._turns = turns
        self._tell = tell or (lambda line: print(f"timely plan: {line}", file=sys.stderr))
        self._told: set[str] = set()
        self._lock = threading.Lock()
        node.create_subscription(
            String, names.absolute(names.approvals), self._on_approvals, LATCHED
        )
        node.create_subscription(
            ServiceStatus, names.absolute(names.status), self._on_status, TOPIC
        )

    def _once(self, key: str, line: str) -> None:
        with self._lock:
            if key in self._told or not self.goal_id or self.ended.is_set():
                return
            self._told.add(key)
        self._tell(line)

    def _on_approvals(self, msg: String) -> None:
        try:
            pending = json.loads(msg.data).get("pending", [])
        except (ValueError, AttributeError):
            return  # not this planner's format: nothing to tell
        for request in pending:
            if not isinstance(request, dict) or request.get("goal_id") != self.goal_id:
                continue
            request_id = request.get("request_id", "")
            self._once(
                f"approval {request_id}",
                f"segment {request.get('segment')} ({str(request.get('text', '')).strip()!r}) "
                f"waits for an operator's approval: timely approve {request_id} (or --deny)",
            )

    def _on_status(self, msg: ServiceStatus) -> None:
        if not self._turns:
            return
        for robot_id, goal_id in zip(msg.robot_ids, msg.robot_goal_ids, strict=False):
            if robot_id == self.robot_id and goal_id and goal_id != self.goal_id:
                self._once(
                    f"turn {goal_id}",
                    f"robot {robot_id} is busy with goal {goal_id}; this goal's segments "
                    "go to it once that goal ends",
                )
