"""`timely status`: the planner's /timely/status as tables, once or live (--watch)."""

from __future__ import annotations

import sys
import threading
import time

import rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from timely_interfaces.msg import ServiceStatus

from timely_ros.config import planner_names
from timely_ros.qos import TOPIC

SCENE_WIDTH = 48  # characters of a robot's scene shown in its row

# what a planner not serving goals needs, by lifecycle state
_STATE_HINTS = {
    "unconfigured": "no model loaded, goals are rejected: timely lifecycle configure",
    "inactive": "goals are rejected: timely lifecycle activate",
    "finalized": "shut down: restart it",
}


def render(msg: ServiceStatus) -> Group:
    """The planner table (queue, generations, KV, counters) and the robots table."""
    state = msg.lifecycle_state or "active"  # a planner from before the field: active
    hint = _STATE_HINTS.get(state, "")
    planner = Table(
        title=f"planner {msg.incarnation or '?'} ({msg.engine}, {msg.policy}): {state}"
        + (f" ({hint})" if hint else "")
    )
    for column in (
        "queue", "running", "suspended", "KV device", "KV host",
        "goals done", "plans done", "failed", "cancelled", "rejected", "segments",
        "replans",
    ):  # fmt: skip
        planner.add_column(column, justify="right")
    planner.add_row(
        str(msg.queue_length),
        str(msg.running_generations),
        str(msg.suspended_generations),
        f"{msg.kv_device_used_fraction:.0%}",
        f"{msg.kv_host_used_fraction:.0%}",
        str(msg.tasks_completed),
        str(msg.plans_completed),
        str(msg.tasks_failed),
        str(msg.tasks_cancelled),
        str(msg.tasks_rejected),
        str(msg.segments_emitted),
        str(msg.rollbacks),
    )
    robots = Table(title="robots")
    for column in ("robot", "state", "goal", "variant", "scene"):
        robots.add_column(column)
    variants = list(msg.robot_variants) or [""] * len(msg.robot_ids)
    scenes = list(msg.robot_scenes) or [""] * len(msg.robot_ids)
    for robot_id, state, goal, variant, scene in zip(
        msg.robot_ids, msg.robot_states, msg.robot_goal_ids, variants, scenes, strict=False
    ):
        robots.add_row(robot_id, state, goal or "-", variant or "base", _scene(scene))
    parts = [planner, robots]
    if msg.plan_candidates:
        parts.append(_candidates(msg))
    if msg.weight_bytes_total:  # the engine reports its weights
        parts.append(_weights(msg))
    return Group(*parts)


def _scene(scene: str, width: int = SCENE_WIDTH) -> str:
    """A robot's scene on one line, cut to `width`; "none" says its goals without a
    scene of their own are planned with none."""
    line = " ".join(scene.split())
    if not line:
        return "none"
    return line if len(line) <= width else line[: width - 1] + "…"


def _candidates(msg: ServiceStatus) -> Table:
    """Plans decided among `plan_candidates` sampled alternatives and the greedy one."""
    table = Table(title=f"plan candidates: {msg.plan_candidates} per plan")
    for column in ("plans decided", "alternative kept", "decoded again"):
        table.add_column(column, justify="right")
    table.add_row(
        str(msg.candidate_plans),
        str(msg.candidate_alternatives_kept),
        str(msg.candidate_plans_redecoded),
    )
    return table


def _weights(msg: ServiceStatus) -> Table:
    """Resident model weights: the base once, each fleet variant's own bytes."""
    table = Table(title=f"model weights: {msg.weight_bytes_total / 2**20:.2f} MiB")
    table.add_column("variant")
    table.add_column("kind")
    table.add_column("MiB", justify="right")
    table.add_column("KV")
    table.add_row("base", "base", f"{msg.base_weight_bytes / 2**20:.2f}", "own")
    shares = list(msg.variant_shares_base_kv) or [False] * len(msg.variant_names)
    for name, kind, nbytes, base_kv in zip(
        msg.variant_names, msg.variant_kinds, msg.variant_bytes, shares, strict=False
    ):
        table.add_row(name, kind, f"{nbytes / 2**20:.2f}", "base's" if base_kv else "own")
    return table


def run_status(watch: bool, wait_s: float, namespace: str) -> int:
    names = planner_names(namespace)
    topic = names.absolute(names.status)
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # client_signals.py
    node = Node("timely_status_cli")
    latest: list[ServiceStatus] = []
    arrived = threading.Event()

    def on_status(msg: ServiceStatus) -> None:
        latest[:] = [msg]
        arrived.set()

    node.create_subscription(ServiceStatus, topic, on_status, TOPIC)
    console = Console(width=None if sys.stdout.isatty() else 200)  # piped: keep ids whole
    try:
        deadline = time.monotonic() + wait_s
        while not arrived.is_set():
            if time.monotonic() > deadline:
                print(f"timely status: no planner status on {topic} after {wait_s:g} s",
                      file=sys.stderr)  # fmt: skip
                return 1
            rclpy.spin_once(node, timeout_sec=0.1)
        if not watch:
            console.print(render(latest[0]))
            return 0
        with Live(render(latest[0]), console=console, auto_refresh=False) as live:
            while True:
                arrived.clear()
                rclpy.spin_once(node, timeout_sec=0.5)
                if arrived.is_set():
                    live.update(render(latest[0]), refresh=True)
    except KeyboardInterrupt:
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
