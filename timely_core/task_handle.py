"""What `PlanningService.submit` returns: the caller's view of one task.

Segments and the result are delivered by the service thread; the caller reads them
by blocking iteration, by callbacks, or both. A callback registered late is first
called with what was already delivered, so no event is lost to a race with the
service thread.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Protocol

from timely_core.events import Rollback, Segment, StreamedElement, TaskResult

log = logging.getLogger(__name__)

SegmentCallback = Callable[[Segment], None]
ResultCallback = Callable[[TaskResult], None]
RollbackCallback = Callable[[Rollback], None]
ElementCallback = Callable[[StreamedElement], None]


class TaskControl(Protocol):
    """The service operations a handle forwards to."""

    def segment_done(self, task_id: str, index: int, finished_at_s: float | None) -> None: ...

    def segment_started(self, task_id: str, index: int, started_at_s: float | None) -> None: ...

    def segment_failed(
        self,
        task_id: str,
        index: int,
        error: str,
        failed_at_s: float | None,
        element: int | None = None,
    ) -> Rollback | None: ...

    def cancel(self, task_id: str) -> None: ...

    def fail(self, task_id: str, error: str) -> None: ...


class TaskHandle:
    def __init__(self, control: TaskControl, task_id: str, robot_id: str) -> None:
        self._control = control
        self.task_id = task_id
        self.robot_id = robot_id
        self._cond = threading.Condition()
        self._segments: list[Segment] = []  # every segment delivered, withdrawn ones too
        self._live: list[Segment] = []  # without the segments rollbacks withdrew
        self._result: TaskResult | None = None
        self._segment_callbacks: list[SegmentCallback] = []
        self._result_callbacks: list[ResultCallback] = []
        self._rollbacks: list[Rollback] = []
        self._rollback_callbacks: list[RollbackCallback] = []
        self._elements: list[StreamedElement] = []
        self._element_callbacks: list[ElementCallback] = []

    def segments(self, timeout_s: float | None = None) -> Iterator[Segment]:
        """Segments in order, blocking for each; ends after the task's result.
        Segments a rollback withdrew (a failed segment replanned, `segment_failed`)
        are skipped: after the rollback the next one is the replacement of the first
        withdrawn, so a robot loop over this never runs a withdrawn segment. Raises
        TimeoutError if none arrives within `timeout_s`."""
        check_timeout(timeout_s)
        index = 0
        while True:
            with self._cond:
                arrived = self._cond.wait_for(partial(self._ready, index), timeout=timeout_s)
                index = min(index, len(self._live))  # withdrawn meanwhile: their replacements
                if not arrived:
                    raise TimeoutError(
                        f"task {self.task_id}: no segment {index} within {timeout_s} s"
                    )
                if index >= len(self._live):
                    return
                segment = self._live[index]
            index += 1
            yield segment

    def _ready(self, index: int) -> bool:
        """Whether `segments()` at `index` may go on: a segment there (or, past a
        rollback, at the first withdrawn index), or the result."""
        return min(index, len(self._live)) < len(self._live) or self._result is not None

    def result(self, timeout_s: float | None = None) -> TaskResult:
        """The final result; blocks. Raises TimeoutError after `timeout_s`."""
        check_timeout(timeout_s)
        with self._cond:
            if not self._cond.wait_for(lambda: self._result is not None, timeout=timeout_s):
                raise TimeoutError(f"task {self.task_id}: no result within {timeout_s} s")
            assert self._result is not None
            return self._result

    def done(self) -> bool:
        with self._cond:
            return self._result is not None

    def on_segment(self, callback: SegmentCallback) -> None:
        with self._cond:
            self._segment_callbacks.append(callback)
            past = list(self._segments)
        for segment in past:
            _call(callback, segment)

    def on_result(self, callback: ResultCallback) -> None:
        with self._cond:
            self._result_callbacks.append(callback)
            result = self._result
        if result is not None:
            _call(callback, result)

    def on_rollback(self, callback: RollbackCallback) -> None:
        """`callback(rollback)` for each rollback after a failed segment, in order with
        the segments (those of the same index delivered before it are withdrawn)."""
        with self._cond:
            self._rollback_callbacks.append(callback)
            past = list(self._rollbacks)
        for rollback in past:
            _call(callback, rollback)

    def on_element(self, callback: ElementCallback) -> None:
        """`callback(element)` for each element of a streamed call, in order with the
        segments (an element comes before the segment that holds its call)."""
        with self._cond:
            self._element_callbacks.append(callback)
            past = list(self._elements)
        for element in past:
            _call(callback, element)

    def elements(self) -> list[StreamedElement]:
        """The streamed elements delivered so far."""
        with self._cond:
            return list(self._elements)

    def rollbacks(self) -> list[Rollback]:
        """The rollbacks so far (`segment_failed`)."""
        with self._cond:
            return list(self._rollbacks)

    def segment_failed(
        self,
        index: int,
        error: str,
        failed_at_s: float | None = None,
        element: int | None = None,
    ) -> Rollback | None:
        """The robot failed segment `index` (at its streamed `element`, if given) with
        `error`: replanned from its end when the request asked for it
        (`PlanningService.segment_failed`), else the task ends."""
        return self._control.segment_failed(self.task_id, index, error, failed_at_s, element)

    def segment_done(self, index: int, finished_at_s: float | None = None) -> None:
        """The robot finished executing segment `index` at `finished_at_s` (service
        clock; now if omitted). Corrects the timing of the next segment."""
        self._control.segment_done(self.task_id, index, finished_at_s)

    def segment_started(self, index: int, started_at_s: float | None = None) -> None:
        """Segment `index` reached the robot only at `started_at_s` (service clock; now
        if omitted): it was held, e.g. until an operator approved it (`Segment.approvals`).
        The hold counts in the task's waiting time."""
        self._control.segment_started(self.task_id, index, started_at_s)

    def cancel(self) -> None:
        """Stop the task and free its KV at once. UnknownTask/TaskFinished if it ended."""
        self._control.cancel(self.task_id)

    def fail(self, error: str) -> None:
        """End the task as failed with `error` (its robot lost, a segment an operator
        denied), its KV freed at once. UnknownTask/TaskFinished if it ended."""
        self._control.fail(self.task_id, error)

    # Called by the service (outside its own lock); return nothing, run callbacks.
    def deliver_segment(self, segment: Segment) -> None:
        with self._cond:
            self._segments.append(segment)
            self._live.append(segment)
            callbacks = list(self._segment_callbacks)
            self._cond.notify_all()
        for callback in callbacks:
            _call(callback, segment)

    def deliver_element(self, element: StreamedElement) -> None:
        with self._cond:
            self._elements.append(element)
            callbacks = list(self._element_callbacks)
        for callback in callbacks:
            _call(callback, element)

    def deliver_rollback(self, rollback: Rollback) -> None:
        with self._cond:
            self._rollbacks.append(rollback)
            self._live = [s for s in self._live if s.index <= rollback.failed_index]
            callbacks = list(self._rollback_callbacks)
        for callback in callbacks:
            _call(callback, rollback)

    def deliver_result(self, result: TaskResult) -> None:
        with self._cond:
            self._result = result
            callbacks = list(self._result_callbacks)
            self._cond.notify_all()
        for callback in callbacks:
            _call(callback, result)


def check_timeout(timeout_s: float | None) -> None:
    """A wait's timeout: None (no limit) or a number of seconds >= 0 (NaN would wait
    forever without saying so)."""
    if timeout_s is None:
        return
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real):
        raise TypeError(f"timeout_s must be seconds or None, got {type(timeout_s).__name__}")
    if math.isnan(timeout_s) or timeout_s < 0:
        raise ValueError(f"timeout_s must be None or seconds >= 0, got {timeout_s}")


def _call(callback: Callable[[object], None] | Callable[..., None], event: object) -> None:
    try:
        callback(event)
    except Exception:  # a caller's bug must not stop the service thread
        log.exception("task callback %r failed", callback)
