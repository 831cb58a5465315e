"""Ending a goal as cancelled without racing the cancel callback.

The cancel callback runs before rclpy moves the goal to CANCELING; a goal thread
that noticed the stop request and called `canceled()` in between would fail (and
rclpy would abort the goal instead). So wait, briefly, for the state to change.
"""

from __future__ import annotations

import time

from rclpy.action.server import ServerGoalHandle


def end_cancelled(goal_handle: ServerGoalHandle, wait_s: float = 2.0) -> bool:
    """Mark the goal cancelled; abort it if no cancel request shows up in `wait_s`.
    Returns True if it ended as cancelled."""
    deadline = time.monotonic() + wait_s
    while not goal_handle.is_cancel_requested and time.monotonic() < deadline:
        time.sleep(0.002)
    if goal_handle.is_cancel_requested:
        goal_handle.canceled()
        return True
    goal_handle.abort()
    return False
