"""A plugin for the plugin-mix tests, loaded by module name in its own process."""

from __future__ import annotations

import os

from lrtrace.api_tools import ApiTool
from timely_core.tools.plugin import ToolCall, ToolReply


class CrashingApiTool(ApiTool):
    """An `ApiTool` whose process dies on any call of the task `options["crash_task"]`."""

    def on_call(self, call: ToolCall) -> ToolReply:
        if call.task_id == self.options["crash_task"]:
            os._exit(3)
        return super().on_call(call)
