"""The planner node alone (robots come up elsewhere), from a Timely config:

    ros2 launch launch/planner.launch.py [config:=/path/to/config.yaml]

The config is the same ROS 2 parameter file `timely up` reads (default: the
package's config/sim_fleet.yaml).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration

from launch import LaunchContext, LaunchDescription  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timely_nodes import default_config, nodes_from_config


def _nodes(context: LaunchContext) -> list[Any]:
    return nodes_from_config(LaunchConfiguration("config").perform(context), "planner")


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "config",
                default_value=default_config("sim_fleet.yaml"),
                description="Timely bring-up YAML (ROS 2 parameter-file format)",
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
