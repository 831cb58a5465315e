"""The planner's health in ROS 2's own terms: `diagnostic_msgs/DiagnosticArray` on
/diagnostics, one status for the planner and one per robot link, so rqt's robot
monitor and diagnostic aggregators see Timely like any other driver."""

from __future__ import annotations

from collections.abc import Collection

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from std_msgs.msg import Header
from timely_interfaces.msg import ServiceStatus

from timely_ros.config import PlannerParams

KV_WARN_FRACTION = 0.9  # device KV this full: tasks start to wait for memory
QUEUE_WARN_FRACTION = 0.8  # of max_queue: QueueFull is near
# what a robot's state adds while the planner has not heard its executor
NOT_HEARD_YET = "no heartbeat from its executor yet"


def _status(
    level: bytes, name: str, message: str, hardware_id: str, **values: object
) -> DiagnosticStatus:
    return DiagnosticStatus(
        level=level,
        name=name,
        message=message,
        hardware_id=hardware_id,
        values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
    )


def diagnostics(
    status: ServiceStatus,
    params: PlannerParams,
    node_name: str,
    stamp: Time,
    lifecycle_state: str = "active",
    twin: str | None = None,
    never_heard: Collection[str] = (),
) -> DiagnosticArray:
    """One status for the planner (OK; WARN when it is not active, or the queue or the
    device KV is nearly full; ERROR with `twin`, why another planner of its name
    stops it serving) and one per robot (OK; ERROR when it stopped responding; WARN
    when it is in `never_heard`: a robot the planner dispatches to whose executor
    has sent no heartbeat yet, so its goals would fail)."""
    warnings = [twin] if twin else []
    if lifecycle_state != "active":
        warnings.append(f"{lifecycle_state}: goals are rejected")
    if status.queue_length >= QUEUE_WARN_FRACTION * params.max_queue:
        warnings.append(f"queue {status.queue_length} of {params.max_queue}")
    if status.kv_device_used_fraction >= KV_WARN_FRACTION:
        warnings.append(f"device KV {status.kv_device_used_fraction:.0%} used")
    level = DiagnosticStatus.WARN if warnings else DiagnosticStatus.OK
    planner = _status(
        DiagnosticStatus.ERROR if twin else level,
        f"{node_name}: planner",
        "; ".join(warnings) or "serving",
        node_name,
        incarnation=status.incarnation,
        lifecycle_state=lifecycle_state,
        engine=status.engine,
        policy=status.policy,
        queue_length=status.queue_length,
        running_generations=status.running_generations,
        suspended_generations=status.suspended_generations,
        kv_device_used=f"{status.kv_device_used_fraction:.3f}",
        goals_completed=status.tasks_completed,
        tasks_failed=status.tasks_failed,
    )
    robots = []
    for robot_id, state, goal in zip(
        status.robot_ids, status.robot_states, status.robot_goal_ids, strict=False
    ):
        gone = robot_id in status.robots_not_responding
        unheard = not gone and robot_id in never_heard
        level = DiagnosticStatus.WARN if unheard else DiagnosticStatus.OK
        robots.append(
            _status(
                DiagnosticStatus.ERROR if gone else level,
                f"{node_name}: robot {robot_id}",
                f"{state}; {NOT_HEARD_YET}" if unheard and NOT_HEARD_YET not in state else state,
                robot_id,
                goal_id=goal or "-",
            )
        )
    return DiagnosticArray(header=Header(stamp=stamp), status=[planner, *robots])


def unconfigured_diagnostics(node_name: str, stamp: Time, lifecycle_state: str) -> DiagnosticArray:
    """The planner before configure (or after cleanup): no model, goals rejected."""
    planner = _status(
        DiagnosticStatus.WARN,
        f"{node_name}: planner",
        f"{lifecycle_state}: no model loaded, goals are rejected (timely lifecycle configure)",
        node_name,
        lifecycle_state=lifecycle_state,
    )
    return DiagnosticArray(header=Header(stamp=stamp), status=[planner])
