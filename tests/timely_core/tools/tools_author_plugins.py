"""Plugins with a first-time author's mistakes (test_tools_author_mistakes.py)."""

from __future__ import annotations

from typing import Any

from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply


class BareSkill(ToolPlugin):
    skills = "fault"  # type: ignore[assignment]  # a str, not a set of names


class NumberedSkills(ToolPlugin):
    skills = frozenset({1, 2})  # type: ignore[arg-type]


class ExitsAtStart(ToolPlugin):
    skills = frozenset({"fault"})

    def __init__(self, options: dict[str, Any]) -> None:
        raise SystemExit(3)


class BadReplyFields(ToolPlugin):
    skills = frozenset({"fault"})

    def on_call(self, call: ToolCall) -> ToolReply:
        if call.args == ("message",):
            return ToolReply("error", message=404)  # type: ignore[arg-type]
        return ToolReply.error("bad", argument="first")  # type: ignore[arg-type]
