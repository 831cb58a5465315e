"""From generated tokens to dispatched segments: each new token goes through its
generation's segmenter; a completed segment is delivered to the task's handle at
once (or held until the plan ends, for whole-plan policies), and under segmented
policies the generation is then suspended in the engine (its KV handled by
`handling_strategy`) and re-queued with the priority of its next segment."""

from __future__ import annotations

from collections.abc import Sequence

from timely_core.engine.protocol import StepOutput
from timely_core.events import Segment
from timely_core.generation import Generation, SegmentRecord
from timely_core.plan_language import PlanStatement
from timely_core.policies import DispatchMode
from timely_core.segmenter import SegmentationError, SegmentCut
from timely_core.service_state import ServiceState


class SegmentDispatch:
    def __init__(self, state: ServiceState) -> None:
        self._state = state

    def on_token(self, generation: Generation, output: StepOutput, now: float) -> None:
        """One engine output of `generation`, produced at `now`."""
        state = self._state
        if output.finished:
            generation.in_engine = False  # the engine freed it
            state.running.pop(generation.gen_id, None)
        terminal = output.finished and output.token_id in self._terminal_ids()
        cuts: list[SegmentCut] = []
        try:
            if not terminal:
                generation.segment_tokens += 1
                cut = generation.segmenter.push(output.token_id)
                if cut is not None:
                    cuts.append(cut)
            if output.finished:
                tail = generation.segmenter.close()
                if tail is not None:
                    cuts.append(tail)
        except SegmentationError as exc:
            state.fail(generation, str(exc))
            return
        for i, cut in enumerate(cuts):
            self._on_cut(generation, cut, now, final=output.finished and i == len(cuts) - 1)
        if output.finished:
            self._finish(generation, now)
        elif cuts and state.policy.suspend_after_segment:
            state.engine.suspend(generation.gen_id, state.config.handling_strategy)
            generation.suspended = True
            state.running.pop(generation.gen_id, None)
            state.enqueue(generation)

    def _terminal_ids(self) -> set[int]:
        return {self._state.engine.eos_token_id, *self._state.params.stop_token_ids}

    def _on_cut(self, generation: Generation, cut: SegmentCut, now: float, final: bool) -> None:
        if self._state.policy.dispatch is DispatchMode.WHOLE:
            generation.held_statements.extend(cut.statements)
            generation.held_text += cut.text
            generation.held_ids.extend(cut.token_ids)
            return
        self._dispatch(generation, cut.text, cut.statements, cut.token_ids, now, final)

    def _dispatch(
        self,
        generation: Generation,
        text: str,
        statements: Sequence[PlanStatement],
        token_ids: Sequence[int],
        now: float,
        final: bool,
    ) -> None:
        state = self._state
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
        )
        generation.records.append(
            SegmentRecord(segment, now + state.config.dispatch_latency_s, minimum_s)
        )
        generation.segment_tokens = 0
        state.counters["segments"] += 1
        handle = state.handles[generation.task_id]
        state.deliveries.append(lambda: handle.deliver_segment(segment))

    def _finish(self, generation: Generation, now: float) -> None:
        state = self._state
        if state.policy.dispatch is DispatchMode.WHOLE and generation.held_statements:
            self._dispatch(
                generation,
                generation.held_text,
                generation.held_statements,
                generation.held_ids,
                now,
                final=True,
            )
        if not generation.records:
            state.fail(generation, "the model produced no executable statement")
            return
        state.end(generation, error="")
        state.counters["succeeded"] += 1
