"""Between the service and the plugin processes: each robot's registered tools,
and per task the calls found in its decoded text (`CallStream`) handed to the
tools that consume them, partial calls to those that act on them.

The segment dispatcher calls `on_decoded` after each token of a robot with tools.
A tool's error (its own, or its process crashing, hanging or breaching a limit)
ends the task at its next token, or at once when the token completed a segment:
a segment is delivered only after every validating tool has answered each call
decoded so far, so a statement with a call a validator rejects is never sent.
Replies also go to the task's outcomes (`outcomes`). A task that waits suspended
between segments sees an error of a non-validating tool when it resumes.

Streamed skills: a streaming tool (`ToolPlugin.streams`) answers each call with
the elements that became complete and passed its checks; `on_decoded` waits for
its reply at every token that produced a call for it (an IPC round trip, like a
validator's verdict at a segment's end), so each element is ready for the robot
(`take_elements`) at the token that completed it, and an element it rejects ends
the task before the next token: nothing after it is handed on. When the robot
fails an element of a call still being decoded (`hold_failure`), the call's later
elements are not handed on, and the failure waits here for the call's segment to
be cut (`failure_due`), which is the point the plan is rolled back to.

Plans that react: the observations of a tool registered with
`append_observations` are appended to the generation when the segment holding
their calls completes (`RewritableEngine.rewrite`, at the end of the generated
ids), so what it writes next follows them. They never reach the robot's parser or
the plan text: the engine does not return appended ids.

Waiting for an answer without holding the engine: where the caller allows it
(`on_decoded(..., defer=True)`), a segment whose validating tools have not yet
answered is not waited for there; `on_decoded` returns True and the caller
suspends the generation (its KV handled by the predicted wait, `answer_wait_s`),
checks `answered` each iteration and then calls `on_decoded` again, which appends
the observations or raises the tool's error as before.

Answer times: each reply's measured time since its call was sent refines that
(robot, tool)'s running statistics (`answer_times`, answer_times.py), which start
from the spec's `expected_s`: the predicted wait of a generation on a tool.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from timely_core.engine.protocol import Engine, EngineError, HandlingStrategy, RewritableEngine
from timely_core.errors import one_line
from timely_core.language.segmenter import SegmentationError
from timely_core.tools.answer_times import AnswerStats, AnswerTimes
from timely_core.tools.call_stream import CallEvent, CallStream
from timely_core.tools.plugin import ToolCall, ToolReply
from timely_core.tools.process import PendingCall, PluginProcess, ToolInfo
from timely_core.tools.spec import ToolSpec

if TYPE_CHECKING:
    from timely_core.serving.generation import Generation

OBSERVATION_FORMAT = "\n{observation}\n"  # how an appended observation reads
KEPT_FINISHED_TASKS = 1000  # outcomes kept for tasks that ended
VERDICT_GRACE_S = 5.0  # past a validator's wall time, its process is killed anyway


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


@dataclass
class _Tool:
    spec: ToolSpec
    process: PluginProcess

    @property
    def info(self) -> ToolInfo:
        return self.process.info


@dataclass
class _Task:
    task_id: str
    robot_id: str
    scene: str
    tools: list[_Tool]
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
    answer_deadline: float | None = None  # a deferred wait for verdicts fails past it
    sent: dict[int, tuple[str, float]] = field(default_factory=dict)  # ticket -> tool, sent


@dataclass(frozen=True)
class _Ticket:
    number: int
    task: _Task
    tool: _Tool
    event: CallEvent
    epoch: int = 0


class ToolRouter:
    def __init__(self, engine: Engine | None = None, tokenizer: Any = None) -> None:
        """`engine` and `tokenizer` (the service's) append observations."""
        self._engine = engine
        self._tokenizer = tokenizer
        self._tools: dict[str, list[_Tool]] = {}  # by robot id
        self._tasks: dict[str, _Task] = {}  # live tasks of robots with tools
        self._finished: OrderedDict[str, _Task] = OrderedDict()
        self._cond = threading.Condition()
        self._tickets = 0
        self.answer_times = AnswerTimes()  # per (robot, tool): measured reply times
        self.answer_listener: Callable[[], None] | None = None  # told of each reply

    # ------------------------------------------------------------------ registration

    def register(self, robot_id: str, spec: ToolSpec) -> ToolInfo:
        """Start `spec`'s process for `robot_id` (replacing a tool of the same name);
        tasks that start from now on use it. Raises ToolStartError, or ValueError
        for `append_observations` without a validating tool or a rewritable engine."""
        if spec.append_observations and not isinstance(self._engine, RewritableEngine):
            raise ValueError(
                f"tool {spec.name!r}: append_observations needs an engine that can "
                f"rewrite a generation; {type(self._engine).__name__} cannot"
            )
        tool = _Tool(spec, PluginProcess(spec, self._on_reply))
        if spec.append_observations and not tool.info.validates:
            tool.process.close()
            raise ValueError(
                f"tool {spec.name!r}: append_observations needs a validating tool "
                "(its answer must be there before the statement is sent)"
            )
        with self._cond:
            tools = self._tools.setdefault(robot_id, [])
            old = [t for t in tools if t.spec.name == spec.name]
            tools[:] = [t for t in tools if t.spec.name != spec.name] + [tool]
        self.answer_times.declare(robot_id, spec.name, spec.expected_s)
        for previous in old:
            previous.process.close()
        return tool.info

    def unregister(self, robot_id: str, name: str) -> None:
        with self._cond:
            tools = self._tools.get(robot_id, [])
            gone = [t for t in tools if t.spec.name == name]
            if not gone:
                raise KeyError(f"robot {robot_id!r} has no tool {name!r}")
            tools[:] = [t for t in tools if t.spec.name != name]
        self.answer_times.forget(robot_id, name)
        for tool in gone:
            tool.process.close()

    def tools(self, robot_id: str) -> dict[str, ToolInfo]:
        with self._cond:
            return {t.spec.name: t.info for t in self._tools.get(robot_id, [])}

    def answer_stats(self, robot_id: str, name: str) -> AnswerStats:
        """How long `name` took to answer `robot_id`'s calls (its prior before any)."""
        return self.answer_times.stats(robot_id, name)

    def process_id(self, robot_id: str, name: str) -> int | None:
        with self._cond:
            for tool in self._tools.get(robot_id, []):
                if tool.spec.name == name:
                    return tool.process.pid
        raise KeyError(f"robot {robot_id!r} has no tool {name!r}")

    def close(self) -> None:
        with self._cond:
            every = [t for tools in self._tools.values() for t in tools]
            self._tools.clear()
        for tool in every:
            tool.process.close()

    # ------------------------------------------------------------------ the service's hook

    def on_decoded(self, generation: Generation, segment_done: bool, defer: bool = False) -> bool:
        """The generation decoded one more token. Hands new calls to the tools;
        when `segment_done` (a segment is about to be delivered) waits for every
        validating tool's verdict first, then appends the observations due.
        With `defer`, a verdict still out is not waited for: True is returned
        (module docstring). Raises ToolRejected on a tool's error (and on an
        observation that cannot be appended)."""
        task = self._task(generation.task_id, generation.robot_id, generation.request.scene)
        if task is None:
            return False
        text = generation.segmenter.text
        delta, task.fed = text[task.fed :], len(text)
        for event in task.stream.feed(delta) if delta else ():
            for tool in task.tools:
                partial = tool.info.partial and tool.spec.partial_calls
                if event.skill in tool.info.skills and (event.complete or partial):
                    before = text[: event.start] if tool.info.streams else ""
                    self._send(task, tool, event, before)
        with self._cond:
            # each streamed element before the next token
            streaming = [t for t in task.tools if t.info.streams]
            self._await(task, task.streaming, streaming, "no answer from its streaming tool")
            validating = [t for t in task.tools if t.info.validates]
            if segment_done and defer and task.awaiting and not task.error:
                wall_s = max(t.spec.wall_s for t in validating)
                task.answer_deadline = time.monotonic() + wall_s + VERDICT_GRACE_S
                return True
            if segment_done:
                self._await(task, task.awaiting, validating, "no verdict from its validating tools")
            task.answer_deadline = None
            if task.error:
                raise ToolRejected(task.error)
            if not (segment_done and task.observations and generation.in_engine):
                return False  # kept for the end of the segment (dropped if the plan ended)
            observations, task.observations = task.observations, []
        self._append(generation, observations)
        return False

    def answered(self, task_id: str) -> bool:
        """Whether a deferred wait is over: every verdict is in, or the task failed
        (also by a verdict overdue past the validators' wall time and a grace)."""
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None or not task.awaiting or task.error:
                return True
            deadline = task.answer_deadline
            if deadline is not None and time.monotonic() >= deadline:
                task.error = f"robot {task.robot_id}: no verdict from its validating tools"
                return True
            return False

    def epoch(self, task_id: str) -> int:
        """The task's rollbacks so far (0 for a task the router does not know)."""
        with self._cond:
            task = self._tasks.get(task_id)
            return 0 if task is None else task.epoch

    def answer_wait_s(self, task_id: str) -> float | None:
        """How much longer the task's unanswered validations are predicted to take
        (their tools' answer times less the time since each call was sent); None
        when none is out. A tool with no prediction yet counts as answering now."""
        now = time.monotonic()
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None or not task.awaiting:
                return None
            waits = [0.0]
            for ticket in task.awaiting:
                tool, sent_s = task.sent.get(ticket, ("", now))
                expected = self.answer_times.expected_s(task.robot_id, tool)
                if expected is not None:
                    waits.append(expected - (now - sent_s))
            return max(waits)

    def wait_for_answers(self, timeout_s: float) -> None:
        """Block until a tool replies (any call) or `timeout_s` passes."""
        with self._cond:
            self._cond.wait(timeout_s)

    def _await(self, task: _Task, tickets: set[int], tools: list[_Tool], missing: str) -> None:
        """Wait (cond held) until `tickets` are answered or the task failed, for at
        most the slowest of `tools`' wall time and a grace; past it the task fails
        with `missing`."""
        if not tickets or task.error:
            return
        wall_s = max(t.spec.wall_s for t in tools)
        deadline = time.monotonic() + wall_s + VERDICT_GRACE_S
        while tickets and not task.error and time.monotonic() < deadline:
            self._cond.wait(deadline - time.monotonic())
        if tickets and not task.error:
            task.error = f"robot {task.robot_id}: {missing}"

    def _append(self, generation: Generation, observations: list[str]) -> None:
        """Append the observations after the generated ids (engine gate held)."""
        engine = self._engine
        assert isinstance(engine, RewritableEngine) and self._tokenizer is not None
        text = "".join(OBSERVATION_FORMAT.format(observation=o) for o in observations)
        ids = list(self._tokenizer.encode(text, add_special_tokens=False).ids)
        gen_id = generation.gen_id
        try:
            engine_prompt = len(generation.prompt_ids) + generation.engine_base
            generated = len(engine.token_ids(gen_id)) - engine_prompt
            suspended = generation.suspended  # waited for the answer suspended: stays so
            if not suspended:
                engine.suspend(gen_id, HandlingStrategy.PRESERVE)
            engine.rewrite(gen_id, generated, ids)
            if not suspended:
                engine.resume(gen_id)
            generation.written_ids.extend(ids)
        except (EngineError, ValueError) as exc:
            raise ToolRejected(
                f"robot {generation.robot_id}: the observation {one_line(text, 200)!r} "
                f"could not be appended to the plan: {one_line(str(exc), 300)}"
            ) from exc

    def take_elements(self, task_id: str) -> list[StreamedOut]:
        """The elements streaming tools accepted since the last take, in order."""
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return []
            elements, task.elements = task.elements, []
            task.uncut += len(elements)
            return elements

    def handed_elements(self, task_id: str) -> int:
        """How many elements of the call in progress were taken (handed on)."""
        with self._cond:
            task = self._tasks.get(task_id)
            return 0 if task is None else task.uncut

    def hold_failure(self, task_id: str, failure: HeldFailure) -> None:
        """The robot failed an element of the call in progress: its later elements
        are not handed on, and `failure` waits for the call's segment."""
        with self._cond:
            task = self._tasks[task_id]
            task.failure = failure
            task.elements.clear()  # accepted, not yet taken: never handed on

    def holds_failure(self, task_id: str) -> bool:
        with self._cond:
            task = self._tasks.get(task_id)
            return task is not None and task.failure is not None

    def failure_due(self, task_id: str, dispatched: int) -> HeldFailure | None:
        """The held failure, once its segment is among the `dispatched` ones (it is
        then no longer held)."""
        with self._cond:
            task = self._tasks.get(task_id)
            failure = None if task is None else task.failure
            if task is None or failure is None or failure.index >= dispatched:
                return None
            task.failure = None
            return failure

    def cut_elements(self, task_id: str) -> int:
        """How many elements were taken since the last cut (or rollback): those of
        the call the segment being cut holds."""
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return 0
            count, task.uncut = task.uncut, 0
            return count

    def task_ended(self, task_id: str) -> None:
        """The task ended: its tools drop what they hold for it."""
        with self._cond:
            task = self._tasks.pop(task_id, None)
            if task is None:
                return
            task.ended = True
            self._finished[task_id] = task
            while len(self._finished) > KEPT_FINISHED_TASKS:
                self._finished.popitem(last=False)
        for tool in task.tools:
            tool.process.end_task(task_id)

    def rolled_back(self, task_id: str, text: str) -> None:
        """The task's decoded text went back to `text` (a failed segment's end): the
        calls past it are forgotten, their pending observations dropped, and their
        replies from now on only recorded in the outcomes."""
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                return
            stream = CallStream()
            stream.feed(text)  # the calls before the rollback keep their indices
            task.stream, task.fed = stream, len(text)
            task.observations.clear()
            task.awaiting.clear()
            task.sent.clear()
            task.streaming.clear()
            task.elements.clear()
            task.uncut = 0
            task.failure = None
            task.element_counts = {  # a call past the rollback is a new one
                i: n for i, n in task.element_counts.items() if i < stream.calls
            }
            task.epoch += 1
            self._cond.notify_all()

    def outcomes(self, task_id: str) -> list[ToolOutcome]:
        """The tools' replies to the task's calls so far, in arrival order."""
        with self._cond:
            task = self._tasks.get(task_id) or self._finished.get(task_id)
            return [] if task is None else list(task.outcomes)

    def error_time_s(self, task_id: str) -> float | None:
        """When (monotonic) the first tool error of the task arrived, if any."""
        with self._cond:
            task = self._tasks.get(task_id) or self._finished.get(task_id)
            return None if task is None else task.error_s

    # ------------------------------------------------------------------ internals

    def _task(self, task_id: str, robot_id: str, scene: str) -> _Task | None:
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                tools = list(self._tools.get(robot_id, ()))
                if not tools:
                    return None
                task = self._tasks[task_id] = _Task(task_id, robot_id, scene, tools)
            return task

    def _send(self, task: _Task, tool: _Tool, event: CallEvent, before: str) -> None:
        with self._cond:
            self._tickets += 1
            ticket = _Ticket(self._tickets, task, tool, event, task.epoch)
            if tool.info.validates:
                task.awaiting.add(ticket.number)
                task.sent[ticket.number] = (tool.spec.name, time.monotonic())
            if tool.info.streams:
                task.streaming.add(ticket.number)
        call = ToolCall(
            task_id=task.task_id,
            robot_id=task.robot_id,
            index=event.index,
            skill=event.skill,
            args=event.args,
            complete=event.complete,
            text=event.text,
            scene=task.scene,
            before=before,
            epoch=ticket.epoch,
        )
        try:
            tool.process.submit(call, ticket)
        except RuntimeError as exc:  # the tool was closed or could not restart
            self._on_reply(
                PendingCall(0, call, time.monotonic(), ticket), ToolReply.error(str(exc))
            )

    def _on_reply(self, pending: PendingCall, reply: ToolReply) -> None:
        """From a tool's reader thread (or `_send`)."""
        ticket: _Ticket = pending.context
        task, tool, event = ticket.task, ticket.tool, ticket.event
        now = time.monotonic()
        with self._cond:
            # measured only for a tool still registered (a replaced one's calls end
            # at its close) and a call that was sent (request 0: the tool was closed)
            if pending.request_id and any(t is tool for t in self._tools.get(task.robot_id, ())):
                self.answer_times.observe(task.robot_id, tool.spec.name, now - pending.sent_s)
            current = ticket.epoch == task.epoch  # not a call of rolled-back text
            task.awaiting.discard(ticket.number)
            task.sent.pop(ticket.number, None)
            task.streaming.discard(ticket.number)
            if current and tool.info.streams and reply.kind == "value" and not task.error:
                self._accept_elements(task, tool, event, reply.value)
            task.outcomes.append(
                ToolOutcome(
                    tool=tool.spec.name,
                    call_index=event.index,
                    skill=event.skill,
                    call_text=event.text,
                    complete=event.complete,
                    kind=reply.kind,
                    value=reply.value,
                    message=reply.message,
                    sent_s=pending.sent_s,
                    replied_s=now,
                )
            )
            if current and reply.kind == "observation" and tool.spec.append_observations:
                task.observations.append(str(reply.value))
            if current and reply.kind == "error" and not task.error:
                task.error = _error_message(
                    task.robot_id, tool.spec.name, event, reply, tool.info.validates
                )
                task.error_s = now
            self._cond.notify_all()
        if self.answer_listener is not None:
            self.answer_listener()

    def _accept_elements(self, task: _Task, tool: _Tool, event: CallEvent, value: Any) -> None:
        """A streaming tool's elements, numbered within their call (cond held); none
        is handed on past a failed one."""
        texts = value if isinstance(value, list) else [value]
        for text in texts:
            number = task.element_counts.get(event.index, 0)
            task.element_counts[event.index] = number + 1
            if task.failure is not None:
                continue
            task.elements.append(
                StreamedOut(event.index, event.skill, number, str(text), event.text, tool.spec.name)
            )


def _error_message(
    robot_id: str, tool: str, event: CallEvent, reply: ToolReply, validates: bool
) -> str:
    """The task's error for a tool's error reply. A validating tool answers before
    its statement is sent; any other may answer after the robot has it."""
    where = f"call {one_line(event.text, 200)!r}" + ("" if event.complete else " (partial)")
    if reply.argument is not None and 0 <= reply.argument < len(event.args):
        value = event.args[reply.argument]
        where = f"argument {reply.argument + 1} ({value!r}) of {where}"
    verb = "rejected" if reply.argument is not None else "failed on"
    what = (
        "this statement and everything after it were not sent"
        if validates
        else "the plan ends here (the statement may have been sent already)"
    )
    return f"robot {robot_id}: tool {tool!r} {verb} {where}: {one_line(reply.message)}; {what}"
