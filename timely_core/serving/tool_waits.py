"""Generations suspended while their validating tools answer (router.py, "Waiting
for an answer without holding the engine").

A segment is delivered only once every validating tool has answered its calls,
and a token with a streamed call goes on only once its streaming tool answered.
Waiting for that inside the iteration would stall every other generation for a
slow tool, so a generation that completes a segment with verdicts still out is
held here with its cuts instead. One whose plan goes on is suspended, its KV
kept, swapped or dropped by the tool's predicted answer time (kv_handling.py); it
stays ranked but is not admitted (`ready_s` infinite) until the answers are in,
then the dispatcher delivers the cuts and queues it as after any segment. One
whose plan ended with that token has left the engine: it is only taken out of the
ranking, and its plan ends (delivered, finished) once the answers are in. One
that waits for a streaming tool's answer longer than `STREAM_WAIT_IN_LOOP_S`
stays running, its KV kept, but takes no token until the answer is in. A
rollback meanwhile (a robot's failure, failure_recovery.py) drops the held cuts.

Tools answer on the real clock. Stepped in virtual time, the loop waits for them
in real time when nothing else can run, and the virtual clock stands still then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from timely_core.language.segmenter import SegmentCut
from timely_core.serving.generation import Generation, GenerationState
from timely_core.serving.state import ServiceState
from timely_core.tools.router import Deferred

# How long the loop waits for a streaming tool's answer to a token before it waits
# out of the loop instead: far above an answer's round trip (under a millisecond
# on an idle machine), far below a hung tool's wall time.
STREAM_WAIT_IN_LOOP_S = 0.05


@dataclass
class HeldCuts:
    generation: Generation
    held: list[SegmentCut]  # delivered before the wait: valid whatever the verdicts
    new: list[SegmentCut]  # completed by the token whose verdicts are awaited
    epoch: int  # the task's rollbacks at the hold: one since takes the cuts back
    finished: bool = False  # the plan ended with the token (out of the engine)
    wait: Deferred = Deferred.VERDICTS  # or a streaming tool's answer to the token


class ToolWaits:
    def __init__(self, state: ServiceState) -> None:
        self._state = state
        self._held: dict[int, HeldCuts] = {}  # by gen id, in suspension order
        state.tools.answer_listener = self._wake

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, gen_id: int) -> bool:
        """Whether the generation waits here (a running one takes no token meanwhile)."""
        return gen_id in self._held

    def hold(
        self,
        generation: Generation,
        held: list[SegmentCut],
        new: list[SegmentCut],
        now: float,
        finished: bool = False,
        wait: Deferred = Deferred.VERDICTS,
    ) -> None:
        """Hold `generation` until its tools answer (call with `lock` held): for
        verdicts suspended, for a streaming tool's answer (a matter of milliseconds
        unless the tool hangs) left running but out of the batch; once its plan
        ended (`finished`) only out of the ranking."""
        state = self._state
        if wait is Deferred.STREAM and not finished:
            pass  # running, its KV kept: `__contains__` keeps it out of the batch
        elif finished:  # out of the engine already: nothing to suspend or admit
            generation.awaiting_verdicts = True
            if generation.gen_id in state.scheduler:
                state.scheduler.remove(generation.gen_id)
        else:
            state.kv_handling.suspend(generation, now)  # predicted wait: the answer
            generation.suspended = True
            state.running.pop(generation.gen_id, None)
            generation.state = GenerationState.QUEUED
            table = state.scheduler.table
            table.set_running(generation.gen_id, False)
            table.set_ready(generation.gen_id, math.inf)  # not admitted before the answers
        epoch = state.tools.epoch(generation.task_id)
        self._held[generation.gen_id] = HeldCuts(generation, held, new, epoch, finished, wait)

    def answered(self) -> list[HeldCuts]:
        """The held generations whose answers are in (or whose task failed), taken
        out of the wait; ended generations are dropped."""
        tools = self._state.tools
        done: list[HeldCuts] = []
        for gen_id, entry in list(self._held.items()):
            generation = entry.generation
            if generation.state is GenerationState.FINISHED:
                del self._held[gen_id]  # cancelled meanwhile
            elif tools.epoch(generation.task_id) != entry.epoch:
                del self._held[gen_id]  # rolled back (failure recovery has it now)
                generation.awaiting_verdicts = False
            elif tools.answered(generation.task_id, entry.wait):
                del self._held[gen_id]
                generation.awaiting_verdicts = False
                done.append(entry)
        return done

    def wait(self, timeout_s: float) -> None:
        """Block (real time, without `lock`) until a tool answers or `timeout_s`."""
        self._state.tools.wait_for_answers(timeout_s)

    def _wake(self) -> None:
        """From a tool's reader thread: wake the service loop if it sleeps. Never
        blocks on the lock (the loop may hold it waiting for this tool's next
        reply); a busy loop looks again at its next iteration anyway."""
        lock = self._state.lock
        if lock.acquire(blocking=False):
            try:
                self._state.signal_work()
            finally:
                lock.release()
