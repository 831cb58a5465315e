"""`TaskRequest.result_after_reports`: the result waits for the robot's report of
the last segment, so a hold reported after the plan was decoded (the robot busy
with another task, an approval) counts in the response and waiting times and the
utility; without it the result comes when the plan is decoded, as before."""

from __future__ import annotations

import pytest

from tests.timely_core.core_support import make_service
from timely_core.events import Segment, TaskResult
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf

PLANS = {"fly out": "mf(60); tl(90); mf(80);"}
HOLD_S = 8.0  # the robot's turn comes this long after the plan was decoded


def _served(after_reports: bool) -> tuple[list[Segment], TaskResult, float]:
    service, clock, _ = make_service(PLANS)
    handle = service.submit(
        TaskRequest(
            robot_id="drone1",
            instruction="fly out",
            tuf=Tuf.normal(),
            result_after_reports=after_reports,
        )
    )
    segments: list[Segment] = []
    handle.on_segment(segments.append)
    service.run_until_idle()  # the whole plan decoded; the robot has not started
    assert len(segments) == 3
    decoded_at = clock.now()
    clock.advance(HOLD_S)
    for segment in segments:  # the robot's turn: each segment starts, runs 1 s, ends
        handle.segment_started(segment.index)
        clock.advance(1.0)
        handle.segment_done(segment.index)
    service.run_until_idle()
    return segments, handle.result(timeout_s=0), decoded_at


def test_the_result_counts_a_hold_reported_after_the_plan_was_decoded() -> None:
    _, held, _ = _served(after_reports=True)
    _, early, decoded_at = _served(after_reports=False)
    assert held.success and early.success
    assert early.response_time_s < decoded_at  # its first segment's delivery
    assert held.response_time_s > decoded_at + HOLD_S - 0.5  # the robot's real start
    assert held.utility == Tuf.normal().utility(held.response_time_s) < early.utility
    # three segments of 1 s each, as the robot reported them
    assert held.completion_time_s - held.response_time_s == pytest.approx(3.0)
    assert held.waiting_time_s == pytest.approx(held.response_time_s)


@pytest.mark.parametrize("end", ["failed", "cancelled", "done"])
def test_a_report_after_the_result_changes_nothing(end: str) -> None:
    """A late or repeated report (a retransmission) after the task ended, failed,
    cancelled or done: its result stays as delivered, delivered once, counted once."""
    service, _, _ = make_service(PLANS)
    handle = service.submit(
        TaskRequest(robot_id="drone1", instruction="fly out", result_after_reports=True)
    )
    segments: list[Segment] = []
    results: list[TaskResult] = []
    handle.on_segment(segments.append)
    handle.on_result(results.append)
    service.run_until_idle()
    assert service.stats().awaiting_reports == 1  # decoded, open for its reports
    for segment in segments[:-1]:
        handle.segment_done(segment.index)
    last = segments[-1].index
    if end == "failed":
        handle.segment_failed(last, "motor stalled")
    elif end == "cancelled":
        handle.cancel()
    else:
        handle.segment_done(last)
    service.run_until_idle()
    first = handle.result(timeout_s=0)
    for segment in segments:  # every report again, the last one included
        if end != "cancelled" or segment.index < last:
            handle.segment_done(segment.index)
    service.run_until_idle()
    assert handle.result(timeout_s=0) == first and results == [first]
    assert first.success is (end == "done")
    stats = service.stats()
    assert stats.succeeded + stats.failed + stats.cancelled == stats.submitted == 1
    assert stats.awaiting_reports == 0
