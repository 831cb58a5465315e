"""Plans that react to a failed segment (`PlanningService.segment_failed`).

The planner keeps generating ahead while a robot executes. When the robot reports
that segment k failed, and the request opted in (`TaskRequest.replan_on_failure`)
on an engine that can rewrite a generation (`RewritableEngine`), everything
generated past segment k's end is rolled back: its token ids and KV are dropped,
a segment held for one more token and any delivered after k are withdrawn, and
the segmenter is rebuilt over the kept ids (so the plan text ends with segment k).
The failure is appended as an observation in the plan language
(`FailureObservation`, in the router's `OBSERVATION_FORMAT`) and the generation
is queued for its next segment, k + 1, at once (the robot is idle since the failure).

Otherwise (not opted in, an engine that cannot rewrite, the recovery cap reached,
an observation the engine refuses) the task ends with an error naming the
robot's failure, as it did before this existed.

A failed element of a streamed segment (a leg of a drone's path,
`StreamedElement`) is a failure of that segment: its elements not yet handed on
never are. When the call is still being decoded, its segment does not exist yet:
the failure is held (`ToolRouter.hold_failure`) and the rollback happens at the
token that cuts that segment (`SegmentDispatch`), so the plan still goes back to
the end of the segment; the robot waits idle meanwhile (the rest of one statement).

The observation is appended as one (`RewritableEngine.rewrite`'s `observed`): a
plan grammar does not read it and goes on after it between statements. A plan
that had already ended (its result held for the robot's reports, as
`replan_on_failure` asks), or one whose engine refuses the rewrite, is admitted
again with the kept ids and the observation as its prompt; the prefix cache finds
the KV it still holds of them (a grammar then constrains what is generated after
the observation).

The rollback point is the end of segment k's last statement: when the token that
completed it also decoded text past it (`;?` of `hm();?sw('cat')`), that token is
dropped too and the statement's end (`;`) is appended as input before the
observation, so the plan goes on exactly after the failed statement. A statement
that the parser completes only when the next text starts (a word ended by a
space) keeps that token and its text.
"""

from __future__ import annotations

import dataclasses
import logging

from timely_core.engine.protocol import EngineError, HandlingStrategy, RewritableEngine
from timely_core.errors import TaskFinished, UnknownTask
from timely_core.events import Rollback
from timely_core.language.plan_language import FailureObservation
from timely_core.language.segmenter import SegmentationError, Segmenter
from timely_core.serving.generation import Generation, GenerationState, SegmentRecord
from timely_core.serving.plan_closing import lift_closing, update_closing
from timely_core.serving.state import ServiceState
from timely_core.tools.router import OBSERVATION_FORMAT, HeldFailure, encode_observed

log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 500  # of the robot's error, in the observation and the task's error


def failure_observation(generation: Generation, segment_text: str, error: str) -> str:
    """The failure as the generation's language writes an observation."""
    language = generation.language
    if isinstance(language, FailureObservation):
        return language.failure_observation(segment_text, error)
    return f"{segment_text.strip()} failed: {error}"


class FailureRecovery:
    def __init__(self, state: ServiceState) -> None:
        self._state = state

    def on_element_failure(
        self, task_id: str, index: int, element: int, error: str, at_s: float
    ) -> Rollback | None:
        """Element `element` (from 0) of streamed segment `index` failed at `at_s`.
        A segment already cut is handled as `on_failure`; one still decoded holds
        the failure until it is cut (None returned; the Rollback, or the task's
        error, follows). Raises UnknownTask, TaskFinished, or ValueError for an
        element never handed on or a segment already reported. Call holding the
        engine gate and the state's lock."""
        state = self._state
        generation = state.generations.get(task_id)
        if generation is None:
            raise UnknownTask(f"unknown task id {task_id!r}")
        if generation.state is GenerationState.FINISHED:
            raise TaskFinished(
                f"task {task_id!r} has already ended; its failed segment {index} "
                "cannot be replanned"
            )
        held = generation.awaiting_next_token  # cut, delivered at the next token
        if index < len(generation.records):
            handed = generation.records[index].segment.streamed_elements
        elif index == len(generation.records):
            handed = held.streamed_elements if held else state.tools.handed_elements(task_id)
        else:
            handed = 0
        if not 0 <= element < handed:
            raise ValueError(
                f"task {task_id!r}: segment {index} has no element {element} handed on "
                f"({handed} were)"
            )
        reported = [
            r.segment.index for r in generation.records[index:] if r.finished_at_s is not None
        ]
        if reported or state.tools.holds_failure(task_id):
            raise ValueError(
                f"task {task_id!r}: segment(s) {reported or [index]} already reported, so "
                f"segment {index} cannot have failed now"
            )
        if index < len(generation.records):
            return self.on_failure(generation, index, error, at_s, element)
        reason = self._why_not(generation, None)
        if reason:
            error = _clean(error)
            state.fail(
                generation,
                f"robot {generation.robot_id}: segment {index} failed: element "
                f"{element + 1}: {error}; {reason}",
            )
            return None
        state.tools.hold_failure(task_id, HeldFailure(index, element, error, at_s))
        return None

    def on_failure(
        self,
        generation: Generation,
        index: int,
        error: str,
        at_s: float,
        element: int | None = None,
    ) -> Rollback | None:
        """Segment `index` (dispatched, not reported done) failed at `at_s` (at its
        element `element`, from 0, if given). Roll the generation back and go on
        (the `Rollback` returned, and delivered to the handle), or end the task
        with the robot's error (None). Call holding the engine gate and the
        state's lock."""
        state = self._state
        error = _clean(error)
        if element is not None:  # the observation says which one
            error = f"element {element + 1}: {error}"
        record = generation.records[index]
        record.finished_at_s = at_s  # the robot stopped then; not a measured execution
        failed = f"robot {generation.robot_id}: segment {index} failed: {error}"
        reason = self._why_not(generation, index)
        if reason:
            state.fail(generation, f"{failed}; {reason}")
            return None
        observation = failure_observation(generation, record.segment.text, error)
        try:
            rollback = self._roll_back(generation, index, error, observation, at_s)
        except Exception as exc:  # this task only (an engine's or a language's error)
            log.exception("%s: rollback failed", generation.task_id)
            if generation.state is not GenerationState.FINISHED:
                state.fail(generation, f"{failed}; it could not be rolled back: {exc}")
            return None
        handle = state.handles[generation.task_id]
        state.deliveries.append(lambda: handle.deliver_rollback(rollback))
        state.signal_work()
        return rollback

    def _why_not(self, generation: Generation, index: int | None) -> str:
        """Why this failure ends the task ('' if it can be rolled back); `index`
        None: a segment still decoded (its end is known once it is cut)."""
        state = self._state
        if not generation.request.replan_on_failure:
            return "the request did not ask to replan on failure"
        if not isinstance(state.engine, RewritableEngine):
            return f"the {type(state.engine).__name__} engine cannot roll a generation back"
        if generation.recoveries >= state.config.max_recoveries:
            return (
                f"gave up after {generation.recoveries} recoveries "
                f"(max_recoveries={state.config.max_recoveries})"
            )
        if generation.state is GenerationState.FINISHED:
            return "the plan had already ended"
        if index is not None and generation.records[index].generated_end < 0:
            return "the segment's end in the generation is not known"
        return ""

    def _roll_back(
        self,
        generation: Generation,
        index: int,
        error: str,
        observation: str,
        at_s: float,
    ) -> Rollback:
        state = self._state
        engine = state.engine
        assert isinstance(engine, RewritableEngine)
        gen_id = generation.gen_id
        segmenter, tail = self._replayed_segmenter(generation, index)  # before any change
        keep = generation.records[index].generated_end - (0 if tail is None else 1)
        text = OBSERVATION_FORMAT.format(observation=observation)
        observation_ids, observed = encode_observed(state.tokenizer, tail or "", text)
        dropped = len(generation.written_ids) - keep
        rewritten = False
        if generation.in_engine and keep >= generation.engine_base:
            if not generation.suspended:  # running, or held for one more token
                engine.suspend(gen_id, HandlingStrategy.PRESERVE)  # rewrite frees its KV
                generation.suspended = True
                state.running.pop(gen_id, None)
            try:
                engine.rewrite(
                    gen_id,
                    keep - generation.engine_base,
                    observation_ids,
                    observed=observed,
                )
                rewritten = True
            except EngineError:  # its grammar refuses the tail: re-added below
                log.info("%s: observation refused by the engine; re-admitting", gen_id)
        if not rewritten:  # the plan had ended (or the point is in ids it was re-added with)
            if generation.in_engine:
                engine.abort(gen_id)
            generation.in_engine = generation.suspended = False
            generation.awaiting_reports = False
            state.running.pop(gen_id, None)  # admitted again with the kept ids as prompt
        generation.written_ids[keep:] = observation_ids
        if tail is not None:  # its last id is gone: later replays push the text instead
            record = generation.records[index]
            record.segment = dataclasses.replace(
                record.segment, token_ids=record.segment.token_ids[:-1]
            )
            record.tail_text = tail
        withdrawn = tuple(r.segment.index for r in generation.records[index + 1 :])
        del generation.records[index + 1 :]
        generation.first_element_s = None  # elements of a withdrawn call never ran
        generation.awaiting_next_token = None  # never delivered
        generation.segmenter = segmenter
        generation.segment_tokens = segmenter.pending_tokens
        lift_closing(engine, generation)  # it goes on from the failed segment's end
        update_closing(engine, generation, state.sampling_params(generation))
        generation.recoveries += 1
        state.tools.rolled_back(generation.task_id, segmenter.text)
        if gen_id in state.scheduler:  # its entry was for the withdrawn segment
            state.scheduler.remove(gen_id)
        state.enqueue(generation)  # segment index + 1, its reference the failure time
        state.counters["rollbacks"] += 1
        state.counters["tokens_rolled_back"] += dropped
        state.counters["segments_withdrawn"] += len(withdrawn)
        return Rollback(
            task_id=generation.task_id,
            robot_id=generation.robot_id,
            failed_index=index,
            error=error,
            observation=observation,
            tokens_dropped=dropped,
            withdrawn=withdrawn,
            recovery=generation.recoveries,
            at_s=at_s,
        )

    def _replayed_segmenter(
        self, generation: Generation, index: int
    ) -> tuple[Segmenter, str | None]:
        """A segmenter that has seen exactly the plan through segment `index` (the
        parser's state included), and the text to append before the observation
        (None: the segment's ids are all kept). When the token that completed the
        segment also decoded text past it, that token is dropped and the
        statement's end re-appended as text, if the parser then still completes
        the statement; else (a statement that ends only when the next text
        starts) the token and its text stay. Raises SegmentationError if the
        replay does not cut where the generation did."""
        records = generation.records[: index + 1]
        segmenter, cuts = self._segmenter(generation, records, drop_last=False)
        if segmenter.trailing_text:  # e.g. the token ';?' of 'hm();?sw(...)'
            exact, exact_cuts = self._segmenter(generation, records, drop_last=True)
            text = records[-1].segment.text
            pending = exact.trailing_text
            if text.startswith(pending):
                tail = text[len(pending) :]
                exact_cuts += exact.push_text(tail) is not None
                if exact_cuts == index + 1 and not exact.trailing_text:
                    return exact, tail
        if cuts != index + 1:
            raise SegmentationError(
                f"replaying segments 0..{index} cut {cuts} segment(s), expected {index + 1}"
            )
        return segmenter, None

    def _segmenter(
        self, generation: Generation, records: list[SegmentRecord], drop_last: bool
    ) -> tuple[Segmenter, int]:
        """A fresh segmenter fed the records' ids (and texts re-appended by earlier
        rollbacks), without the last id if `drop_last`; and the cuts they made."""
        segmenter = self._state.fresh_segmenter(generation)
        cuts = 0
        for k, record in enumerate(records):
            ids = record.segment.token_ids
            last = k == len(records) - 1
            for token_id in ids[:-1] if drop_last and last else ids:
                cuts += segmenter.push(token_id) is not None
            if record.tail_text is not None and not last:
                cuts += segmenter.push_text(record.tail_text) is not None
        return segmenter, cuts


def _clean(error: str) -> str:
    """The robot's error on one line, bounded."""
    return " ".join(error.split())[:MAX_ERROR_CHARS] or "no reason given"
