"""The service's streaming parser of calls (`name(arg, ...)`), the syntax every plan
language here writes its skill calls in (Conveyor: the system, not each tool,
parses the model's output, one parser per output syntax).

Fed the decoded text as it grows, it reports each call when one of its arguments
completes (a partial call: the skill name and the arguments so far) and when its
closing parenthesis arrives (complete). Nested calls are calls of their own; an
argument that is not a literal (a variable, a nested call, an expression) is passed
as `Unresolved` text. It never rejects text: whether a plan is valid is the robot's
parser's business; this one only finds calls in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from timely_core.tools.plugin import ArgValue, Unresolved

_INT = re.compile(r"[-+]?\d+")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?")
_NAME_CHAR = re.compile(r"[A-Za-z0-9_]")
_OPEN_GROUP = "(["
_CLOSE = ")]"


@dataclass(frozen=True)
class CallEvent:
    index: int  # the call's position among the calls of the text, in order of opening
    skill: str
    args: tuple[ArgValue, ...]
    complete: bool
    text: str  # from the skill name to the last character decoded (or the ')')
    start: int  # offset of the skill name in the whole text


@dataclass
class _Frame:
    """An open call, or a group (parenthesis or bracket without a name)."""

    name: str  # "" for a group
    index: int
    start: int
    arg_start: int
    args: list[ArgValue] = field(default_factory=list)
    arg_done: bool = False  # the current argument was a string, reported when it closed


def literal(text: str) -> ArgValue:
    """The value of an argument's text: int, float, quoted string, bool, else Unresolved."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and text[0] not in text[1:-1]:
        return text[1:-1]
    if text in ("True", "False"):
        return text == "True"
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return Unresolved(text)


class CallStream:
    def __init__(self) -> None:
        self._text: list[str] = []
        self._pos = 0
        self._quote = ""  # the open string's quote character
        self._name_start = -1  # start of the identifier being read or just read
        self._name_end = -1  # its end (exclusive); -1 while reading or none
        self._stack: list[_Frame] = []
        self._calls = 0

    @property
    def calls(self) -> int:
        """Calls opened so far (the next call's index)."""
        return self._calls

    @property
    def open_calls(self) -> int:
        return sum(1 for frame in self._stack if frame.name)

    def feed(self, text: str) -> list[CallEvent]:
        events: list[CallEvent] = []
        for ch in text:
            self._text.append(ch)
            self._char(ch, events)
            self._pos += 1
        return events

    def _char(self, ch: str, events: list[CallEvent]) -> None:
        pos = self._pos
        if self._quote:
            if ch == self._quote:
                self._quote = ""
                self._string_closed(pos, events)
            return
        if _NAME_CHAR.match(ch):
            if self._name_start < 0 or self._name_end >= 0:
                self._name_start, self._name_end = pos, -1
            return
        if self._name_start >= 0 and self._name_end < 0:
            self._name_end = pos  # the identifier ended here
        if ch.isspace():
            return
        name = self._pending_name()
        self._name_start = self._name_end = -1
        if ch in "'\"":
            self._quote = ch
        elif ch == "(" and name:
            self._calls += 1
            self._stack.append(_Frame(name, self._calls - 1, pos - len(name), pos + 1))
        elif ch in _OPEN_GROUP:
            self._stack.append(_Frame("", -1, pos, pos + 1))
        elif ch == "," and self._stack and self._stack[-1].name:
            frame = self._stack[-1]
            reported = self._end_argument(frame, pos)
            frame.arg_start = pos + 1
            if not reported:
                events.append(self._event(frame, complete=False))
        elif ch in _CLOSE and self._stack:
            frame = self._stack.pop()
            if frame.name:
                if self._slice(frame.arg_start, pos).strip() or frame.args:
                    self._end_argument(frame, pos)
                events.append(self._event(frame, complete=True))

    def _string_closed(self, pos: int, events: list[CallEvent]) -> None:
        """A string argument is known the moment its quote closes (Conveyor's early
        validation: before the ',' or ')' after it)."""
        if not self._stack or not self._stack[-1].name:
            return
        frame = self._stack[-1]
        value = literal(self._slice(frame.arg_start, pos + 1))
        if isinstance(value, str):
            frame.args.append(value)
            frame.arg_done = True
            events.append(self._event(frame, complete=False))

    def _end_argument(self, frame: _Frame, pos: int) -> bool:
        """Record the argument ending at `pos`; True if it was already reported."""
        value = literal(self._slice(frame.arg_start, pos))
        if frame.arg_done:
            frame.arg_done = False
            same = frame.args[-1] == value
            frame.args[-1] = value  # the same string, or more after it: then Unresolved
            return same
        frame.args.append(value)
        return False

    def _pending_name(self) -> str:
        """The identifier just before this character (whitespace allowed between),
        if it starts with a letter or '_' (not a number)."""
        if self._name_start < 0:
            return ""
        name = self._slice(self._name_start, self._name_end)
        return name if not name[0].isdigit() else ""

    def _slice(self, start: int, end: int) -> str:
        return "".join(self._text[start:end])

    def _event(self, frame: _Frame, complete: bool) -> CallEvent:
        return CallEvent(
            index=frame.index,
            skill=frame.name,
            args=tuple(frame.args),
            complete=complete,
            text=self._slice(frame.start, self._pos + 1),
            start=frame.start,
        )
