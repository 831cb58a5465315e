"""A node's own parameters as the nested dict the config models validate."""

from __future__ import annotations

from typing import Any

from rclpy.node import Node

from timely_ros.config import unflatten

_ROS_BUILTIN_PARAMS = {"use_sim_time", "start_type_description_service"}


def node_parameters(node: Node) -> dict[str, Any]:
    """The node's own parameters as a nested dict (ROS 2 built-ins left out)."""
    declared = node.get_parameters_by_prefix("")
    flat = {name: p.value for name, p in declared.items() if name not in _ROS_BUILTIN_PARAMS}
    return unflatten(flat)
