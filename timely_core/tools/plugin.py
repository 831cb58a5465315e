"""What a tool author writes: a `ToolPlugin` subclass (see docs/service-api.md,
"Tool plugins").

A plugin names the statements (skill names, as written in plans) it consumes and
says whether it acts on partial calls (Conveyor: start on the arguments decoded so
far) and whether it validates (the statement is delivered to the robot only once
it accepted the complete call). Each method returns a `ToolReply`: ok, a value, an
observation, or an error naming the argument at fault. The plugin runs in its own
process (`worker.py`); this module imports nothing heavy so that process starts fast.

A streaming plugin (`streams`, for a streamed skill such as a drone's path) answers
each call with the elements that became complete and passed its checks
(`ToolReply.elements`): the service hands them to the robot at once, before the
call is fully decoded; the service waits for its reply at the token that produced
the call, so an element it rejects stops the generation before anything after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

REPLY_KINDS = ("ok", "value", "observation", "error")


@dataclass(frozen=True)
class Unresolved:
    """An argument that is not a literal (a variable or a nested call), as written."""

    text: str


ArgValue = int | float | str | bool | Unresolved


@dataclass(frozen=True)
class ToolCall:
    """One call of a consumed skill, as far as it has been decoded."""

    task_id: str
    robot_id: str
    index: int  # the call's position among the task's calls (nested ones included)
    skill: str  # as written in the plan (short or full name)
    args: tuple[ArgValue, ...]  # the arguments complete so far
    complete: bool  # the closing parenthesis was decoded
    text: str  # the call's text so far, e.g. "visit('a','b'"
    scene: str = ""  # the scene the task plans in (its request's, or the robot's published)
    # the task's plan text before the call (the statements it follows); streaming
    # tools only, the others get ""
    before: str = ""
    # the task's rollbacks so far (a failed segment): a call after one is a new call,
    # also at an index and with a text an earlier call had
    epoch: int = 0


@dataclass(frozen=True)
class ToolReply:
    kind: str = "ok"  # one of REPLY_KINDS
    value: Any = None  # a value or an observation (msgpack-serialisable)
    message: str = ""  # for an error: what was wrong
    argument: int | None = None  # for an error: index in `call.args` (from 0) at fault

    def __post_init__(self) -> None:
        if self.kind not in REPLY_KINDS:
            raise ValueError(f"reply kind must be one of {REPLY_KINDS}, got {self.kind!r}")

    @staticmethod
    def ok() -> ToolReply:
        return ToolReply()

    @staticmethod
    def returns(value: Any) -> ToolReply:
        return ToolReply("value", value)

    @staticmethod
    def observes(text: str) -> ToolReply:
        return ToolReply("observation", text)

    @staticmethod
    def elements(texts: list[str]) -> ToolReply:
        """A streaming tool's answer: these elements (each an executable call, e.g.
        "fp(100,0,50)") go to the robot now, in order."""
        return ToolReply("value", list(texts))

    @staticmethod
    def error(message: str, argument: int | None = None) -> ToolReply:
        """The call is wrong (or the tool failed on it): the task ends with
        `message`. `argument` is the index in `call.args` of the argument at fault,
        counting from 0; the task's error names it counting from 1, as people read
        it (`argument=1` reads "rejected argument 2 (...) of call ..."). An index
        the call does not have is reported as such."""
        return ToolReply("error", message=message, argument=argument)


class ToolPlugin:
    """Base class of a tool. Subclasses set `skills` (a class attribute, or an
    instance attribute set in `__init__` from the options) and override `on_call`
    (and `on_partial` when `partial` is True). Instances live as long as their
    process, across tasks: keep per-task state keyed by `call.task_id` and drop it
    in `on_task_end`."""

    skills: ClassVar[frozenset[str]] = frozenset()
    partial: ClassVar[bool] = False  # receives calls as their arguments stream out
    validates: ClassVar[bool] = False  # its verdict gates the statement's delivery
    # its value replies are elements for the robot (`ToolReply.elements`), awaited at
    # every token that produced a call (implies partial and validates)
    streams: ClassVar[bool] = False

    def __init__(self, options: dict[str, Any]) -> None:
        """`options`: the `ToolSpec.options` the plugin was registered with."""
        self.options = options

    def on_partial(self, call: ToolCall) -> ToolReply:
        """A new argument of `call` was decoded (`call.args` grew by one)."""
        return ToolReply.ok()

    def on_call(self, call: ToolCall) -> ToolReply:
        """`call` is complete."""
        return ToolReply.ok()

    def on_task_end(self, task_id: str) -> None:
        """The task ended (done, failed or cancelled): stop its work, forget it."""
