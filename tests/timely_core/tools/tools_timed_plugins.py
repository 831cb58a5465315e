"""A plugin for the answer-time tests, loaded by module name in its own process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from robot_models.tools.path_stream import StreamedPath
from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply


class TimedLook(ToolPlugin):
    """Validates `search(obj)` and observes where the object is, after sleeping
    `options["delay_s"]` (real clock): a tool that takes that long to answer."""

    skills = frozenset({"search"})
    validates = True

    def on_call(self, call: ToolCall) -> ToolReply:
        time.sleep(float(self.options["delay_s"]))
        return ToolReply.observes(f"{call.args[0]} is on the table")


def wait_for_gate(options: dict[str, Any]) -> None:
    """Return once the file `options["gate"]` exists (the test opens it)."""
    gate = Path(str(options["gate"]))
    while not gate.exists():
        time.sleep(0.005)


class GatedLook(ToolPlugin):
    """Like `TimedLook`, but answers only once the file `options["gate"]` exists:
    a tool that answers when the test says so."""

    skills = frozenset({"search"})
    validates = True

    def on_call(self, call: ToolCall) -> ToolReply:
        wait_for_gate(self.options)
        return ToolReply.observes(f"{call.args[0]} is on the table")


class GatedPath(StreamedPath):
    """The drone's streamed path, answering each call only once the file
    `options["gate"]` exists: a streaming tool that answers when the test says so."""

    def on_partial(self, call: ToolCall) -> ToolReply:
        wait_for_gate(self.options)
        return super().on_partial(call)

    def on_call(self, call: ToolCall) -> ToolReply:
        wait_for_gate(self.options)
        return super().on_call(call)


class GatedCheck(ToolPlugin):
    """Validates the calls of `options["skills"]`, each only once the file
    `options["gate"]` exists: a validator that answers when the test says so."""

    validates = True

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.skills = frozenset(str(s) for s in options["skills"])  # type: ignore[misc]

    def on_call(self, call: ToolCall) -> ToolReply:
        wait_for_gate(self.options)
        return ToolReply.ok()
