"""What the tools' replies become: each reply as a task's outcome, a streaming
tool's accepted elements, a robot's failure held for a streamed call, and the
task's error for a tool's error reply (router.py routes them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from timely_core.errors import one_line
from timely_core.language.segmenter import SegmentationError
from timely_core.tools.call_stream import CallEvent
from timely_core.tools.plugin import ToolReply


class ToolRejected(SegmentationError):
    """A tool rejected a call (or failed on it): the task ends with this message."""


@dataclass(frozen=True)
class ToolOutcome:
    """One reply of a tool to one call of a task (monotonic clock times)."""

    tool: str
    call_index: int
    skill: str
    call_text: str
    complete: bool
    kind: str  # ok, value, observation, error
    value: Any
    message: str
    sent_s: float
    replied_s: float


@dataclass(frozen=True)
class StreamedOut:
    """An element a streaming tool accepted, for the robot: `text` is an executable
    call (e.g. "fp(100,0,50)"); `element` counts from 0 within its call."""

    call_index: int
    skill: str
    element: int
    text: str
    call_text: str  # the call as decoded when the element was accepted
    tool: str


@dataclass(frozen=True)
class HeldFailure:
    """The robot failed `element` (from 0) of the streamed call that segment `index`
    will hold, before that segment was cut (failure_recovery.py)."""

    index: int
    element: int
    error: str
    at_s: float  # service clock


def error_message(
    robot_id: str, tool: str, event: CallEvent, reply: ToolReply, validates: bool
) -> str:
    """The task's error for a tool's error reply. A validating tool answers before
    its statement is sent; any other may answer after the robot has it. The
    argument at fault is named counting from 1, as people do ("argument 2" is
    `call.args[1]`, the tool's `argument=1`)."""
    where = f"call {one_line(event.text, 200)!r}" + ("" if event.complete else " (partial)")
    verb, message, index = "failed on", one_line(reply.message), reply.argument
    if index is not None and 0 <= index < len(event.args):
        verb, where = "rejected", f"argument {index + 1} ({event.args[index]!r}) of {where}"
    elif index is not None:  # ToolReply.error(argument=...) counts from 0
        count = len(event.args)
        message += (
            f" (the tool named argument={index}, out of range: the call has {count} "
            f"argument{'' if count == 1 else 's'} so far, numbered from 0)"
        )
    what = (
        "this statement and everything after it were not sent"
        if validates
        else "the plan ends here (the statement may have been sent already)"
    )
    return f"robot {robot_id}: tool {tool!r} {verb} {where}: {message}; {what}"
