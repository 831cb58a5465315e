"""rclpy's `ActionClient` with a `send_goal_async` that registers one future per goal.

In the ros-rclpy 9.1.2 wheel, `send_goal_async` registers a future for the request
inside its lock and then a second one for the same sequence number outside it (a
regression fixed upstream by ros2/rclpy#1532, not in any wheel on PyPI yet). Two
defects follow:
- the first future is never completed and stays in the client's `_futures` for
  good; the executor walks that list on every action event, so a long-lived client
  (PlanClient, the planner's link to each robot) slowed down with every goal it
  ever sent (a 12,000-goal fuzz fell from 180 to 71 goals/s; docs/design-notes.md);
- a goal response that arrives between the two registrations completes the first
  future, and the caller, holding the second, waits forever.

This subclass sends the request and registers its one future under the client's
lock, so the response cannot be handled before the future is in place (the
executor takes responses under the same lock). The feedback callback is registered
before the request goes out, so no early feedback is missed.

`cancel_goal_id_async` cancels a goal by its id, before (or without) any answer to
its request: a goal whose answer never came may still be running on the server.

rclpy's constructor adds the client to its node before it creates the client's
lock, so an executor already spinning that node can meet the client without one
(`AttributeError: 'ActionClient' object has no attribute '_lock'`, which ends the
executor's spin thread); this subclass creates the lock first and keeps it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from action_msgs.srv import CancelGoal
from rclpy.action import ActionClient as RclpyActionClient
from rclpy.task import Future
from unique_identifier_msgs.msg import UUID


class ActionClient(RclpyActionClient[Any, Any, Any]):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        lock = threading.Lock()
        self._lock = lock  # before rclpy hands the client to a spinning executor
        super().__init__(*args, **kwargs)
        self._lock = lock  # rclpy made another; an executor may already hold this one

    def send_goal_async(
        self,
        goal: Any,
        feedback_callback: Callable[[Any], None] | None = None,
        goal_uuid: UUID | None = None,
    ) -> Future[Any]:
        if not isinstance(goal, self._action_type.Goal):
            raise TypeError(f"expected a {self._action_type.Goal.__name__}, got {type(goal)}")
        request = self._action_type.Impl.SendGoalService.Request()
        request.goal_id = goal_uuid or UUID(uuid=list(uuid.uuid4().bytes))
        request.goal = goal
        future: Future[Any] = Future()
        with self._lock:
            if feedback_callback is not None:
                self._feedback_callbacks[bytes(request.goal_id.uuid)] = feedback_callback
            sequence = self._client_handle.send_goal_request(request)
            if sequence in self._pending_goal_requests:
                raise RuntimeError(f"goal request sequence {sequence} is already pending")
            self._pending_goal_requests[sequence] = future
            self._goal_sequence_number_to_goal_id[sequence] = request.goal_id
            future.add_done_callback(self._remove_pending_goal_request)
            self.add_future(future)  # the executor sets itself on it
        return future

    def cancel_goal_id_async(self, goal_id: UUID) -> Future[Any]:
        """Ask the server to cancel goal `goal_id`, known to it or not (yet)."""
        request = CancelGoal.Request()
        request.goal_info.goal_id = goal_id
        future: Future[Any] = Future()
        with self._lock:
            sequence = self._client_handle.send_cancel_request(request)
            if sequence in self._pending_cancel_requests:
                raise RuntimeError(f"cancel request sequence {sequence} is already pending")
            self._pending_cancel_requests[sequence] = future
            future.add_done_callback(self._remove_pending_cancel_request)
            self.add_future(future)
        return future
