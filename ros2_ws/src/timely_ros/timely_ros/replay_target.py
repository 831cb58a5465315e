"""Replay an LRTrace trace through a running timely planner, over ROS 2.

`lrtrace --target ros` imports this module lazily and calls `replay(...)` (contract
in lrtrace/replay/targets/ros.py). Each task's PlanTask goal is sent at its arrival
time (TUF from the trace); segments stream back as feedback, and the planner's
/timely/robot_progress events (`start` when a segment is sent to the robot, `end`
when the robot reported it done) give each segment's execution interval. Times are
seconds since the replay started, on this process's monotonic clock.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from std_msgs.msg import String
from timely_interfaces.msg import ServiceStatus
from timely_interfaces.msg import Tuf as TufMsg

from timely_ros.config import planner_names
from timely_ros.executor import TimelyExecutor
from timely_ros.plan_client import PlanCall, PlanClient, make_goal
from timely_ros.qos import TOPIC

ENGINE_NAME = "ros:timely_planner"
SERVER_WAIT_S = 30.0
DRAIN_LIMIT_S = 600.0  # after the last arrival


@dataclass
class _Open:
    record: Any  # lrtrace.results_format.TaskRecord
    call: PlanCall | None = None
    task_id: str = ""
    emitted: dict[int, float] = field(default_factory=dict)
    texts: dict[int, str] = field(default_factory=dict)
    starts: dict[int, float] = field(default_factory=dict)
    ends: dict[int, float] = field(default_factory=dict)


class RosReplay:
    """One replay session: its own rclpy context, node and spinning executor."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("lrtrace_replay", context=self.context)
        self.client = PlanClient(self.node)
        self._lock = threading.Lock()
        self._by_task: dict[str, _Open] = {}
        self._progress: list[tuple[float, dict[str, Any]]] = []
        self.status: ServiceStatus | None = None
        names = planner_names()
        progress, status = names.absolute(names.robot_progress), names.absolute(names.status)
        self.node.create_subscription(String, progress, self._on_progress, TOPIC)
        self.node.create_subscription(ServiceStatus, status, self._on_status, TOPIC)
        self._executor = TimelyExecutor(num_threads=4, context=self.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self.t0 = time.monotonic()

    def _spin(self) -> None:
        with contextlib.suppress(ExternalShutdownException):
            self._executor.spin()

    def close(self) -> None:
        self._executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self._thread.join(timeout=5)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _on_status(self, msg: ServiceStatus) -> None:
        self.status = msg

    def _on_progress(self, msg: String) -> None:
        event = json.loads(msg.data)
        if event.get("event") not in ("start", "end"):
            return
        with self._lock:
            item = self._by_task.get(event["task_id"])
            if item is None:  # the task's first segment feedback is still in flight
                self._progress.append((self.now(), event))
                return
            self._apply(item, self.now(), event)

    @staticmethod
    def _apply(item: _Open, t: float, event: dict[str, Any]) -> None:
        index = int(event["segment"])
        (item.starts if event["event"] == "start" else item.ends)[index] = t

    def _on_segment(self, item: _Open, call: PlanCall, segment: Any) -> None:
        t = self.now()
        with self._lock:
            if not item.task_id:
                item.task_id = segment.task_id
                self._by_task[segment.task_id] = item
                early = [(t_e, e) for t_e, e in self._progress if e["task_id"] == segment.task_id]
                self._progress = [p for p in self._progress if p[1]["task_id"] != segment.task_id]
                for t_e, e in early:
                    self._apply(item, t_e, e)
            item.emitted[segment.index] = t
            item.texts[segment.index] = segment.text

    def submit(self, item: _Open, task: Any) -> None:
        tuf = TufMsg(
            expected_response_time_s=task.tuf.expected_response_time_s,
            slope=task.tuf.slope,
            initial_utility=task.tuf.initial_utility,
        )
        goal = make_goal(task.agent_id, task.instruction, urgency="", scene=task.scene, tuf=tuf)
        item.call = self.client.send(goal, on_segment=lambda c, s: self._on_segment(item, c, s))


def _finish(item: _Open, count_statements: Callable[[str, str], int]) -> None:
    from lrtrace.results_format import SegmentRecord

    call = item.call
    record = item.record
    assert call is not None
    result = call.result
    record.finished = True
    if call.accepted is False:
        record.success = False
        record.error = "goal rejected by the planner"
        return
    if result is None:  # the planner went away or restarted: no result will come
        record.success = False
        record.error = call.client_error or "the goal ended without a result"
        return
    record.plan_text = result.plan
    record.success = bool(result.success)
    record.error = result.error
    for index in sorted(item.emitted):
        text = item.texts[index]
        start = item.starts.get(index, item.emitted[index])
        end = item.ends.get(index, start)
        record.segments.append(
            SegmentRecord(
                index=index,
                text=text,
                statements=count_statements(record.robot_type, text),
                emitted_s=item.emitted[index],
                dispatched_s=start,
                exec_start_s=start,
                exec_end_s=end,
            )
        )
    if record.success and any(i not in item.ends for i in item.emitted):
        record.success = False
        record.error = "the robot's end of a segment was not reported"


END_EVENT_GRACE_S = 5.0  # progress events travel on a topic, results on a service


def _settled(item: _Open) -> bool:
    """The goal ended and every segment's end event arrived (or the grace ran out)."""
    call = item.call
    if call is None or not call.done.is_set():
        return False
    if call.result is None or not call.result.success:
        return True
    if all(i in item.ends for i in item.emitted):
        return True
    return time.monotonic() - call.finished_at > END_EVENT_GRACE_S


def _statement_counter() -> Callable[[str, str], int]:
    from robot_models.language import load_language

    languages: dict[str, Any] = {}

    def count(robot_type: str, text: str) -> int:
        if robot_type not in languages:
            languages[robot_type] = load_language(robot_type)
        try:
            return len(languages[robot_type].parse(text))
        except ValueError:
            return 0

    return count


def replay(
    trace: Any,
    policy: str,
    records: list[Any],
    on_task_done: Callable[[Any], None],
    stop: threading.Event,
    network_latency_s: float = 0.0,
) -> None:
    """Send each task of `trace` at its arrival time to the running planner and fill
    one TaskRecord per task (appended up front). `network_latency_s` is ignored: the
    network is real here. Raises RuntimeError if no planner answers or it runs a
    different policy than asked."""
    from lrtrace.results_format import TaskRecord

    session = RosReplay()
    try:
        if not session.client.wait_for_server(SERVER_WAIT_S):
            raise RuntimeError(f"no timely planner answered within {SERVER_WAIT_S:g} s")
        deadline = time.monotonic() + 3.0
        while session.status is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if session.status is not None and session.status.policy != policy:
            raise RuntimeError(
                f"the planner runs policy {session.status.policy!r}, not {policy!r}: "
                "restart it with that policy in its config"
            )
        items = []
        for task in trace.tasks:
            record = TaskRecord(
                task_id=task.task_id,
                trace_id=task.trace_id,
                agent_id=task.agent_id,
                robot_type=task.robot_type,
                urgency=task.urgency,
                tuf=task.tuf,
                arrival_s=task.arrival_s,
            )
            records.append(record)
            items.append(_Open(record))
        count = _statement_counter()
        session.t0 = time.monotonic()
        pending = list(zip(trace.tasks, items, strict=True))
        open_items: list[_Open] = []
        last_arrival = trace.tasks[-1].arrival_s if trace.tasks else 0.0
        try:
            while (pending or open_items) and not stop.is_set():
                now = session.now()
                while pending and pending[0][0].arrival_s <= now:
                    task, item = pending.pop(0)
                    open_items.append(item)
                    session.submit(item, task)
                for item in [i for i in open_items if _settled(i)]:
                    open_items.remove(item)
                    with session._lock:
                        _finish(item, count)
                    on_task_done(item.record)
                if now > last_arrival + DRAIN_LIMIT_S:
                    break
                wait = 0.01 if not pending else min(0.01, max(0.0, pending[0][0].arrival_s - now))
                stop.wait(wait)
        finally:  # stopped, drained or interrupted (Ctrl-C): no goal of ours goes on
            session.client.cancel_and_wait([i.call for i in open_items if i.call is not None])
    finally:
        session.close()
