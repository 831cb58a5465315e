"""Drive a PlanningService through a trace with simulated robots, on either clock.

One event loop serves both clocks: arrivals and robot completions sit in a heap; the
loop lets the service run until the next event (`run_until` on the virtual clock,
a condition-variable wait while the service thread works on the real one), then
submits the arrival or reports the segment's end with `segment_done`. Segment
callbacks come from the service and only push events, so they stay short.

In virtual time the loop steps at most `VIRTUAL_STEP_S` at a time, because a segment
emitted during a step schedules its robot's end, which must be reported about when
it happens. While no task that has arrived is still open, nothing can be emitted
before the next arrival (or robot event), so the clock skips the empty steps to just
before it (`VirtualPacer`): a sparse or late trace replays in time proportional to
its work, not to its idle time.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from lrtrace.replay.fleet import ExecutionSampler, SimulatedRobot
from lrtrace.results_format import SegmentRecord, TaskRecord
from lrtrace.trace_format import TraceFile, TraceTask
from timely_core.errors import ServiceError
from timely_core.events import Segment, TaskResult
from timely_core.request import TaskRequest
from timely_core.serving.kv_handling import REFRESH_ITERATIONS

VIRTUAL_STEP_S = 0.02  # longest a robot's end can wait to be reported in virtual time
DRAIN_LIMIT_S = 3600.0  # after the last arrival; a task still open then is reported failed
# Every step is one pass of the service loop, and its KV handling counts passes: it
# re-decides every REFRESH_ITERATIONS passes and counts memory as short for
# 2 * REFRESH_ITERATIONS passes after an admission fell short. Quiet steps are skipped
# only once that window has passed and in whole periods, so every decision, and every
# result, is the same as stepping through them.
QUIET_STEPS_BEFORE_SKIP = 2 * REFRESH_ITERATIONS + 1


class Pacer(Protocol):
    """How the loop lets time pass while the service works."""

    def now(self) -> float: ...

    def advance_to(
        self, t_s: float, wake: threading.Condition, quiet_until: float | None = None
    ) -> None:
        """Let time pass towards `t_s` and return by then at the latest: at it, when
        `wake` is notified (real clock), or after one step (virtual clock).
        `quiet_until`: nothing can happen before then (no arrived task is open);
        None when something may."""


class VirtualPacer:
    def __init__(self, service: Any) -> None:
        self._service = service
        self._quiet_steps = 0  # consecutive steps with nothing to do

    def now(self) -> float:
        return float(self._service.clock.now())

    def advance_to(
        self, t_s: float, wake: threading.Condition, quiet_until: float | None = None
    ) -> None:
        now = self.now()
        self._quiet_steps = 0 if quiet_until is None else self._quiet_steps + 1
        if quiet_until is not None and self._quiet_steps > QUIET_STEPS_BEFORE_SKIP:
            skipped = quiet_steps(now, quiet_until)
            if skipped:  # the clock lands where stepping would have, a few steps short
                self._service.clock.sleep_until(now + skipped * VIRTUAL_STEP_S)
                return
        target = min(t_s, now + VIRTUAL_STEP_S)
        self._service.run_until(target)
        self._service.clock.sleep_until(target)  # an idle service may not move the clock


def quiet_steps(now_s: float, until_s: float) -> int:
    """How many whole steps from `now_s` may be skipped, in whole KV refresh periods,
    leaving at least one step before `until_s` to be stepped as usual."""
    whole = math.floor((until_s - now_s) / VIRTUAL_STEP_S) - 2
    return max(0, whole - whole % REFRESH_ITERATIONS)


class RealPacer:
    def __init__(self, service: Any) -> None:
        self._service = service

    def now(self) -> float:
        return float(self._service.clock.now())

    def advance_to(
        self, t_s: float, wake: threading.Condition, quiet_until: float | None = None
    ) -> None:
        delay = t_s - self.now()
        if delay > 0:
            wake.wait(timeout=min(delay, 0.5))


@dataclass
class _Open:
    task: TraceTask
    record: TaskRecord
    robot: SimulatedRobot
    handle: Any = None
    segments: list[Segment] = field(default_factory=list)


@dataclass(order=True)
class _Event:
    at_s: float  # absolute, on the service clock (relative times lose exactness)
    seq: int
    kind: str = field(compare=False)  # "arrive" | "done"
    task_id: str = field(compare=False)
    index: int = field(compare=False, default=0)


def new_record(task: TraceTask, variant: str = "") -> TaskRecord:
    return TaskRecord(
        task_id=task.task_id,
        trace_id=task.trace_id,
        agent_id=task.agent_id,
        robot_type=task.robot_type,
        variant=variant,
        urgency=task.urgency,
        tuf=task.tuf,
        arrival_s=task.arrival_s,
    )


class ServiceDriver:
    """Replays one trace through one started (real clock) or idle (virtual) service."""

    def __init__(
        self,
        service: Any,
        pacer: Pacer,
        sampler: ExecutionSampler,
        network_latency_s: float,
        on_task_done: Callable[[TaskRecord], None],
        stop: threading.Event,
        presubmit: bool = False,
    ) -> None:
        """`presubmit`: hand every task to the service up front with `submit_at` (virtual
        time: arrivals are exact); otherwise submit each when its time comes."""
        self._presubmit = presubmit
        self._service = service
        self._pacer = pacer
        self._sampler = sampler
        self._latency = network_latency_s
        self._on_task_done = on_task_done
        self._stop = stop
        self._wake = threading.Condition()
        self._heap: list[_Event] = []
        self._seq = itertools.count()
        self._open: dict[str, _Open] = {}
        self._t0 = 0.0
        self._closing = False

    def run(self, trace: TraceFile, records: list[TaskRecord]) -> None:
        """Append one record per task (trace order) to `records` and complete them as
        tasks end; unfinished ones keep finished=False."""
        self._t0 = self._pacer.now()
        variants = {a.agent_id: a.variant for a in trace.agents}
        for task in trace.tasks:
            record = new_record(task, variants.get(task.agent_id, ""))
            opened = _Open(task, record, SimulatedRobot(task.robot_type, _rng(task)))
            self._open[task.task_id] = opened
            records.append(opened.record)
            if self._presubmit:
                self._submit(opened, at_s=self._t0 + task.arrival_s)
            else:
                self._push(self._t0 + task.arrival_s, "arrive", task.task_id)
        try:
            self._loop(trace)
        except KeyboardInterrupt:
            self._stop.set()
            raise
        finally:
            self._close()

    def _loop(self, trace: TraceFile) -> None:
        last_arrival = trace.tasks[-1].arrival_s if trace.tasks else 0.0
        while not self._stop.is_set():
            with self._wake:
                now = self._pacer.now()
                if not self._open or now - self._t0 > last_arrival + DRAIN_LIMIT_S:
                    break
                due = []
                while self._heap and self._heap[0].at_s <= now:
                    due.append(heapq.heappop(self._heap))
            # Calls into the service happen outside our lock: its thread takes our lock
            # in the segment callbacks, so holding it here could deadlock.
            for ev in due:
                self._handle(ev)
            with self._wake:
                if not self._open:
                    break
                nxt = self._heap[0].at_s if self._heap else now + 1.0
                self._pacer.advance_to(nxt, self._wake, self._quiet_until(now))

    def _quiet_until(self, now: float) -> float | None:
        """When something can next happen, if no task that has arrived is open (the
        service then has nothing to do before the next arrival, and no robot event
        is due before the heap's first); None otherwise. Only presubmitted arrivals
        (virtual time) are known to the service ahead."""
        if not self._presubmit or not self._open:
            return None
        first = next(iter(self._open.values()))  # trace order: the earliest arrival
        arrival = self._t0 + first.task.arrival_s
        if arrival <= now:
            return None
        return min(arrival, self._heap[0].at_s) if self._heap else arrival

    def _close(self) -> None:
        """Cancel what is still open (frees its KV; matters when the engine is reused)."""
        self._closing = True
        for opened in list(self._open.values()):
            if opened.handle is not None:
                _cancel(opened.handle)
            if not opened.record.finished:
                opened.record.error = opened.record.error or (
                    "interrupted" if self._stop.is_set() else "not finished within the drain limit"
                )

    # -- events -------------------------------------------------------------------------

    def _push(self, at_s: float, kind: str, task_id: str, index: int = 0) -> None:
        heapq.heappush(self._heap, _Event(at_s, next(self._seq), kind, task_id, index))

    def _handle(self, ev: _Event) -> None:
        opened = self._open.get(ev.task_id)
        if opened is None:
            return
        if ev.kind == "arrive":
            self._submit(opened)
        else:
            opened.handle.segment_done(ev.index, finished_at_s=ev.at_s)

    def _submit(self, opened: _Open, at_s: float | None = None) -> None:
        task = opened.task
        request = TaskRequest(
            robot_id=task.agent_id,
            instruction=task.instruction,
            scene=task.scene,
            tuf=task.tuf,
            task_id=task.task_id,
        )
        try:
            if at_s is None:
                handle = self._service.submit(request)
            else:
                handle = self._service.submit_at(at_s, request)
        except ServiceError as err:  # e.g. QueueFull: the task is rejected, as a robot sees it
            opened.record.error = f"{type(err).__name__}: {err}"
            opened.record.finished = True
            self._open.pop(opened.task.task_id, None)
            self._on_task_done(opened.record)
            return
        opened.handle = handle
        handle.on_segment(lambda seg, o=opened: self._segment(o, seg))
        handle.on_result(lambda res, o=opened: self._result(o, res))

    # -- service callbacks (service thread, or inside run_until) --------------------------

    def _segment(self, opened: _Open, seg: Segment) -> None:
        with self._wake:
            emitted = seg.emitted_at_s - self._t0
            ex = opened.robot.execute(emitted, seg.statements, self._sampler, self._latency)
            opened.segments.append(seg)
            opened.record.segments.append(
                SegmentRecord(
                    index=seg.index,
                    text=seg.text,
                    statements=len(seg.statements),
                    emitted_s=emitted,
                    dispatched_s=ex.dispatched_s,
                    exec_start_s=ex.start_s,
                    exec_end_s=ex.end_s,
                )
            )
            self._push(self._t0 + ex.end_s, "done", opened.task.task_id, seg.index)
            self._wake.notify_all()

    def _result(self, opened: _Open, res: TaskResult) -> None:
        with self._wake:
            if self._closing:  # our own cancel of an unfinished task: it stays unfinished
                return
            rec = opened.record
            rec.plan_text = res.plan_text
            rec.success = res.success and bool(rec.segments)
            rec.error = res.error
            rec.finished = True
            self._open.pop(opened.task.task_id, None)
            self._on_task_done(rec)
            self._wake.notify_all()


def _rng(task: TraceTask) -> random.Random:
    return random.Random(task.seed)


def _cancel(handle: Any) -> None:
    try:
        handle.cancel()
    except Exception:  # the task may have ended meanwhile; cancel is best effort here
        return
