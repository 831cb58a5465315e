"""The per-robot StatementGuard hook: each complete statement is checked before its
segment is delivered; a violation ends the task and nothing after it is delivered,
a statement that needs approval is delivered marked, and a held segment's wait
counts in the task's waiting time."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.timely_core.core_support import Statement, TinyLanguage, make_service
from timely_core.events import Segment, TaskResult
from timely_core.language.plan_language import PlanStatement
from timely_core.request import TaskRequest

PLANS = {
    "fly out": "mf(60); tl(90); mf(80); say('done');",
    "fly near": "mf(60); mf(30);",
    "smile": "mf(20); say('cheese'); mf(20);",
}


@dataclass(frozen=True)
class Verdict:
    status: str
    message: str = ""


class FenceGuard:
    """A line fence: the robot's `mf` moves summed must stay within 100 cm; `say`
    needs approval. State per task, as the service's contract asks."""

    made = 0

    def __init__(self) -> None:
        FenceGuard.made += 1
        self.x = 0.0
        self.seen: list[str] = []

    def check(self, statement: PlanStatement) -> Verdict:
        assert isinstance(statement, Statement)
        self.seen.append(statement.text)
        if statement.skill == "mf":
            self.x += float(statement.argument)
            if self.x > 100:
                return Verdict(
                    "violation", f"fence.x_max: x {self.x:g} > 100 in {statement.text!r}"
                )
        if statement.skill == "say":
            return Verdict("approval", f"say needs approval in {statement.text!r}")
        return Verdict("ok")


def serve(instruction: str, policy: str = "timely") -> tuple[list[Segment], TaskResult, FenceGuard]:
    service, _, _ = make_service(PLANS, policy=policy, robots=())
    guards: list[FenceGuard] = []

    def make() -> FenceGuard:
        guards.append(FenceGuard())
        return guards[-1]

    service.register_robot("drone1", TinyLanguage(), guard=make)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction=instruction))
    service.run_until_idle()
    assert len(guards) == 1
    return list(handle.segments()), handle.result(timeout_s=0), guards[0]


def test_third_statement_out_of_the_fence_ends_the_task_after_two_segments() -> None:
    segments, result, guard = serve("fly out")
    assert [s.text.strip() for s in segments] == ["mf(60);", "tl(90);"]
    assert not result.success
    error = result.error
    assert "robot drone1" in error and "fence.x_max" in error and "mf(80);" in error
    assert result.segment_count == 2
    assert guard.seen == ["mf(60);", "tl(90);", "mf(80);"]  # nothing checked after it


def test_whole_plan_policy_delivers_nothing_of_a_plan_that_breaks_a_limit() -> None:
    segments, result, _ = serve("fly out", policy="fcfs")
    assert segments == []
    assert not result.success and "fence.x_max" in result.error


def test_a_plan_within_the_limits_is_delivered_whole() -> None:
    segments, result, _ = serve("fly near")
    assert result.success
    assert [s.text.strip() for s in segments] == ["mf(60);", "mf(30);"]
    assert all(s.approvals == () for s in segments)


def test_each_task_gets_a_fresh_guard() -> None:
    service, _, _ = make_service(PLANS, robots=())
    service.register_robot("drone1", TinyLanguage(), guard=FenceGuard)
    before = FenceGuard.made
    handles = [
        service.submit(TaskRequest(robot_id="drone1", instruction="fly near")) for _ in range(2)
    ]
    service.run_until_idle()
    assert FenceGuard.made == before + 2  # 90 cm each: a shared guard would see 180
    assert all(h.result(timeout_s=0).success for h in handles)


def test_approval_marks_the_segment_and_a_hold_counts_as_waiting() -> None:
    service, _, _ = make_service(PLANS, robots=())
    service.register_robot("drone1", TinyLanguage(), guard=FenceGuard)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="smile"))
    hold_s = 5.0

    def robot(segment: Segment) -> None:
        if segment.approvals:  # an operator approves it hold_s later
            handle.segment_started(segment.index, segment.emitted_at_s + hold_s)

    handle.on_segment(robot)
    service.run_until_idle()
    segments = list(handle.segments())
    result = handle.result(timeout_s=0)
    assert [bool(s.approvals) for s in segments] == [False, True, False]
    assert "say needs approval" in segments[1].approvals[0]
    assert result.success
    # the robot got segment 1 hold_s after its delivery: it waited from the end of
    # segment 0 (estimated: delivered at once, minimum execution time) until then
    end_0 = segments[0].emitted_at_s + segments[0].estimated_execution_s
    assert segments[1].emitted_at_s < end_0 < segments[1].emitted_at_s + hold_s
    assert result.segment_waits_s[1] == pytest.approx(segments[1].emitted_at_s + hold_s - end_0)
    with pytest.raises(ValueError, match="no dispatched segment 7"):
        handle.segment_started(7)
