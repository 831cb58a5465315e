"""What the service tells its caller: segments as they are decoded, then a result."""

from __future__ import annotations

from dataclasses import dataclass, field

from timely_core.language.plan_language import PlanStatement


@dataclass(frozen=True)
class Segment:
    """A complete executable part of a plan, ready to be sent to the robot."""

    task_id: str
    robot_id: str
    index: int  # 0 for the first segment
    text: str  # exactly as decoded, statements concatenated
    statements: tuple[PlanStatement, ...]
    token_ids: tuple[int, ...]  # the generated ids that produced `text`
    estimated_execution_s: float  # minimum execution time from the ExecTimeModel
    emitted_at_s: float  # service clock
    final: bool = False  # no segment follows (the plan ended with this one)
    # the robot's guard says an operator must approve these statements before the
    # robot runs them (one message each); the caller holds the segment until then
    approvals: tuple[str, ...] = ()
    # elements of its streamed call already delivered (`StreamedElement`, before this
    # segment): the robot runs those, not the segment again; 0 for ordinary segments
    streamed_elements: int = 0


@dataclass(frozen=True)
class StreamedElement:
    """One element of a streamed skill call (a leg of a drone's path), accepted by
    the robot's streaming tool while the call is still being decoded: the robot may
    start it now. Elements come in order, before the segment holding their call
    (`Segment.streamed_elements` counts them); `index` is that segment's."""

    task_id: str
    robot_id: str
    index: int  # the segment the call will be part of
    element: int  # 0 for the call's first element
    text: str  # an executable call of this one element, e.g. "fp(100,0,50)"
    call_text: str  # the call as decoded when the element was accepted
    emitted_at_s: float  # service clock


@dataclass(frozen=True)
class TaskResult:
    """End of a task. Times in seconds on the service clock; utility by Eq. 1."""

    task_id: str
    robot_id: str
    success: bool
    plan_text: str
    segment_count: int
    response_time_s: float  # arrival -> first action (dispatch of segment 0), W(s0)
    # sum of segment_waits_s: all delay due to planning (completion - robot execution);
    # with no segment, the time waited until the task ended, as response_time_s
    waiting_time_s: float
    utility: float  # time utility: TUF0 (Eq. 1) on the response time
    error: str = ""
    completion_time_s: float = 0.0  # arrival -> end of the last segment's execution
    segment_waits_s: tuple[float, ...] = field(default=())  # W(s_k) per segment
    segment_utility: float = 0.0  # Eq. 3 for this task: TUF0(W(s0)) + sum TUF1(W(sk))
    ttft_s: float | None = None  # arrival -> first generated token (None: none came)


@dataclass(frozen=True)
class Rollback:
    """The robot failed segment `failed_index`: the generation went back to that
    segment's end, the failure was appended as an observation, and planning goes on.
    Segments `withdrawn` (delivered after the failed one) must not be executed:
    the segments that follow reuse their indices. Delivered between the last
    segment before it and the first after it."""

    task_id: str
    robot_id: str
    failed_index: int
    error: str  # the robot's
    observation: str  # as appended to the generation
    tokens_dropped: int  # generated ids past the failed segment's end, and their KV
    withdrawn: tuple[int, ...]  # indices of delivered segments taken back
    recovery: int  # 1 for the task's first rollback
    at_s: float  # service clock
