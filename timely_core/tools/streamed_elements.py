"""A streaming tool's accepted elements on their way to the robot, and a failure
the robot reports for one of them while its call is still decoded (the router's
part for streamed skills: router.py's docstring, "Streamed skills")."""

from __future__ import annotations

import threading
from typing import Any

from timely_core.tools.call_stream import CallEvent
from timely_core.tools.outcomes import HeldFailure, StreamedOut
from timely_core.tools.routed import RoutedTask, RoutedTool


class StreamedElements:
    """ToolRouter's methods for streamed elements (its `_cond` and `_tasks`)."""

    _cond: threading.Condition
    _tasks: dict[str, RoutedTask]

    def take_elements(self, task_id: str) -> list[StreamedOut]:
        """The elements streaming tools accepted since the last take, in order."""
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return []
            elements, task.elements = task.elements, []
            task.uncut += len(elements)
            return elements

    def handed_elements(self, task_id: str) -> int:
        """How many elements of the call in progress were taken (handed on)."""
        with self._cond:
            task = self._tasks.get(task_id)
            return 0 if task is None else task.uncut

    def hold_failure(self, task_id: str, failure: HeldFailure) -> None:
        """The robot failed an element of the call in progress: its later elements
        are not handed on, and `failure` waits for the call's segment."""
        with self._cond:
            task = self._tasks[task_id]
            task.failure = failure
            task.elements.clear()  # accepted, not yet taken: never handed on

    def holds_failure(self, task_id: str) -> bool:
        with self._cond:
            task = self._tasks.get(task_id)
            return task is not None and task.failure is not None

    def failure_due(self, task_id: str, dispatched: int) -> HeldFailure | None:
        """The held failure, once its segment is among the `dispatched` ones (it is
        then no longer held)."""
        with self._cond:
            task = self._tasks.get(task_id)
            failure = None if task is None else task.failure
            if task is None or failure is None or failure.index >= dispatched:
                return None
            task.failure = None
            return failure

    def cut_elements(self, task_id: str) -> int:
        """How many elements were taken since the last cut (or rollback): those of
        the call the segment being cut holds."""
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return 0
            count, task.uncut = task.uncut, 0
            return count


def accept_elements(task: RoutedTask, tool: RoutedTool, event: CallEvent, value: Any) -> None:
    """A streaming tool's elements, numbered within their call (cond held); none
    is handed on past a failed one."""
    texts = value if isinstance(value, list) else [value]
    for text in texts:
        number = task.element_counts.get(event.index, 0)
        task.element_counts[event.index] = number + 1
        if task.failure is not None:
            continue
        task.elements.append(
            StreamedOut(event.index, event.skill, number, str(text), event.text, tool.spec.name)
        )
