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
the task before the next token: nothing after it is handed on. With
`stream_wait_s` that wait lasts so long at most: a slower answer is waited for
out of the service loop (`Deferred.STREAM`), the generation taking no token
meanwhile, so a hung streaming tool does not stall every robot. When the robot
fails an element of a call still being decoded (`hold_failure`), the call's later
elements are not handed on, and the failure waits here for the call's segment to
be cut (`failure_due`), which is the point the plan is rolled back to.

Plans that react: the observations of a tool registered with
`append_observations` are appended to the generation when the segment holding
their calls completes (`RewritableEngine.rewrite`, at the end of the generated
ids, as observed ids a plan grammar does not read), so what it writes next follows
them. They never reach the robot's parser or
the plan text: the engine does not return appended ids.

Waiting for an answer without holding the engine: where the caller allows it
(`on_decoded(..., defer=True)`), a segment whose validating tools have not yet
answered is not waited for there; `on_decoded` returns `Deferred.VERDICTS` and
the caller suspends the generation (its KV handled by the predicted wait,
`answer_wait_s`), checks `answered` each iteration and then calls `on_decoded`
again, which appends the observations or raises the tool's error as before.

Answer times: each reply's measured time since its call was sent refines that
(robot, tool)'s running statistics (`answer_times`, answer_times.py), which start
from the spec's `expected_s`: the predicted wait of a generation on a tool.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any

from timely_core.engine.plan_candidates import CandidateEngine
from timely_core.engine.protocol import Engine, EngineError, HandlingStrategy, RewritableEngine
from timely_core.errors import one_line
from timely_core.tools.answer_times import AnswerStats, AnswerTimes
from timely_core.tools.call_stream import CallEvent, CallStream
from timely_core.tools.outcomes import (
    HeldFailure,
    StreamedOut,
    ToolOutcome,
    ToolRejected,
    error_message,
)
from timely_core.tools.plugin import ToolCall, ToolReply
from timely_core.tools.process import PendingCall, PluginProcess, ToolInfo
from timely_core.tools.routed import RoutedTask, RoutedTool, Ticket
from timely_core.tools.spec import ToolSpec
from timely_core.tools.streamed_elements import StreamedElements, accept_elements

__all__ = [  # the outcomes' types are the router's to its users
    "OBSERVATION_FORMAT",
    "HeldFailure",
    "StreamedOut",
    "ToolOutcome",
    "ToolRejected",
    "ToolRouter",
    "encode_observed",
]

if TYPE_CHECKING:
    from timely_core.language.segmenter import Segmenter
    from timely_core.serving.generation import Generation

OBSERVATION_FORMAT = "\n{observation}\n"  # how an appended observation reads
# The most text a segment's observations may append: tokenized in the service loop,
# so a tool's huge answer would stall every robot; far beyond what a planner's
# context holds (a token spans at least one character of plan text).
MAX_OBSERVATION_CHARS = 65_536
KEPT_FINISHED_TASKS = 1000  # outcomes kept for tasks that ended
# how long past the time a tool is bound to have answered or failed a call
# (`PluginProcess.due_s`) a verdict is waited for: the tool's own limits end it first
VERDICT_GRACE_S = 5.0
NO_VERDICT = "no verdict from its validating tool"
NO_STREAM_ANSWER = "no answer from its streaming tool"


class Deferred(Enum):
    """What `on_decoded` left to wait for out of the service loop."""

    NO = "no"  # nothing: the token's handling goes on
    VERDICTS = "verdicts"  # the validating tools' verdicts at a segment's end
    STREAM = "stream"  # a streaming tool's answer to this token's call


class ToolRouter(StreamedElements):
    def __init__(self, engine: Engine | None = None, tokenizer: Any = None) -> None:
        """`engine` and `tokenizer` (the service's) append observations."""
        self._engine = engine
        self._tokenizer = tokenizer
        self._tools: dict[str, list[RoutedTool]] = {}  # by robot id
        self._tasks: dict[str, RoutedTask] = {}  # live tasks of robots with tools
        self._finished: OrderedDict[str, RoutedTask] = OrderedDict()
        self._cond = threading.Condition()
        self._tickets = 0
        self.answer_times = AnswerTimes()  # per (robot, tool): measured reply times
        self.answer_listener: Callable[[], None] | None = None  # told of each reply

    # ------------------------------------------------------------------ registration

    def register(
        self, robot_id: str, spec: ToolSpec, calls: frozenset[str] | None = None
    ) -> ToolInfo:
        """Start `spec`'s process for `robot_id` (replacing a tool of the same name);
        tasks that start from now on use it. `calls`: the names the robot's plans
        call skills by (None: not known). Raises ToolStartError, or ValueError for
        a tool that consumes skills those plans never call (it would never be
        called: a safety validator silently off), or for `append_observations`
        without a validating tool or a rewritable engine; the robot's tool of that
        name, if any, stays then."""
        if spec.append_observations and not isinstance(self._engine, RewritableEngine):
            raise ValueError(
                f"tool {spec.name!r}: append_observations needs an engine that can "
                f"rewrite a generation; {type(self._engine).__name__} cannot"
            )
        if spec.append_observations and isinstance(self._engine, CandidateEngine):
            raise ValueError(
                f"tool {spec.name!r}: append_observations cannot be used with plan "
                "candidates (ServiceConfig.plan_candidates): a plan chosen among them "
                "holds no KV to append an observation to"
            )
        tool = RoutedTool(spec, PluginProcess(spec, self._on_reply))
        unknown = sorted(tool.info.skills - calls) if calls is not None else []
        if unknown:
            tool.process.close()
            raise ValueError(
                f"tool {spec.name!r} of robot {robot_id!r} consumes "
                f"{', '.join(map(repr, unknown))}, which its plans never call; they call: "
                f"{', '.join(sorted(calls or ()))}"
            )
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

    def on_decoded(
        self,
        generation: Generation,
        segment_done: bool,
        defer: bool = False,
        stream_wait_s: float | None = None,
    ) -> Deferred:
        """The generation decoded one more token. Hands new calls to the tools;
        when `segment_done` (a segment is about to be delivered) waits for every
        validating tool's verdict first, then appends the observations due.
        With `defer`, a verdict still out is not waited for (`Deferred.VERDICTS`);
        with `stream_wait_s`, a streaming tool's answer is waited for that long at
        most (`Deferred.STREAM`); the caller calls again once `answered` (module
        docstring). Raises ToolRejected on a tool's error (and on an observation
        that cannot be appended)."""
        task = self._task(generation.task_id, generation.robot_id, generation.request.scene)
        if task is None:
            return Deferred.NO
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
            if not self._await(task, task.streaming, NO_STREAM_ANSWER, stream_wait_s):
                return Deferred.STREAM
            if segment_done and defer and task.awaiting and not task.error:
                return Deferred.VERDICTS
            if segment_done:
                self._await(task, task.awaiting, NO_VERDICT)
            if task.error:
                raise ToolRejected(task.error)
            if not (segment_done and task.observations and generation.in_engine):
                return Deferred.NO  # kept for the end of the segment (dropped if it ended)
            observations, task.observations = task.observations, []
        self._append(generation, observations)
        return Deferred.NO

    def answered(self, task_id: str, wait: Deferred = Deferred.VERDICTS) -> bool:
        """Whether a deferred wait is over: every verdict (or, for `Deferred.STREAM`,
        every streaming tool's answer) is in, or the task failed (also by an answer
        overdue: `_verdict_due`)."""
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None or task.error:
                return True
            streams = wait is Deferred.STREAM
            tickets = task.streaming if streams else task.awaiting
            if not tickets:
                return True
            if time.monotonic() >= self._verdict_due(task, tickets):
                task.error = self._overdue(
                    task, tickets, NO_STREAM_ANSWER if streams else NO_VERDICT
                )
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

    def _await(
        self, task: RoutedTask, tickets: set[int], missing: str, within_s: float | None = None
    ) -> bool:
        """Wait (cond held) until `tickets` are answered or the task failed; past
        `_verdict_due` the task fails with `missing`. True once over; False when
        `within_s` passed first (the tickets still out)."""
        stop = None if within_s is None else time.monotonic() + within_s
        while tickets and not task.error:
            now = time.monotonic()
            remaining = self._verdict_due(task, tickets) - now
            if remaining <= 0:
                task.error = self._overdue(task, tickets, missing)
                return True
            if stop is not None:
                if now >= stop:
                    return False
                remaining = min(remaining, stop - now)
            self._cond.wait(remaining)
        return True

    def _verdict_due(self, task: RoutedTask, tickets: set[int]) -> float:
        """Until when `tickets` are waited for (cond held): a grace past the latest
        time their tools are bound to have answered or failed them. That moves on
        with the tool (`PluginProcess.due_s`: the wall time of the call it is on, or
        a restart's timeout), so a call queued behind another, or behind a slow
        restart, is waited for; only a tool that broke its own limits is overdue."""
        names = {task.sent[t][0] for t in tickets if t in task.sent}
        dues = [t.process.due_s() for t in task.tools if t.spec.name in names]
        return max(dues, default=time.monotonic()) + VERDICT_GRACE_S

    @staticmethod
    def _overdue(task: RoutedTask, tickets: set[int], missing: str) -> str:
        names = sorted({task.sent[t][0] for t in tickets if t in task.sent})
        return (
            f"robot {task.robot_id}: {missing} {', '.join(map(repr, names))}: it neither "
            "answered nor failed the call within its limits (its wall time, or a "
            f"restart's timeout) and a grace of {VERDICT_GRACE_S:g} s"
        )

    def _append(self, generation: Generation, observations: list[str]) -> None:
        """Append the observations after the statement that called the tool (engine
        gate held). When the token that completed it also decoded text past it (`}?`
        of `...}?lk('mug')`), that token is replaced by its two parts with the
        observations between them, so they land between the statements and the
        segmenter, which has seen the token, still reads the same plan text."""
        engine = self._engine
        tokenizer = self._tokenizer
        assert isinstance(engine, RewritableEngine) and tokenizer is not None
        text = "".join(OBSERVATION_FORMAT.format(observation=o) for o in observations)
        if len(text) > MAX_OBSERVATION_CHARS:  # refused before it is tokenized in the loop
            raise ToolRejected(
                f"robot {generation.robot_id}: the observations of this segment are "
                f"{len(text)} characters, more than a plan may be given "
                f"(MAX_OBSERVATION_CHARS={MAX_OBSERVATION_CHARS}): "
                f"{one_line(text, 200)!r}"
            )
        before, after = _split_last_token(generation.segmenter)
        ids, observed = encode_observed(tokenizer, before, text, after)
        replaced = 1 if after else 0
        gen_id = generation.gen_id
        try:
            engine_prompt = len(generation.prompt_ids) + generation.engine_base
            generated = len(engine.token_ids(gen_id)) - engine_prompt - replaced
            suspended = generation.suspended  # waited for the answer suspended: stays so
            if not suspended:
                engine.suspend(gen_id, HandlingStrategy.PRESERVE)
            engine.rewrite(gen_id, generated, ids, observed=observed)
            if not suspended:
                engine.resume(gen_id)
            generation.written_ids[len(generation.written_ids) - replaced :] = ids
        except (EngineError, ValueError) as exc:
            raise ToolRejected(
                f"robot {generation.robot_id}: the observation {one_line(text, 200)!r} "
                f"could not be appended to the plan: {one_line(str(exc), 300)}"
            ) from exc

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

    def _task(self, task_id: str, robot_id: str, scene: str) -> RoutedTask | None:
        with self._cond:
            task = self._tasks.get(task_id)
            if task is None:
                tools = list(self._tools.get(robot_id, ()))
                if not tools:
                    return None
                task = self._tasks[task_id] = RoutedTask(task_id, robot_id, scene, tools)
            return task

    def _send(self, task: RoutedTask, tool: RoutedTool, event: CallEvent, before: str) -> None:
        with self._cond:
            self._tickets += 1
            ticket = Ticket(self._tickets, task, tool, event, task.epoch)
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
        ticket: Ticket = pending.context
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
                accept_elements(task, tool, event, reply.value)
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
                task.error = error_message(
                    task.robot_id, tool.spec.name, event, reply, tool.info.validates
                )
                task.error_s = now
            self._cond.notify_all()
        if self.answer_listener is not None:
            self.answer_listener()


def encode_observed(
    tokenizer: Any, before: str, observation: str, after: str = ""
) -> tuple[list[int], tuple[int, int]]:
    """The ids of plan text `before`, the `observation` text and plan text `after`,
    and the observation's span among them (`RewritableEngine.rewrite`'s `observed`).
    Encoded apart: no token spans plan text and observation, so a grammar skips
    exactly the observation."""
    ids = list(tokenizer.encode(before, add_special_tokens=False).ids) if before else []
    start = len(ids)
    ids += tokenizer.encode(observation, add_special_tokens=False).ids
    span = (start, len(ids))
    if after:
        ids += tokenizer.encode(after, add_special_tokens=False).ids
    return ids, span


def _split_last_token(segmenter: Segmenter) -> tuple[str, str]:
    """("", "") when the last token ended at the statement's end; else the last
    token's text before and after that end (the text past the last cut)."""
    past = segmenter.trailing_text
    last = segmenter.last_token_text
    if not past or len(past) >= len(last) or not last.endswith(past):
        return "", ""
    return last[: -len(past)], past
