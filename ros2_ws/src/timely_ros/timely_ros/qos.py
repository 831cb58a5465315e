"""QoS of the action endpoints and topics.

The default action QoS (services KEEP_LAST 10, feedback depth 10) drops requests
and feedback when tens of clients send goals at once: a lost get_result request
leaves its client waiting forever (the classic actionlib failure). Every action
endpoint here is reliable with a deep queue, on both sides.
"""

from __future__ import annotations

from typing import Any

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_action_status_default,
)

DEEP = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1000,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

TOPIC = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=200,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

# Scenes and heartbeats: only the latest matters. Volatile, so any publisher matches
# (a transient-local subscription would not hear a volatile publisher).
LATEST = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.VOLATILE,
)

# Reports a client may look for after the fact (goals a restarted planner found
# interrupted): kept for late subscribers.
REPORTS = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1000,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)

# State a client reads once when it starts (the pending approvals): the latest is
# kept for late subscribers, which must be transient-local too.
LATCHED = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


def action_server_qos() -> dict[str, Any]:
    """Keyword arguments for `rclpy.action.ActionServer`."""
    return {
        "goal_service_qos_profile": DEEP,
        "result_service_qos_profile": DEEP,
        "cancel_service_qos_profile": DEEP,
        "feedback_pub_qos_profile": DEEP,
        "status_pub_qos_profile": qos_profile_action_status_default,
    }


def action_client_qos() -> dict[str, Any]:
    """Keyword arguments for `rclpy.action.ActionClient`."""
    return {
        "goal_service_qos_profile": DEEP,
        "result_service_qos_profile": DEEP,
        "cancel_service_qos_profile": DEEP,
        "feedback_sub_qos_profile": DEEP,
        "status_sub_qos_profile": qos_profile_action_status_default,
    }
