"""ServiceStats -> ServiceStatus message (published on /timely/status)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from builtin_interfaces.msg import Time
from timely_interfaces.msg import ServiceStatus

from timely_core.engine.variants import ResidentWeights
from timely_ros.config import PlannerParams


def _used(free: int, total: int) -> float:
    return 1.0 - free / total if total > 0 else 0.0


@dataclass(frozen=True)
class GoalCounts:
    """Goals as their clients see them, counted by the node: refused at goal time,
    accepted, and of the accepted ones those that ended succeeded (planned and,
    when dispatched, executed to the end), aborted or cancelled (accepted = the
    three + the goals still active)."""

    rejected: int
    succeeded: int
    accepted: int = 0
    aborted: int = 0
    cancelled: int = 0


def status_msg(
    stats: Any,
    memory: Any,
    params: PlannerParams,
    goals: GoalCounts,
    stamp: Time,
    incarnation: str = "",
    not_responding: list[str] | None = None,
    robots: list[RobotState] | None = None,
    weights: ResidentWeights | None = None,
    lifecycle_state: str = "active",
) -> ServiceStatus:
    """`memory` is the engine's MemoryReport (for the host swap pool), or None.
    The `tasks_*` counters are `goals`' (what clients saw: a plan the service
    finished counts failed when its robot then failed it); `plans_completed` and
    `segments_emitted` are the service's (a dispatched goal's plan completes with
    the robot's report of its last segment).
    `queue_length` counts tasks waiting for their first admission, not generations
    suspended between segments (those are `suspended_generations`). `weights`: the
    engine's ResidentWeights (`PlanningService.resident_weights()`), or None."""
    variants = list(weights.variants) if weights is not None else []
    used = _used(int(stats.kv_device_blocks_free), int(stats.kv_device_blocks_total))
    host = 0.0
    if memory is not None:
        host = _used(int(memory.host_blocks_free), int(memory.host_blocks_total))
    return ServiceStatus(
        **_planner_fields(params, goals, stamp, incarnation, robots or [], lifecycle_state),
        policy=str(stats.policy),
        queue_length=int(stats.waiting_first),
        running_generations=int(stats.running),
        suspended_generations=int(stats.suspended),
        kv_device_used_fraction=float(used),
        kv_host_used_fraction=float(host),
        segments_emitted=int(stats.segments_emitted),
        plans_completed=int(stats.succeeded),
        robots_not_responding=list(not_responding or []),
        base_weight_bytes=int(weights.base_bytes) if weights is not None else 0,
        variant_names=[v.name for v in variants],
        variant_kinds=[v.kind for v in variants],
        variant_bytes=[int(v.nbytes) for v in variants],
        variant_shares_base_kv=[bool(v.base_kv) for v in variants],
        weight_bytes_total=int(weights.total_bytes) if weights is not None else 0,
        candidate_plans=int(getattr(stats, "candidate_plans", 0)),
        candidate_alternatives_kept=int(getattr(stats, "candidate_alternatives_kept", 0)),
        candidate_plans_redecoded=int(getattr(stats, "candidate_redecoded", 0)),
        rollbacks=int(getattr(stats, "rollbacks", 0)),
    )


def unconfigured_status(
    params: PlannerParams,
    goals: GoalCounts,
    stamp: Time,
    incarnation: str,
    robots: list[RobotState],
    lifecycle_state: str,
) -> ServiceStatus:
    """The planner with no model loaded (before configure, after cleanup): its state,
    the goals counted so far and its robots; no queue, generations or memory."""
    return ServiceStatus(
        **_planner_fields(params, goals, stamp, incarnation, robots, lifecycle_state),
        policy=params.policy,
    )


def _planner_fields(
    params: PlannerParams,
    goals: GoalCounts,
    stamp: Time,
    incarnation: str,
    robots: list[RobotState],
    lifecycle_state: str,
) -> dict[str, Any]:
    """What the node knows whether or not a model is loaded: its goal counters,
    robots and settings."""
    return {
        "stamp": stamp,
        "engine": params.engine,
        "tasks_submitted": goals.accepted,
        "tasks_completed": goals.succeeded,
        "tasks_failed": goals.aborted,
        "tasks_rejected": goals.rejected,
        "tasks_cancelled": goals.cancelled,
        "incarnation": incarnation,
        "robot_ids": [r.robot_id for r in robots],
        "robot_states": [r.state for r in robots],
        "robot_goal_ids": [r.goal_id for r in robots],
        "robot_variants": [_variant(params, r.robot_id) for r in robots],
        "robot_scenes": [r.scene for r in robots],
        "plan_candidates": params.plan_candidates,
        "lifecycle_state": lifecycle_state,
    }


def _variant(params: PlannerParams, robot_id: str) -> str:
    robot = params.robot(robot_id)
    return robot.variant if robot is not None else ""


@dataclass(frozen=True)
class RobotState:
    robot_id: str
    state: str  # idle, planning, executing segment k, not responding, ...
    goal_id: str = ""  # the goal it serves now (hex); with several, the oldest
    scene: str = ""  # what it perceives, as last published ("": none)
