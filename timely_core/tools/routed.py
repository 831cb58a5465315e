"""The router's records (router.py): a registered tool, a task of a robot with
tools and what its tools answered so far, and the ticket of one call sent."""

from __future__ import annotations

from dataclasses import dataclass, field

from timely_core.tools.call_stream import CallEvent, CallStream
from timely_core.tools.outcomes import HeldFailure, StreamedOut, ToolOutcome
from timely_core.tools.process import PluginProcess, ToolInfo
from timely_core.tools.spec import ToolSpec


@dataclass
class RoutedTool:
    spec: ToolSpec
    process: PluginProcess

    @property
    def info(self) -> ToolInfo:
        return self.process.info


@dataclass
class RoutedTask:
    task_id: str
    robot_id: str
    scene: str
    tools: list[RoutedTool]
    stream: CallStream = field(default_factory=CallStream)
    fed: int = 0  # characters of the decoded text already fed to `stream`
    awaiting: set[int] = field(default_factory=set)  # tickets of unanswered validations
    error: str = ""  # the first tool error: ends the task
    error_s: float | None = None
    outcomes: list[ToolOutcome] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)  # to append, in arrival order
    ended: bool = False
    epoch: int = 0  # rollbacks so far: replies to calls of older text are only recorded
    streaming: set[int] = field(default_factory=set)  # tickets of unanswered streamed calls
    elements: list[StreamedOut] = field(default_factory=list)  # accepted, not yet taken
    element_counts: dict[int, int] = field(default_factory=dict)  # per call index
    uncut: int = 0  # elements taken since the last segment cut (`cut_elements`)
    failure: HeldFailure | None = None  # an element of the call in progress failed
    sent: dict[int, tuple[str, float]] = field(default_factory=dict)  # ticket -> tool, sent


@dataclass(frozen=True)
class Ticket:
    number: int
    task: RoutedTask
    tool: RoutedTool
    event: CallEvent
    epoch: int = 0
