"""What the planner's status says a robot runs, for the client commands that take
`--robot` (`timely cancel`, `timely approve`); a robot the planner does not serve
is named as such."""

from __future__ import annotations

import time

import rclpy
from rclpy.node import Node
from timely_interfaces.msg import ServiceStatus

from timely_ros.config import PlannerNames
from timely_ros.qos import TOPIC


def robot_goals(node: Node, names: PlannerNames, robot: str, wait_s: float) -> list[str] | None:
    """The goal the planner's status says `robot` serves now (None: no status)."""
    latest: list[ServiceStatus] = []
    topic = names.absolute(names.status)
    node.create_subscription(ServiceStatus, topic, lambda m: latest.append(m), TOPIC)
    deadline = time.monotonic() + wait_s
    while not latest and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    if not latest:
        return None
    msg = latest[-1]
    if robot not in msg.robot_ids:
        raise UnknownRobotId(
            f"robot {robot!r} is not served by this planner (robots: {', '.join(msg.robot_ids)})"
        )
    return [g for r, g in zip(msg.robot_ids, msg.robot_goal_ids, strict=False) if r == robot and g]


class UnknownRobotId(ValueError):
    """`--robot` names a robot the planner does not serve."""
