"""From generated tokens to dispatched segments: each new token goes through its
generation's segmenter; a completed segment is delivered to the task's handle (or,
for whole-plan policies, kept until the plan ends), and under segmented policies
the generation is then suspended in the engine (its KV handled as
kv_handling.py decides) and re-queued with the priority of its next segment.

`Segment.final`: a segment is final when the end of generation is decoded with it
or before it is delivered. The end usually comes one token after the last
statement, so a segment whose robot is still busy with earlier segments (longer
than G and one iteration, by the estimates) waits in the batch for that one token
before it is delivered; the first segment, and any the robot already waits for,
go at once, and then `final` may be False on the last one (the result follows).

Streamed skills: the elements a robot's streaming tool accepted at this token
(`ToolRouter.take_elements`) are delivered at once as `StreamedElement`s, before
the segment that holds their call, which says how many there were
(`Segment.streamed_elements`); whole-plan policies send the statement whole instead.
When the robot failed one of them while the call was decoded (failure_recovery.py),
the segment is delivered at its cut, not held, and rolled back to at once.

Safety: a robot with a guard (`statement_guard.py`) has each statement checked
before its segment is built. A violation ends the task there: the segment and
everything after it are never delivered (segments delivered before stay as they
were: they passed). A statement that needs approval is delivered marked
(`Segment.approvals`); holding it is the caller's part.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Sequence

from timely_core.engine.protocol import RewritableEngine, StepOutput
from timely_core.events import Segment, StreamedElement
from timely_core.language.plan_language import PlanStatement
from timely_core.language.segmenter import SegmentationError, SegmentCut
from timely_core.language.statement_guard import GUARD_APPROVAL, GUARD_OK
from timely_core.scheduling.policies import DispatchMode
from timely_core.serving.failure_recovery import FailureRecovery
from timely_core.serving.generation import Generation, GenerationState, SegmentRecord
from timely_core.serving.plan_closing import update_closing
from timely_core.serving.state import ServiceState
from timely_core.serving.tool_waits import STREAM_WAIT_IN_LOOP_S, ToolWaits
from timely_core.tools.router import Deferred

log = logging.getLogger(__name__)


class SegmentDispatch:
    def __init__(self, state: ServiceState) -> None:
        self._state = state
        self._recovery = FailureRecovery(state)
        self.tool_waits = ToolWaits(state)  # suspended for their tools' verdicts

    def on_token(self, generation: Generation, output: StepOutput, now: float) -> None:
        """One engine output of `generation`, produced at `now`."""
        state = self._state
        if generation.first_token_s is None:
            generation.first_token_s = now
        generation.written_ids.append(output.token_id)
        if output.finished:
            generation.in_engine = False  # the engine freed it
            state.running.pop(generation.gen_id, None)
        held = [generation.awaiting_next_token] if generation.awaiting_next_token else []
        generation.awaiting_next_token = None
        try:
            new = self._segment(generation, output)
            if new and generation.request.replan_on_failure and not output.finished:
                new = self._stamp_ends(generation, new)
        except SegmentationError as exc:
            self._failed_at_token(generation, held, now, exc)
            return
        self._with_tools(generation, held, new, output.finished, now)

    def _with_tools(
        self,
        generation: Generation,
        held: list[SegmentCut],
        new: list[SegmentCut],
        finished: bool,
        now: float,
    ) -> None:
        """The token's calls to its tools, then the rest of its handling; or a wait
        out of the service loop for their answers (tool_waits.py)."""
        state = self._state
        try:  # calls as they stream
            wait = state.tools.on_decoded(generation, bool(new), bool(new), STREAM_WAIT_IN_LOOP_S)
        except SegmentationError as exc:  # a tool's error (ToolRejected)
            self._failed_at_token(generation, held, now, exc)
            return
        if wait is not Deferred.NO:
            self.tool_waits.hold(generation, held, new, now, finished, wait)
            return
        self._after_tools(generation, held, new, finished, now)

    def _failed_at_token(
        self, generation: Generation, held: list[SegmentCut], now: float, exc: Exception
    ) -> None:
        """The token made the plan invalid, or a tool rejected its calls: the task
        ends with what was valid before it delivered."""
        self._on_cuts(generation, held, now, plan_ended=False)  # it was valid
        self._stream(generation, now)  # the elements accepted before the bad one
        self._state.fail(generation, str(exc))

    def resume_answered(self, now: float) -> None:
        """Deliver the held cuts of the generations whose verdicts came in (or end
        their tasks on a tool's error) and queue them to go on; a generation that
        waited for a streaming tool's answer goes on with its token's handling."""
        state = self._state
        for entry in self.tool_waits.answered():
            generation = entry.generation
            if entry.wait is Deferred.STREAM:
                try:
                    self._with_tools(generation, entry.held, entry.new, entry.finished, now)
                except Exception as exc:  # this task only
                    self._internal_error(generation, exc)
                continue
            try:
                state.tools.on_decoded(generation, True)  # appends the observations
            except SegmentationError as exc:  # a tool's error (ToolRejected)
                self._on_cuts(generation, entry.held, now, plan_ended=False)
                state.fail(generation, str(exc))
                continue
            except Exception as exc:  # this task only: out of the batch, no one else ends it
                self._internal_error(generation, exc)
                continue
            try:
                self._after_tools(
                    generation, entry.held, entry.new, entry.finished, now, answered=True
                )
            except Exception as exc:  # e.g. a language's execution-time model
                self._internal_error(generation, exc)

    def _internal_error(self, generation: Generation, exc: Exception) -> None:
        """End this task alone on an unexpected error in its own handling."""
        log.exception("task %s failed", generation.task_id)
        if generation.state is not GenerationState.FINISHED:
            self._state.fail(generation, f"internal error: {exc!r}")

    def _after_tools(
        self,
        generation: Generation,
        held: list[SegmentCut],
        new: list[SegmentCut],
        finished: bool,
        now: float,
        answered: bool = False,
    ) -> None:
        """The rest of a token once its tools have answered: deliver the cuts, then
        finish, suspend or go on. `answered`: after a wait suspended (tool_waits.py),
        the generation is already suspended and is queued to go on."""
        state = self._state
        self._stream(generation, now)
        count = state.tools.cut_elements(generation.task_id) if new else 0
        if count:  # they belong to the last cut's call
            new[-1] = dataclasses.replace(new[-1], streamed_elements=count)
        if not finished:
            update_closing(state.engine, generation, state.sampling_params(generation))
        waits = new and not finished and not answered
        if waits and self._may_wait_for_next_token(generation, now):
            generation.awaiting_next_token = new.pop()
        cuts = held + new
        if not self._on_cuts(generation, cuts, now, plan_ended=finished):
            return  # a statement broke the robot's limits: the task has ended
        failure = state.tools.failure_due(generation.task_id, len(generation.records))
        if failure is not None:  # an element of the segment just cut failed meanwhile
            self._recovery.on_failure(
                generation, failure.index, failure.error, failure.at_s, failure.element
            )
            return
        if finished:
            self._finish(generation, now)
        elif answered:  # suspended for the verdicts: queued to go on, whatever the policy
            state.scheduler.remove(generation.gen_id)  # its entry held it back until now
            state.enqueue(generation)
        elif cuts and state.policy.suspend_after_segment and generation.awaiting_next_token is None:
            state.kv_handling.suspend(generation, now)  # its KV: kept, swapped or dropped
            generation.suspended = True
            state.running.pop(generation.gen_id, None)
            state.enqueue(generation)

    def _segment(self, generation: Generation, output: StepOutput) -> list[SegmentCut]:
        """The cuts completed by this output (the end of generation closes the plan).
        Raises `SegmentationError` for text that can never become a valid plan."""
        terminal = output.finished and output.token_id in self._terminal_ids()
        cuts: list[SegmentCut] = []
        if not terminal:
            generation.segment_tokens += 1
            cut = generation.segmenter.push(output.token_id)
            if cut is not None:
                cuts.append(cut)
        if output.finished:
            tail = generation.segmenter.close()
            if tail is not None:
                cuts.append(tail)
        return cuts

    def _stamp_ends(self, generation: Generation, cuts: list[SegmentCut]) -> list[SegmentCut]:
        """The cuts with the engine's count of generated ids at their end (this
        token's): the point a failure of their segment rolls back to."""
        end = len(generation.written_ids)
        return [dataclasses.replace(cut, generated_end=end) for cut in cuts]

    def _may_wait_for_next_token(self, generation: Generation, now: float) -> bool:
        """Whether a completed segment may wait for the next token, which tells if the
        plan ends with it (`Segment.final`). Only when that costs the robot nothing:
        it is still executing earlier segments (by the minimum estimates, or as
        reported by `segment_done`) for longer than G and one iteration. A first
        segment, or one the robot already waits for, is dispatched at once."""
        state = self._state
        if state.policy.dispatch is DispatchMode.WHOLE or not generation.records:
            return False
        if state.tools.holds_failure(generation.task_id):
            return False  # the robot waits for the failed path's segment
        iteration_s = state.scheduler.batch.iteration_s(len(state.running)) or 0.0
        margin_s = max(state.config.segment_generation_s, iteration_s)
        ready_s = now + margin_s + state.config.dispatch_latency_s
        return ready_s <= generation.segment_ref_s()

    def _on_cuts(
        self, generation: Generation, cuts: Sequence[SegmentCut], now: float, plan_ended: bool
    ) -> bool:
        """Deliver (or hold) the cuts in order; False once the task was ended by its guard."""
        for i, cut in enumerate(cuts):
            if not self._on_cut(generation, cut, now, final=plan_ended and i == len(cuts) - 1):
                return False
        return True

    def _terminal_ids(self) -> set[int]:
        return {self._state.engine.eos_token_id, *self._state.params.stop_token_ids}

    def _on_cut(self, generation: Generation, cut: SegmentCut, now: float, final: bool) -> bool:
        if self._state.policy.dispatch is DispatchMode.WHOLE:
            generation.held_statements.extend(cut.statements)
            generation.held_text += cut.text
            generation.held_ids.extend(cut.token_ids)
            return True
        return self._dispatch(
            generation,
            cut.text,
            cut.statements,
            cut.token_ids,
            now,
            final,
            cut.generated_end,
            cut.streamed_elements,
        )

    def _stream(self, generation: Generation, now: float) -> None:
        """Deliver the elements the robot's streaming tools accepted (segmented
        policies: a whole-plan policy sends the statement whole, at the end)."""
        state = self._state
        elements = state.tools.take_elements(generation.task_id)
        if not elements or state.policy.dispatch is DispatchMode.WHOLE:
            return
        handle = state.handles[generation.task_id]
        if generation.first_element_s is None:
            generation.first_element_s = now
        for out in elements:
            element = StreamedElement(
                task_id=generation.task_id,
                robot_id=generation.robot_id,
                index=generation.next_index,
                element=out.element,
                text=out.text,
                call_text=out.call_text,
                emitted_at_s=now,
            )
            state.deliveries.append(functools.partial(handle.deliver_element, element))

    def _guard(
        self, generation: Generation, statements: Sequence[PlanStatement]
    ) -> list[str] | None:
        """The approvals the statements need, in order; None when one breaks the
        robot's limits (the task is then ended with the guard's message)."""
        guard = generation.guard
        if guard is None:
            return []
        approvals: list[str] = []
        for statement in statements:
            try:
                verdict = guard.check(statement)
                status, message = verdict.status, verdict.message
            except Exception as exc:  # a broken guard must not let anything through
                status, message = "error", f"the guard failed: {type(exc).__name__}: {exc}"
            if status == GUARD_APPROVAL:
                approvals.append(message)
            elif status != GUARD_OK:
                self._state.counters["guard_violations"] += 1
                self._state.fail(
                    generation,
                    f"robot {generation.robot_id}: safety limit {message}; "
                    "this statement and everything after it were not sent",
                )
                return None
        return approvals

    def _dispatch(
        self,
        generation: Generation,
        text: str,
        statements: Sequence[PlanStatement],
        token_ids: Sequence[int],
        now: float,
        final: bool,
        generated_end: int = -1,
        streamed_elements: int = 0,
    ) -> bool:
        state = self._state
        approvals = self._guard(generation, statements)
        if approvals is None:
            return False
        minimum_s, _ = generation.language.estimate_execution_s(list(statements))
        segment = Segment(
            task_id=generation.task_id,
            robot_id=generation.robot_id,
            index=generation.next_index,
            text=text,
            statements=tuple(statements),
            token_ids=tuple(token_ids),
            estimated_execution_s=minimum_s,
            emitted_at_s=now,
            final=final,
            approvals=tuple(approvals),
            streamed_elements=streamed_elements,
        )
        # a streamed call's segment started with its first element
        started = generation.first_element_s if streamed_elements else None
        generation.first_element_s = None
        dispatch_s = (now if started is None else started) + state.config.dispatch_latency_s
        generation.records.append(
            SegmentRecord(segment, dispatch_s, minimum_s, None, generated_end)
        )
        generation.segment_tokens = generation.segmenter.pending_tokens  # of the next one
        state.counters["segments"] += 1
        handle = state.handles[generation.task_id]
        state.deliveries.append(lambda: handle.deliver_segment(segment))
        return True

    def _finish(self, generation: Generation, now: float) -> None:
        state = self._state
        whole = state.policy.dispatch is DispatchMode.WHOLE and generation.held_statements
        if whole and not self._dispatch(
            generation,
            generation.held_text,
            generation.held_statements,
            generation.held_ids,
            now,
            final=True,
        ):
            return  # ended by the robot's guard
        if not generation.records:
            state.fail(generation, "the model produced no executable statement")
            return
        if self._awaits_reports(generation):
            generation.awaiting_reports = True  # ended by the robot's last report
            if generation.gen_id in state.scheduler:
                state.scheduler.remove(generation.gen_id)
            return
        state.end(generation, error="")
        state.counters["succeeded"] += 1

    def _awaits_reports(self, generation: Generation) -> bool:
        """Whether the ended plan's result waits for the robot's reports: the caller
        asked (`result_after_reports`: its holds and the robot's execution count), or
        a failure of a segment it still runs can be replanned (failure_recovery.py)."""
        state = self._state
        request = generation.request
        replannable = (
            request.replan_on_failure
            and isinstance(state.engine, RewritableEngine)
            and state.policy.dispatch is not DispatchMode.WHOLE
        )
        return (request.result_after_reports or replannable) and any(
            r.finished_at_s is None for r in generation.records
        )
