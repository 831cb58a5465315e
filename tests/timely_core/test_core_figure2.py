"""TimelyLLM Figure 2 in virtual time: an urgent request arrives while a long
normal plan is being generated. Every number comes from the virtual clock driven
by the paper's latency profile (Llama3-8B on an RTX 4090)."""

from __future__ import annotations

import pytest

from tests.timely_core.core_support import make_service
from timely_core.events import TaskResult
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service_config import ServiceConfig

NORMAL_PLAN = (
    "pick('red_box'); place('red_box', 'blue_box'); pick('cyan_box'); "
    "place('cyan_box', 'red_box'); mf(100); tl(90); search('cat'); say('found it'); "
    "pick('red_box'); place('red_box', 'blue_box'); mu(30); md(30);"
)
URGENT_PLAN = "mu(30); tr(45); mf(50); tl(90); md(30); say('found it');"
PLANS = {"stack the boxes": NORMAL_PLAN, "evade the dog": URGENT_PLAN}
URGENT_ARRIVES_AFTER_S = 0.15


def run_scenario(policy: str, max_batch_size: int) -> tuple[TaskResult, TaskResult]:
    service, clock, _ = make_service(
        PLANS,
        policy=policy,
        robots=("arm1", "drone1"),
        config=ServiceConfig(max_batch_size=max_batch_size),
    )
    t0 = clock.now()
    normal = service.submit_at(t0, TaskRequest(robot_id="arm1", instruction="stack the boxes"))
    urgent = service.submit_at(
        t0 + URGENT_ARRIVES_AFTER_S,
        TaskRequest(robot_id="drone1", instruction="evade the dog", tuf=Tuf.urgent()),
    )
    service.run_until_idle()
    return normal.result(timeout_s=0), urgent.result(timeout_s=0)


@pytest.mark.parametrize("max_batch_size", [1, 8])
def test_timely_meets_both_erts(max_batch_size: int) -> None:
    normal, urgent = run_scenario("timely", max_batch_size)
    assert normal.success and urgent.success
    assert urgent.response_time_s <= Tuf.urgent().expected_response_time_s
    assert normal.response_time_s <= Tuf.normal().expected_response_time_s
    assert urgent.utility == Tuf.urgent().initial_utility
    assert normal.utility == Tuf.normal().initial_utility
    assert normal.segment_count == NORMAL_PLAN.count(";")
    assert normal.plan_text == NORMAL_PLAN


@pytest.mark.parametrize("max_batch_size", [1, 8])
def test_fcfs_misses_the_urgent_ert(max_batch_size: int) -> None:
    normal, urgent = run_scenario("fcfs", max_batch_size)
    assert normal.success and urgent.success
    assert urgent.response_time_s > Tuf.urgent().expected_response_time_s
    assert urgent.utility < Tuf.urgent().initial_utility
    assert normal.segment_count == urgent.segment_count == 1


def test_timely_beats_fcfs_on_total_utility() -> None:
    timely = run_scenario("timely", 1)
    fcfs = run_scenario("fcfs", 1)
    assert sum(r.utility for r in timely) > sum(r.utility for r in fcfs)
    # Without batching the urgent plan waits for the whole normal plan under fcfs.
    assert fcfs[1].response_time_s > fcfs[0].response_time_s - URGENT_ARRIVES_AFTER_S
