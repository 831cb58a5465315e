"""The planner's watch over its robots' heartbeats (`liveness`).

A robot that stays silent past `robot_timeout_s` is declared gone (logged once):
its running segment ends (`RobotLink` looks at the same watch) and goals that
would dispatch to it are rejected. When it beats again, or comes back restarted,
every segment given up meanwhile is told to stop once more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from timely_ros.config import RobotSpec
from timely_ros.liveness import Beat, LivenessWatch, watch_heartbeats
from timely_ros.robot_link import RobotLink

CHECK_PERIOD_S = 0.1


class RobotWatch:
    def __init__(
        self,
        node: Node,
        robots: list[RobotSpec],
        timeout_s: float,
        links: Callable[[], Mapping[str, RobotLink]],
    ) -> None:
        self.liveness = LivenessWatch(timeout_s)
        self._node = node
        self._links = links
        group = MutuallyExclusiveCallbackGroup()
        for robot in robots:
            watch_heartbeats(node, robot.heartbeat_topic_name, self._on_beat, group)
        node.create_timer(CHECK_PERIOD_S, self._check, callback_group=group)

    def silent_s(self, robot_id: str) -> Callable[[], float | None]:
        return lambda: self.liveness.silent_s(robot_id)

    def why_not_responding(self, robot_id: str) -> str | None:
        """Why a goal for `robot_id` cannot be dispatched now, or None if it can."""
        if self.liveness.responding(robot_id):
            return None
        silent = self.liveness.silent_s(robot_id) or 0.0
        return f"robot {robot_id} is not responding (no heartbeat for {silent:.1f} s)"

    def _on_beat(self, beat: Beat) -> None:
        back, restarted = self.liveness.beat(beat)
        if not (back or restarted):
            return
        link = self._links().get(beat.source)
        told = link.robot_back() if link is not None else 0
        what = "restarted" if restarted else "is back"
        self._node.get_logger().warning(
            f"robot {beat.source} {what}; told it to stop {told} segment(s) of ended tasks"
        )

    def _check(self) -> None:
        for robot_id in self.liveness.newly_gone():
            self._node.get_logger().warning(
                f"robot {robot_id} stopped responding (no heartbeat for "
                f"{self.liveness.timeout_s:g} s); its goal ends, new ones are rejected"
            )
