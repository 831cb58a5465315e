"""Which goal a robot runs: one at a time, in the order they asked.

Two goals for one robot may be planned at once, but a robot runs one task: an arm
holding the first task's cup must not run the second task's segment in between.
A goal takes its robot's turn before it sends the robot its first segment and
keeps it until the goal ends; a goal asking meanwhile waits (its planning goes on),
and the turns go first come, first served.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

POLL_S = 0.1  # how often a waiting goal looks whether it was cancelled


class RobotTurns:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._holders: dict[str, str] = {}  # robot id -> goal id
        self._waiting: dict[str, list[str]] = {}  # robot id -> goal ids, first come first

    def take(
        self,
        robot_id: str,
        goal_id: str,
        cancelled: threading.Event,
        on_wait: Callable[[str], None] = lambda _holder: None,
    ) -> bool:
        """Take `robot_id`'s turn for `goal_id` (at once if it holds it or the robot
        is free), waiting while another goal holds it; False if `cancelled` is set
        first. `on_wait(holder)` is called once when it has to wait."""
        with self._changed:
            holder = self._holders.get(robot_id)
            if holder is None or holder == goal_id:
                self._holders[robot_id] = goal_id
                return True
            queue = self._waiting.setdefault(robot_id, [])
            queue.append(goal_id)
            on_wait(holder)
            try:
                while not cancelled.is_set():
                    if robot_id not in self._holders and queue[0] == goal_id:
                        self._holders[robot_id] = goal_id
                        return True
                    self._changed.wait(POLL_S)
                return False
            finally:
                queue.remove(goal_id)
                if not queue:
                    del self._waiting[robot_id]
                self._changed.notify_all()  # the next in line may go now

    def give_back(self, robot_id: str, goal_id: str) -> None:
        """`goal_id` ended: the next goal waiting for `robot_id` goes (nothing if it
        did not hold the turn)."""
        with self._changed:
            if self._holders.get(robot_id) == goal_id:
                del self._holders[robot_id]
                self._changed.notify_all()

    def holder(self, robot_id: str) -> str | None:
        """The goal that holds `robot_id`'s turn now, if any."""
        with self._changed:
            return self._holders.get(robot_id)
