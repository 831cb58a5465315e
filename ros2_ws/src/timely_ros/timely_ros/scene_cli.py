"""`timely scene`: publish what a robot perceives on its scene topic, once.

The planner keeps each robot's latest scene: goals without a scene are planned in
it, and it is prefilled ahead of them. A robot's own perception pipeline would
publish on the same topic (std_msgs/String)."""

from __future__ import annotations

import sys
import time

import rclpy
from pydantic import ValidationError
from rclpy.duration import Duration
from rclpy.exceptions import InvalidTopicNameException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import String

from timely_ros.qos import LATEST


def run_scene(robot: str, scene: str, topic: str, wait_s: float) -> int:
    from timely_core.request import SceneUpdate

    if "\x00" in scene:
        print("timely scene: the scene contains NUL, where ROS strings end", file=sys.stderr)
        return 2
    try:
        SceneUpdate(robot_id=robot, scene=scene)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        print(f"timely scene: {problems}", file=sys.stderr)
        return 2
    what = f"--topic {topic!r}" if topic else f"robot {robot!r}'s scene topic"
    hint = "" if topic else f" (is {robot} one of its robots? timely status lists them)"
    topic = topic or f"/{robot}/scene"
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # client_signals.py
    node = Node("timely_scene_cli")
    try:
        try:
            publisher = node.create_publisher(String, topic, LATEST)
        except InvalidTopicNameException as err:
            print(f"timely scene: {what} is not a valid topic name ({err})", file=sys.stderr)
            return 2
        deadline = time.monotonic() + wait_s
        while publisher.get_subscription_count() == 0:  # volatile: nobody would hear it
            if time.monotonic() > deadline:
                print(
                    f"timely scene: no planner listens on {topic} after {wait_s:g} s{hint}",
                    file=sys.stderr,
                )
                return 1
            rclpy.spin_once(node, timeout_sec=0.05)
        publisher.publish(String(data=scene))
        if not publisher.wait_for_all_acked(Duration(seconds=wait_s)):
            print(f"timely scene: {topic}: not acknowledged after {wait_s:g} s", file=sys.stderr)
            return 1
        print(f"published the scene of {robot} on {topic} ({len(scene)} characters)")
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
