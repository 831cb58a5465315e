"""Shared by the launch files: one Node action per node section of a Timely config.

Reads the same ROS 2 parameter-file YAML as `timely up`: the `/**/timely_planner`
(or `/<namespace>/timely_planner`) section becomes the planner node (in its
`namespace`, default `timely`), each `/<robot>/timely_skill_executor` section a
skill-executor node in the robot's namespace; the file itself is passed as the
parameters file, so ROS 2 applies exactly the values `timely up` would.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchContext, LaunchDescription  # type: ignore[attr-defined]

# what timely_ros.config accepts; the file's section must match the node's fully
# qualified name for ROS 2 to apply it: `/**/timely_planner` does in any namespace,
# `/<namespace>/timely_planner` in the one its `namespace` parameter names
PLANNER_KEYS = ("/**/timely_planner", "timely_planner", "/timely_planner")
PLANNER_FQN = re.compile(r"^/([A-Za-z][A-Za-z0-9_/]*)/timely_planner$")
EXECUTOR_KEY = re.compile(r"^/?([A-Za-z][A-Za-z0-9_]*)/timely_skill_executor$")


def nodes_from_config(config_path: str, which: str = "all") -> list[Any]:
    """Node actions for the planner ("planner"), the executors ("executors") or both."""
    doc = yaml.safe_load(Path(config_path).read_text(encoding="utf-8")) or {}
    nodes: list[Any] = []
    for key in doc:
        name = str(key)
        match = EXECUTOR_KEY.match(name)
        planner = name in PLANNER_KEYS or PLANNER_FQN.match(name) is not None
        if planner and which in ("all", "planner"):
            params = (doc[key] or {}).get("ros__parameters") or {}
            nodes.append(
                Node(
                    package="timely_ros",
                    executable="timely_planner",
                    name="timely_planner",
                    namespace=str(params.get("namespace", "timely")),
                    parameters=[config_path],
                    output="screen",
                    emulate_tty=True,
                )
            )
        elif match is not None and which in ("all", "executors"):
            nodes.append(
                Node(
                    package="timely_ros",
                    executable="timely_skill_executor",
                    name="timely_skill_executor",
                    namespace=match.group(1),
                    parameters=[config_path],
                    output="screen",
                    emulate_tty=True,
                )
            )
    return nodes


def default_config(name: str) -> str:
    """A config shipped with timely_ros (share/timely_ros/config/NAME)."""
    from ament_index_python.packages import get_package_share_directory

    return str(Path(get_package_share_directory("timely_ros")) / "config" / name)


def launch_description(default_config_name: str, which: str) -> LaunchDescription:
    """A `config:=` argument (default: the shipped config NAME) and the nodes of `which`."""

    def nodes(context: LaunchContext) -> list[Any]:
        return nodes_from_config(LaunchConfiguration("config").perform(context), which)

    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "config",
                default_value=default_config(default_config_name),
                description="Timely bring-up YAML (ROS 2 parameter-file format)",
            ),
            OpaqueFunction(function=nodes),
        ]
    )
