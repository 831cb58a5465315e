"""Bring-up without `ros2 launch`: the configured nodes composed in one process on
one multi-threaded executor (`TimelyExecutor`; ordinary ROS 2 composition); Ctrl-C
or SIGTERM stops them cleanly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions

from timely_ros.config import (
    BringupConfig,
    ConfigError,
    ExecutorParams,
    PlannerParams,
    executor_to_parameters,
    planner_to_parameters,
)
from timely_ros.executor import TimelyExecutor
from timely_ros.stop_signals import StopSignals

Which = Literal["all", "planner", "executors"]

SHUTDOWN_GRACE_S = 1.0
GOALS_END_WAIT_S = 5.0  # for stopped goals to end as the process stops
RESULTS_SENT_S = 0.5  # then for their results to go out


def _overrides(flat: dict[str, Any]) -> list[Parameter]:
    return [Parameter(name, value=value) for name, value in flat.items()]


def make_planner(params: PlannerParams, service: Any = None) -> Node:
    from timely_ros.planner_node import PlannerNode

    return PlannerNode(
        service=service,
        namespace=f"/{params.namespace}",
        parameter_overrides=_overrides(planner_to_parameters(params)),
    )


def make_executor(params: ExecutorParams) -> Node:
    from timely_ros.skill_executor_node import SkillExecutorNode

    return SkillExecutorNode(
        namespace=f"/{params.robot_id}",
        parameter_overrides=_overrides(executor_to_parameters(params)),
    )


def make_nodes(config: BringupConfig, which: Which = "all", service: Any = None) -> list[Node]:
    nodes: list[Node] = []
    if which in ("all", "executors"):
        nodes.extend(make_executor(e) for e in config.executors)
    if which in ("all", "planner") and config.planner is not None:
        nodes.append(make_planner(config.planner, service))
    return nodes


def executor_threads(nodes: list[Node]) -> int:
    planner_threads = sum(int(getattr(n, "executor_threads", 0)) for n in nodes)
    return planner_threads + 3 * len(nodes) + 4


def spin(nodes: list[Node], until: Callable[[], bool] | None = None) -> None:
    """Spin the nodes until Ctrl-C/SIGTERM (or `until()` turns true), then destroy them."""
    executor = TimelyExecutor(num_threads=executor_threads(nodes))
    for node in nodes:
        executor.add_node(node)
    try:
        if until is None:
            executor.spin()
        else:
            while rclpy.ok() and not until():
                executor.spin_once(timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        for node in nodes:  # first: a goal waiting on a hung tool ends now, not at its wall_s
            stop = getattr(node, "stop_serving", None)
            if stop is not None:
                stop()
        _spin_while_goals_end(executor, nodes)
        executor.shutdown(timeout_sec=2.0)
        for node in reversed(nodes):
            node.destroy_node()


def _spin_while_goals_end(executor: TimelyExecutor, nodes: list[Node]) -> None:
    """Keep spinning (at most GOALS_END_WAIT_S) until the stopped goals have ended:
    their robots' cancel answers arrive, and heartbeats go on, so a client learns
    why its goal ended instead of seeing the planner vanish."""
    deadline = time.monotonic() + GOALS_END_WAIT_S
    while executor.context.ok() and time.monotonic() < deadline:
        if not any(getattr(node, "goals_in_progress", 0) for node in nodes):
            # rclpy sends a result to the client from a callback the executor runs
            deadline = min(deadline, time.monotonic() + RESULTS_SENT_S)
            while executor.context.ok() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            return
        executor.spin_once(timeout_sec=0.05)


def until_shut_down(nodes: list[Node], who: str) -> Callable[[], bool]:
    """True a moment after a planner of `nodes` was shut down (lifecycle `shutdown`):
    it serves nothing any more, so its process stops rather than keep a dead planner
    up. The moment lets it answer the client that asked for the shutdown."""
    seen: list[float] = []

    def stop() -> bool:
        if not seen and any(getattr(node, "finalized", False) for node in nodes):
            print(f"{who}: the planner was shut down (lifecycle); stopping", flush=True)
            seen.append(time.monotonic())
        return bool(seen) and time.monotonic() - seen[0] > SHUTDOWN_GRACE_S

    return stop


def up(config: BringupConfig, which: Which = "all") -> int:
    """`timely up`: init ROS, start the nodes, serve until stopped. ConfigError when
    `which` selects nothing in `config` (it would serve nothing until stopped)."""
    if which == "planner" and config.planner is None:
        raise ConfigError("--only planner: the config has no planner node")
    if which == "executors" and not config.executors:
        raise ConfigError("--only executors: the config has no skill executor")
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # StopSignals owns them
    with StopSignals() as signals:  # through the clean-up too
        try:
            nodes = make_nodes(config, which)
            for node in nodes:
                node.get_logger().info("up")
            print(f"timely up: {len(nodes)} node(s) running; Ctrl-C stops", flush=True)
            shut_down = until_shut_down(nodes, "timely up")
            spin(nodes, until=lambda: signals.requested or shut_down())
        finally:
            rclpy.try_shutdown()
    return 0
