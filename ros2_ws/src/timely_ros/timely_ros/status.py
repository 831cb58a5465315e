"""ServiceStats -> ServiceStatus message (published on /timely/status)."""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time
from timely_interfaces.msg import ServiceStatus

from timely_ros.config import PlannerParams


def status_msg(
    stats: Any, params: PlannerParams, rejected_at_goal: int, stamp: Time
) -> ServiceStatus:
    """`rejected_at_goal` counts goals the node refused before they reached the
    service; the service's own rejections (queue full) are added to it."""
    total = int(stats.kv_device_blocks_total)
    used = 1.0 - stats.kv_device_blocks_free / total if total > 0 else 0.0
    return ServiceStatus(
        stamp=stamp,
        policy=str(stats.policy),
        engine=params.engine,
        queue_length=int(stats.queued),
        running_generations=int(stats.running),
        suspended_generations=int(stats.suspended),
        kv_device_used_fraction=float(used),
        kv_host_used_fraction=float(getattr(stats, "kv_host_used_fraction", 0.0)),
        tasks_submitted=int(stats.submitted),
        tasks_completed=int(stats.succeeded),
        tasks_failed=int(stats.failed),
        tasks_rejected=int(stats.rejected) + rejected_at_goal,
        tasks_cancelled=int(stats.cancelled),
        segments_emitted=int(stats.segments_emitted),
    )
