"""Every policy serves the same plans on the same engine; they differ in how plans
are cut, whether generations yield the engine, and the order of the queue."""

from __future__ import annotations

import pytest

from tests.timely_core.core_support import make_service
from tests.timely_core.serving.serving_robot_driver import run_tasks
from timely_core.events import Segment
from timely_core.language.chat_language import ChatLanguage
from timely_core.request import TaskRequest
from timely_core.scheduling.policies import POLICY_NAMES
from timely_core.scheduling.tuf import Tuf

PLANS = {
    "look for the cat": "mf(50); tl(90); search('cat'); say('found it');",
    "evade": "mu(30); tr(45); md(30);",
    "explain": "Hello there. I am 3.5 years old! Are you sure?",
}
SEGMENTED = {"timely", "stream", "segmented-fcfs", "edf", "lamps", "infercept", "vllm-like"}
CALL_WAITING = {"lamps", "infercept", "vllm-like"}
SUSPENDING = {"timely", "segmented-fcfs", "edf", "lamps", "infercept", "vllm-like"}


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_every_policy_delivers_the_whole_plan_in_order(policy: str) -> None:
    service, clock, engine = make_service(PLANS, policy=policy, robots=("d1", "d2", "d3"))
    tasks = ["look for the cat", "evade", "look for the cat"]
    # robots report each segment's end: the call-waiting policies resume only then
    handles = run_tasks(
        service,
        clock,
        [
            (clock.now() + 0.05 * i, TaskRequest(robot_id=f"d{i + 1}", instruction=t))
            for i, t in enumerate(tasks)
        ],
    )
    for handle, task in zip(handles, tasks, strict=True):
        result = handle.result(timeout_s=0)
        segments = list(handle.segments())
        assert result.success, result.error
        assert "".join(s.text for s in segments) == PLANS[task] == result.plan_text
        assert [s.index for s in segments] == list(range(len(segments)))
        assert not any(s.final for s in segments[:-1])
        # a call-waiting policy resumes only once the robot is idle: the last segment
        # goes at once, before the end is decoded (the result follows)
        assert segments[-1].final or policy in CALL_WAITING
        expected = PLANS[task].count(";") if policy in SEGMENTED else 1
        assert len(segments) == result.segment_count == expected
        assert len(result.segment_waits_s) == expected
        assert result.response_time_s == result.segment_waits_s[0] > 0
    suspended = engine.stats.suspensions
    assert (suspended > 0) == (policy in SUSPENDING)
    stats = service.stats()
    assert stats.succeeded == 3 and stats.running == stats.queued == 0
    assert stats.kv_device_blocks_free == stats.kv_device_blocks_total - 3  # the pinned prefix


def test_timely_resumes_with_kept_ids_and_kv() -> None:
    service, _, engine = make_service(PLANS)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="look for the cat"))
    service.run_until_idle()
    assert handle.result(timeout_s=0).segment_count == 4
    # suspended after each of the first 3 segments and resumed; the robot is still
    # busy when the last one is decoded, so it waits for the next token: EOS, no suspension
    assert engine.stats.suspensions == 3 and engine.stats.resumptions == 3
    assert engine.stats.recomputed_tokens == 0 and engine.stats.swapped_out_blocks == 0


def test_segments_carry_the_execution_estimate_and_ids() -> None:
    service, _, _ = make_service(PLANS)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="look for the cat"))
    service.run_until_idle()
    segments = list(handle.segments())
    assert [s.estimated_execution_s for s in segments] == pytest.approx([1.0, 1.0, 2.0, 0.5])
    assert all(s.token_ids and s.statements for s in segments)
    assert [s.emitted_at_s for s in segments] == sorted(s.emitted_at_s for s in segments)


@pytest.mark.parametrize("policy", sorted(SEGMENTED - CALL_WAITING))  # those never generate ahead
def test_the_last_segment_is_final_when_the_robot_is_still_busy(policy: str) -> None:
    """Segments after the first wait for one more token while the robot still
    executes earlier ones (so waiting costs it nothing): the last one learns that
    the plan ends with it, and the robot never waits for a segment."""
    service, _, _ = make_service(PLANS, policy=policy)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="look for the cat"))
    service.run_until_idle()
    segments = list(handle.segments())
    assert len(segments) == 4
    assert [s.final for s in segments] == [False, False, False, True]
    result = handle.result(timeout_s=0)
    assert result.success and result.segment_waits_s[1:] == (0.0, 0.0, 0.0)


def test_a_segment_the_robot_waits_for_is_sent_at_once() -> None:
    """A robot that reports each segment done at once waits for the next: nothing is
    held back to learn whether it is the last one, so `final` stays False."""
    service, _, _ = make_service(PLANS)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="evade"))
    handle.on_segment(lambda s: handle.segment_done(s.index, finished_at_s=s.emitted_at_s))
    service.run_until_idle()
    segments = list(handle.segments())
    assert len(segments) == 3 and not any(s.final for s in segments)
    assert handle.result(timeout_s=0).success


def test_segment_done_corrects_the_estimate() -> None:
    """The robot reports segment 0 done the moment it got it (estimate: 1 s), so
    the next segment's waiting time is measured from that report."""
    service, _, _ = make_service(PLANS)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="look for the cat"))

    def robot_is_instant(segment: Segment) -> None:
        handle.segment_done(segment.index, finished_at_s=segment.emitted_at_s)

    handle.on_segment(robot_is_instant)
    service.run_until_idle()
    result = handle.result(timeout_s=0)
    segments = list(handle.segments())
    for k in range(1, len(segments)):
        assert result.segment_waits_s[k] == pytest.approx(
            segments[k].emitted_at_s - segments[k - 1].emitted_at_s
        )
        assert result.segment_waits_s[k] > 0
    assert result.completion_time_s == pytest.approx(
        segments[-1].emitted_at_s - (segments[0].emitted_at_s - result.response_time_s)
    )


def test_without_segment_done_the_estimate_hides_generation_behind_execution() -> None:
    service, _, _ = make_service(PLANS)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="look for the cat"))
    service.run_until_idle()
    result = handle.result(timeout_s=0)
    assert result.segment_waits_s[1:] == (0.0, 0.0, 0.0)
    assert result.waiting_time_s == result.response_time_s
    assert result.segment_utility == pytest.approx(4 * Tuf.normal().initial_utility)


def test_cancel_frees_kv_at_once_and_spares_the_others() -> None:
    service, clock, engine = make_service(PLANS, policy="fcfs", robots=("d1", "d2"))
    free_idle = engine.memory().device_blocks_free
    victim = service.submit(TaskRequest(robot_id="d1", instruction="look for the cat"))
    other = service.submit(TaskRequest(robot_id="d2", instruction="evade"))
    service.run_until(clock.now() + 0.1)
    assert engine.memory().device_blocks_free < free_idle
    victim.cancel()
    result = victim.result(timeout_s=0)
    assert not result.success and result.error == "cancelled"
    service.run_until_idle()
    assert other.result(timeout_s=0).success
    assert engine.memory().device_blocks_free == free_idle
    assert service.stats().cancelled == 1


def test_cancel_before_arrival() -> None:
    service, clock, _ = make_service(PLANS)
    request = TaskRequest(robot_id="drone1", instruction="evade")
    handle = service.submit_at(clock.now() + 5.0, request)
    assert service.stats().pending_arrivals == 1
    handle.cancel()
    service.run_until_idle()
    assert handle.result(timeout_s=0).error == "cancelled"
    assert service.stats().iterations == 0
    assert clock.now() < 5.0  # the clock did not jump for the cancelled arrival


def test_engine_busy_time_is_the_time_in_iterations() -> None:
    service, clock, engine = make_service(PLANS, robots=("d1", "d2"))
    registered = engine.stats.busy_s  # prefix prefill at registration: not an iteration
    assert service.stats().engine_busy_s == 0.0
    start = clock.now()
    service.submit(TaskRequest(robot_id="d1", instruction="look for the cat"))
    service.submit_at(clock.now() + 30.0, TaskRequest(robot_id="d2", instruction="evade"))
    service.run_until_idle()
    busy = service.stats().engine_busy_s
    assert busy == pytest.approx(engine.stats.busy_s - registered)
    # the engine idled for most of the 30 s before the second arrival: not busy time
    assert 0 < busy < clock.now() - start - 29.0
    # in virtual time the service's own work takes no time: its loop is busy exactly
    # while the engine is
    assert service.stats().loop_busy_s == pytest.approx(busy)


def test_robots_of_one_type_share_one_prefilled_prefix() -> None:
    service, _, engine = make_service(PLANS, robots=("d1", "d2", "d3"))
    assert engine.memory().pinned_prefix_blocks == 3  # registered once, not three times
    assert service.robots() == {"d1": "tiny", "d2": "tiny", "d3": "tiny"}


def test_chat_mode_segments_sentences_with_reading_time() -> None:
    service, _, _ = make_service(PLANS, robots=())
    service.register_robot("user1", ChatLanguage())
    handle = service.submit(TaskRequest(robot_id="user1", instruction="explain"))
    service.run_until_idle()
    segments = list(handle.segments())
    assert [s.text for s in segments] == ["Hello there.", " I am 3.5 years old!", " Are you sure?"]
    assert [s.estimated_execution_s for s in segments] == pytest.approx([0.4, 1.0, 0.6])
    assert handle.result(timeout_s=0).success


def test_run_until_stops_at_the_given_time() -> None:
    service, clock, _ = make_service(PLANS)
    handle = service.submit_at(3.0, TaskRequest(robot_id="drone1", instruction="evade"))
    service.run_until(2.0)
    assert clock.now() == 2.0 and not handle.done()
    service.run_until_idle()
    assert handle.result(timeout_s=0).response_time_s < 0.2
