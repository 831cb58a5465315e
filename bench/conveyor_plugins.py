"""Tools for bench/conveyor.py, loaded by module name in their own processes."""

from __future__ import annotations

import time
from typing import Any

from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply


class ElementTool(ToolPlugin):
    """Works `t_s` seconds on each complete call it gets (one element of Fig. 8).
    Options: `skills` (names it consumes), `t_s`, `partial` (also take partial
    calls, doing nothing with them: the parsing and IPC overhead case)."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.skills = frozenset(options["skills"])  # type: ignore[misc]
        self.partial = bool(options.get("partial", False))  # type: ignore[misc]
        self._t_s = float(options.get("t_s", 0.0))

    def on_call(self, call: ToolCall) -> ToolReply:
        if self._t_s > 0:
            time.sleep(self._t_s)
        return ToolReply.ok()
