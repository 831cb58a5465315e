"""The policy-side state of one task's generation: what was decoded and dispatched,
and the times the scheduler and the result need (Eq. 3's segment waiting times)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from timely_core.engine.protocol import SamplingParams
from timely_core.events import Segment, TaskResult
from timely_core.language.plan_language import PlanLanguage, PlanStatement
from timely_core.language.segmenter import SegmentCut, Segmenter
from timely_core.language.statement_guard import StatementGuard
from timely_core.request import TaskRequest


class GenerationState(str, Enum):
    PENDING = "pending"  # submitted for a future time (submit_at), not yet arrived
    QUEUED = "queued"  # waiting for the engine (first segment, or resumed)
    RUNNING = "running"  # in the engine's batch
    FINISHED = "finished"  # result delivered (success, error or cancelled)


@dataclass
class SegmentRecord:
    """A dispatched segment and when the robot executes it."""

    segment: Segment
    dispatch_s: float  # emitted + network latency: the robot has it from then on
    estimated_execution_s: float  # minimum, from the execution-time model
    finished_at_s: float | None = None  # reported by segment_done (or segment_failed)
    generated_end: int = -1  # engine ids past the prompt at its end (SegmentCut)
    # after a rollback to it: its last id was dropped and this text re-appended
    tail_text: str | None = None


@dataclass
class Generation:
    gen_id: int
    seq: int  # submission order
    task_id: str
    request: TaskRequest
    language: PlanLanguage
    prefix_id: str
    prompt_ids: list[int]
    arrival_s: float
    segmenter: Segmenter
    state: GenerationState = GenerationState.QUEUED
    in_engine: bool = False  # added to the engine (and not aborted or finished there)
    suspended: bool = False  # suspended in the engine, waiting to be resumed
    segment_tokens: int = 0  # tokens generated in the segment being generated
    records: list[SegmentRecord] = field(default_factory=list)
    # a completed segment kept for one more token, to learn whether the plan ends with it
    awaiting_next_token: SegmentCut | None = None
    first_token_s: float | None = None  # service clock at the first generated token
    # when the first element of a streamed call in the segment being generated went
    # out: the robot starts that segment then, not when the segment is cut
    first_element_s: float | None = None
    held_statements: list[PlanStatement] = field(default_factory=list)  # whole-plan mode
    held_text: str = ""
    held_ids: list[int] = field(default_factory=list)
    guard: StatementGuard | None = None  # the robot's limits, tracked from this task's start
    recoveries: int = 0  # rollbacks after failed segments (failure_recovery.py)
    # Ids past the prompt that the engine holds (or held): sampled and appended ones.
    # The first `engine_base` of them were given to the engine as prompt (a plan
    # re-added after a rollback of an ended generation).
    written_ids: list[int] = field(default_factory=list)
    engine_base: int = 0
    # the plan ended, its result held until the robot reports every segment, so
    # that a failure can still be replanned (`TaskRequest.replan_on_failure`)
    awaiting_reports: bool = False
    # the plan ended with a token whose calls' verdicts are still out (tool_waits.py)
    awaiting_verdicts: bool = False
    variant: str | None = None  # the robot's fleet variant at admission (None: the base)
    closing: bool = False  # its statement neared the segment limit: the engine ends it
    sampling: SamplingParams | None = None  # `ServiceState.sampling_params`, once known

    @property
    def robot_id(self) -> str:
        return self.request.robot_id

    def engine_prompt_ids(self) -> list[int]:
        """The ids to admit the generation to the engine with."""
        return self.prompt_ids + self.written_ids

    @property
    def next_index(self) -> int:
        """Index k of the segment being generated."""
        return len(self.records)

    def completions_s(self) -> list[float]:
        """End of each dispatched segment's execution: reported by segment_done, else
        estimated (it starts at dispatch, or when the robot finishes the previous one)."""
        ends: list[float] = []
        previous_end = float("-inf")
        for record in self.records:
            if record.finished_at_s is not None:
                end = record.finished_at_s
            else:
                end = max(record.dispatch_s, previous_end) + record.estimated_execution_s
            ends.append(end)
            previous_end = end
        return ends

    def measured_execution_s(self, index: int) -> float | None:
        """How long the robot took for segment `index`, from its start (dispatch, or
        the reported end of the previous segment if later) to its reported end;
        None unless both ends were reported (an estimated start would bias it)."""
        record = self.records[index]
        if record.finished_at_s is None:
            return None
        start = record.dispatch_s
        if index > 0:
            previous_end = self.records[index - 1].finished_at_s
            if previous_end is None:
                return None
            start = max(start, previous_end)
        duration = record.finished_at_s - start
        return duration if duration >= 0 else None

    def segment_ref_s(self) -> float:
        """Eq. 4's reference time of the next segment: arrival for k = 0, else the
        (estimated or reported) completion of the previous segment's execution."""
        if not self.records:
            return self.arrival_s
        return self.completions_s()[-1]

    def segment_ert_s(self) -> float:
        """The next segment's ERT: the request's for k = 0, 0 for later ones (TUF1)."""
        return self.request.tuf.expected_response_time_s if not self.records else 0.0

    def segment_deadline_s(self) -> float:
        """When the next segment should start executing."""
        return self.segment_ref_s() + self.segment_ert_s()

    def segment_waits_s(self) -> list[float]:
        """W(s_k): arrival -> dispatch for k = 0; for k > 0 the robot's idle time
        between the end of segment k-1 and the dispatch of segment k (0 if early)."""
        waits: list[float] = []
        ends = self.completions_s()
        for k, record in enumerate(self.records):
            if k == 0:
                waits.append(record.dispatch_s - self.arrival_s)
            else:
                waits.append(max(record.dispatch_s - ends[k - 1], 0.0))
        return waits

    def result(self, error: str, now_s: float) -> TaskResult:
        """The task's result (Eq. 1 utility on W(s0), Eq. 3 over all segments).
        Without any dispatched segment the response time is the time waited so far
        and the utility is 0."""
        tuf = self.request.tuf
        waits = self.segment_waits_s()
        if waits:
            response = waits[0]
            completion = self.completions_s()[-1] - self.arrival_s
            utility = tuf.utility(response)
            segment_utility = utility + sum(tuf.resumed_utility(w) for w in waits[1:])
        else:
            response = completion = max(now_s - self.arrival_s, 0.0)
            utility = segment_utility = 0.0
        return TaskResult(
            task_id=self.task_id,
            robot_id=self.robot_id,
            success=not error,
            plan_text=self.segmenter.text,
            segment_count=len(self.records),
            response_time_s=response,
            waiting_time_s=sum(waits) if waits else response,
            utility=utility,
            error=error,
            completion_time_s=completion,
            segment_waits_s=tuple(waits),
            segment_utility=segment_utility,
            ttft_s=None if self.first_token_s is None else self.first_token_s - self.arrival_s,
        )
