"""rclpy's `ActionClient` without the future leak of the ros-rclpy 9.1.2 wheel.

In that release `send_goal_async` registers two futures for one goal request (a
regression fixed upstream by ros2/rclpy#1532, not in any wheel on PyPI yet): the
first is never completed, so it stays in the client's `_futures` for good, and the
executor walks that list on every action event. A long-lived client (PlanClient, the
planner's link to each robot) then slows down with every goal it ever sent: a fuzz
of 12,000 goals fell from 180 to 71 goals/s (docs/design-notes.md). This subclass
drops futures that no request is waiting on after each send, which is a no-op on an
rclpy without the regression.
"""

from __future__ import annotations

import contextlib
from typing import Any

from rclpy.action import ActionClient as RclpyActionClient


class ActionClient(RclpyActionClient[Any, Any, Any]):
    def send_goal_async(self, goal: Any, *args: Any, **kwargs: Any) -> Any:
        future = super().send_goal_async(goal, *args, **kwargs)
        with self._lock:
            # rclpy's done callbacks delete from these dicts without the lock: iterate
            # copies (dict.copy is one C call under the GIL)
            pending = (
                self._pending_goal_requests.copy(),
                self._pending_cancel_requests.copy(),
                self._pending_result_requests.copy(),
            )
            waited_on = {id(f) for requests in pending for f in requests.values()}
            # a new list: an executor thread may be iterating the old one
            self._futures = [f for f in self._futures if id(f) in waited_on or f is future]
        return future

    def remove_future(self, future: Any) -> None:
        # a future completing while the list is pruned may already be gone
        with contextlib.suppress(ValueError):
            super().remove_future(future)
