"""Tool plugins of the ROS tests, loaded by module name in the planner's tool
processes (the planner runs from the repository root)."""

from __future__ import annotations

import time

from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply


class HungPick(ToolPlugin):
    """Validates the arm's picks and never answers: a hung validating tool."""

    skills = frozenset({"pk", "pick"})
    validates = True

    def on_call(self, call: ToolCall) -> ToolReply:
        while True:
            time.sleep(1)
