"""The ROS 2 target: replays a trace through a running timely planner node by sending
PlanTask goals, via `timely_ros.replay_target` (imported only when asked for, so
lrtrace works without ROS 2). Robots are whatever executors the planner dispatches
to (simulated or real); their start and end times come back in the feedback.

Contract with `timely_ros.replay_target` (see docs/lrtrace.md):
`replay(trace, policy, records, on_task_done, stop, network_latency_s)` sends each
task's goal at its arrival time, appends a `TaskRecord` per task up front, fills in
segments and results, and returns when all tasks ended or `stop` is set.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from types import ModuleType

from lrtrace.errors import LrtraceError
from lrtrace.replay.fleet import NETWORK_LATENCY_S
from lrtrace.replay.task_check import check_robot_types
from lrtrace.results_format import Target, TaskRecord
from lrtrace.trace_format import TraceFile
from lrtrace.variants import trace_variants
from timely_core.engine.protocol import HandlingStrategy


class RosTarget:
    kind: Target = "ros"
    simulated = False
    profile = ""

    def __init__(self, module: ModuleType, network_latency_s: float) -> None:
        self._module = module
        self._latency = network_latency_s
        self.engine = str(getattr(module, "ENGINE_NAME", "ros:timely_planner"))

    @classmethod
    def connect(cls, network_latency_s: float = NETWORK_LATENCY_S) -> RosTarget:
        try:
            module = importlib.import_module("timely_ros.replay_target")
        except ImportError as err:
            raise LrtraceError(
                f"--target ros needs ROS 2 (rclpy) and the timely_ros package: {err}; "
                "install with `pip install -e .[ros]` and build the interfaces (make setup)"
            ) from None
        if not callable(getattr(module, "replay", None)):
            raise LrtraceError("timely_ros.replay_target has no replay() function")
        return cls(module, network_latency_s)

    def batch_cap(self, max_batch: int | None) -> int | None:
        return None  # the planner node's own configuration, not visible from here

    def kv_settings(self, policy: str) -> tuple[HandlingStrategy | None, bool | None]:
        return None, None  # likewise

    def check(self, trace: TraceFile) -> None:
        """The planner answers any request, but not a task on a robot of another type
        than its catalog task's (`check_robot_types`, as every target). Nor a trace
        whose agents name fleet variants: the planner's config decides each robot's."""
        check_robot_types(trace)
        named = trace_variants(trace)
        if named:
            raise LrtraceError(
                f"the trace's agents plan with fleet variants ({', '.join(named)}); a ROS 2 "
                "planner serves each robot the variant its planner config names "
                "(docs/fleet-variants.md): configure them there and replay a trace composed "
                "without --variants"
            )

    def run(
        self,
        trace: TraceFile,
        policy: str,
        max_batch: int | None,
        records: list[TaskRecord],
        on_task_done: Callable[[TaskRecord], None],
        stop: threading.Event,
    ) -> float | None:
        if max_batch is not None:
            raise LrtraceError("--max-batch is not supported with --target ros (planner config)")
        try:
            self._module.replay(
                trace=trace,
                policy=policy,
                records=records,
                on_task_done=on_task_done,
                stop=stop,
                network_latency_s=self._latency,
            )
        except RuntimeError as err:  # no planner answering, or it runs another policy
            raise LrtraceError(f"ROS 2 replay: {err}") from None
        return None  # the planner's engine is in another process
