"""A plugin for the answer-time tests, loaded by module name in its own process."""

from __future__ import annotations

import time

from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply


class TimedLook(ToolPlugin):
    """Validates `search(obj)` and observes where the object is, after sleeping
    `options["delay_s"]` (real clock): a tool that takes that long to answer."""

    skills = frozenset({"search"})
    validates = True

    def on_call(self, call: ToolCall) -> ToolReply:
        time.sleep(float(self.options["delay_s"]))
        return ToolReply.observes(f"{call.args[0]} is on the table")
