"""The planner and a simulated fleet (drones and arms), from a Timely config:

    ros2 launch launch/sim_fleet.launch.py [config:=/path/to/config.yaml]

The config is the same ROS 2 parameter file `timely up` reads (default: the
package's config/sim_fleet.yaml).
"""

from __future__ import annotations

import sys
from pathlib import Path

from launch import LaunchDescription  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timely_nodes import launch_description


def generate_launch_description() -> LaunchDescription:
    return launch_description("sim_fleet.yaml", "all")
