"""An ActionServer whose goal callback can learn the goal's id.

rclpy hands the goal callback only the goal message, yet a rejection is only
useful to a client that can tell which of its goals it was (two goals may carry
the same robot and instruction). The id is recorded by the goal message's
identity for the duration of the callback."""

from __future__ import annotations

from typing import Any

from rclpy.action import ActionServer


class IdentifiedActionServer(ActionServer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._goal_ids: dict[int, str] = {}
        super().__init__(*args, **kwargs)

    def goal_id_of(self, goal: Any) -> str:
        """The id (hex) of the goal being checked, "" if unknown."""
        return self._goal_ids.get(id(goal), "")

    async def _execute_goal_request(self, request_header_and_message: Any) -> None:
        _header, request = request_header_and_message
        key = id(request.goal)
        self._goal_ids[key] = bytes(request.goal_id.uuid).hex()
        try:
            await super()._execute_goal_request(request_header_and_message)
        finally:
            self._goal_ids.pop(key, None)
