"""The scene a robot's goals are planned in when they carry none, as the planner's
status reports it: `timely plan` says so when a goal it sent without `--scene` was
planned with no scene at all (the planner then does not know what the robot sees,
and plans worse: docs/ros.md)."""

from __future__ import annotations

import threading

from rclpy.node import Node
from timely_interfaces.msg import ServiceStatus

from timely_ros.config import PlannerNames
from timely_ros.qos import TOPIC


class RobotSceneWatch:
    def __init__(self, node: Node, names: PlannerNames, robot_id: str) -> None:
        self.robot_id = robot_id
        self._scene: str | None = None  # None: no status about the robot seen yet
        self._seen = threading.Event()
        node.create_subscription(
            ServiceStatus, names.absolute(names.status), self._on_status, TOPIC
        )

    def _on_status(self, msg: ServiceStatus) -> None:
        scenes = list(msg.robot_scenes)
        if len(scenes) != len(msg.robot_ids):
            return  # a planner that does not report scenes
        for robot_id, scene in zip(msg.robot_ids, scenes, strict=True):
            if robot_id == self.robot_id:
                self._scene = scene
                self._seen.set()

    def scene(self, wait_s: float) -> str | None:
        """The robot's scene as the planner last reported it ("": none), waiting up to
        `wait_s` for a first status; None if no status about the robot came."""
        self._seen.wait(wait_s)
        return self._scene


def no_scene_note(robot_id: str) -> str:
    return (
        f"note: {robot_id} has no scene (none given with --scene, none published on its "
        "scene topic), so this goal was planned without knowing what the robot sees; "
        f'the planner plans better with one: timely scene --robot {robot_id} "visible: ..."'
    )
