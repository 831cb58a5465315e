"""A generation whose validating tool has not answered when its segment completes
waits suspended, not in the batch (simulated engine, virtual time; real tool
processes): its KV is decided by the waste equations on the tool's predicted
answer time (`auto` under LAMPS's INFERCEPT baseline: a slow tool's waiter is
swapped out, a fast one's kept), the prediction follows the measured answers, and
other generations run on meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.timely_core.core_support import (
    TinyLanguage,
    eos_id,
    make_service,
    make_tokenizer,
    plan_script,
)
from tests.timely_core.serving.serving_robot_driver import RobotDriver
from timely_core.clock import MonotonicClock, VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.events import Rollback, Segment
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.task_handle import TaskHandle

TOOLS = str(Path(__file__).parents[1] / "tools")  # tools_timed_plugins
SPIN_STATEMENTS = 40
PLANS = {
    "find the keys": "mf(0); search('keys'); say('found it');",
    "find the bomb": "mf(0); search('bomb'); say('found it');",
    "spin": "mf(0); " * SPIN_STATEMENTS,
}
SLOW_PRIOR_S, FAST_PRIOR_S = 5.0, 0.0001  # vs ~0.4 ms to swap a short plan's KV
ANSWER_S = 0.2  # a tool that answers this late: still out when its segment ends


def look(delay_s: float, expected_s: float) -> dict[str, object]:
    return {
        "name": "look",
        "plugin": "tools_timed_plugins:TimedLook",
        "options": {"delay_s": delay_s},
        "expected_s": expected_s,
    }


@pytest.fixture
def fleet(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[PlanningService, RobotDriver, SimulatedEngine]]:
    monkeypatch.syspath_prepend(TOOLS)
    service, clock, engine = make_service(PLANS, policy="infercept", robots=("slow", "fast"))
    yield service, RobotDriver(service, clock), engine
    service.close_tools()


def find_keys(driver: RobotDriver, robot: str, at_s: float) -> None:
    driver.submit_at(at_s, TaskRequest(robot_id=robot, instruction="find the keys"))


def test_a_slow_tools_waiter_is_swapped_out_and_a_fast_ones_kept(
    fleet: tuple[PlanningService, RobotDriver, SimulatedEngine],
) -> None:
    service, driver, engine = fleet
    service.register_tool("slow", look(ANSWER_S, SLOW_PRIOR_S))
    find_keys(driver, "slow", 0.0)
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    counts = service._state.kv_handling.counts
    assert counts["tool-swap"] == 1 and counts["tool-preserve"] == 0
    assert engine.stats.swapped_out_blocks > 0

    service.unregister_tool("slow", "look")
    service.register_tool("fast", look(0.0, FAST_PRIOR_S))
    find_keys(driver, "fast", driver.clock.now())
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert counts["tool-preserve"] == 1 and counts["tool-swap"] == 1


def test_the_prediction_follows_the_measured_answers(
    fleet: tuple[PlanningService, RobotDriver, SimulatedEngine],
) -> None:
    """Declared fast but answering after 0.2 s: the first waiter is kept on the
    prior, the next ones, predicted from measured answers, are swapped out."""
    service, driver, _ = fleet
    service.register_tool("slow", look(ANSWER_S, FAST_PRIOR_S))
    for _ in range(3):
        find_keys(driver, "slow", driver.clock.now())
        driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    counts = service._state.kv_handling.counts
    assert counts["tool-preserve"] == 1 and counts["tool-swap"] == 2
    stats = service.tool_answer_stats("slow", "look")
    assert stats.samples == 3 and stats.expected_s is not None and stats.expected_s >= ANSWER_S


def register_gated_look(
    service: PlanningService, gate: Path, wall_s: float, expected_s: float | None = None
) -> None:
    """The slow robot's `look`, answering once `gate` exists (tools_timed_plugins)."""
    spec: dict[str, object] = {
        "name": "look",
        "plugin": "tools_timed_plugins:GatedLook",
        "options": {"gate": str(gate)},
        "wall_s": wall_s,
    }
    if expected_s is not None:
        spec["expected_s"] = expected_s
    service.register_tool("slow", spec)


@pytest.mark.parametrize("prior_s", [SLOW_PRIOR_S, FAST_PRIOR_S])
def test_others_run_while_a_generation_waits_for_its_tool(
    fleet: tuple[PlanningService, RobotDriver, SimulatedEngine], tmp_path: Path, prior_s: float
) -> None:
    """The tool answers only once the other robot's plan is complete: the engine
    decodes that plan while the searching generation waits (with the waiter held
    in the batch, it would stall until the tool's wall time and fail). Kept on a
    fast prediction, the waiter is swapped out once it waited past it."""
    service, driver, _ = fleet
    gate = tmp_path / "answer"
    register_gated_look(service, gate, wall_s=5.0, expected_s=prior_s)
    search = driver.submit_at(0.0, TaskRequest(robot_id="slow", instruction="find the keys"))
    spin = driver.submit_at(0.0, TaskRequest(robot_id="fast", instruction="spin"))
    spun: list[int] = []

    def on_spin_segment(segment: Segment) -> None:
        spun.append(segment.index)
        if len(spun) == SPIN_STATEMENTS:  # its plan is all out: the tool may answer
            gate.touch()

    spin.on_segment(on_spin_segment)
    driver.run()
    assert spin.result(timeout_s=0).success
    assert search.result(timeout_s=0).success, search.result(timeout_s=0).error
    assert gate.exists()  # opened by the spinning plan's last segment
    assert list(search.segments())[-1].emitted_at_s > list(spin.segments())[-1].emitted_at_s
    counts = service._state.kv_handling.counts
    if prior_s == SLOW_PRIOR_S:
        assert counts["tool-swap"] == 1 and counts["tool-rehandled-swap"] == 0
    else:
        assert counts["tool-preserve"] == 1 and counts["tool-rehandled-swap"] == 1


def test_others_run_while_a_plans_last_segment_waits_for_its_tool(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The token that completes the call whose verdict is out also ends the plan
    (its token limit): the generation has left the engine and waits out of the
    loop, so the other robot's plan, submitted after it, is decoded meanwhile (a
    wait in the loop would stall it past the tool's wall time and the search would
    fail), and the plan ends when the answer comes."""
    monkeypatch.syspath_prepend(TOOLS)
    plans = {"find the cat": "mf(0); search('cat');", "spin": "mf(0); mf(0);"}
    limit = len(make_tokenizer().encode(plans["find the cat"], add_special_tokens=False).ids)
    config = ServiceConfig(max_tokens=limit)
    service, clock, _ = make_service(plans, "infercept", ("slow", "fast"), config=config)
    driver = RobotDriver(service, clock)
    gate = tmp_path / "answer"
    try:
        register_gated_look(service, gate, wall_s=5.0)
        search = driver.submit_at(0.0, TaskRequest(robot_id="slow", instruction="find the cat"))
        spins: list[TaskHandle] = []

        def on_search_segment(segment: Segment) -> None:
            if segment.index == 0:  # the search's call is still being decoded
                spin = TaskRequest(robot_id="fast", instruction="spin")
                spins.append(driver.submit_at(clock.now(), spin))
                spins[0].on_segment(lambda s: gate.touch() if s.index == 1 else None)

        search.on_segment(on_search_segment)
        driver.run()
        [spin] = spins
        assert spin.result(timeout_s=0).success
        result = search.result(timeout_s=0)
        assert result.success, result.error
        assert result.plan_text == plans["find the cat"]
        # out only once the spin's last segment opened the gate (virtual time stood
        # still while the tool answered in real time)
        assert list(search.segments())[-1].emitted_at_s >= list(spin.segments())[-1].emitted_at_s
    finally:
        service.close_tools()


def test_a_rollback_while_a_plans_last_segment_waits_takes_the_wait_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The robot fails segment 0 while the ended plan waits for its last verdict:
    the plan is replanned from segment 0's end (re-admitted), so it no longer waits
    for verdicts; its new plan ends and waits for the robot's reports only."""
    monkeypatch.syspath_prepend(TOOLS)
    plans = {"find the cat": "mf(0); search('cat');", "failed: blocked": " mf(1);"}
    limit = len(make_tokenizer().encode(plans["find the cat"], add_special_tokens=False).ids)
    config = ServiceConfig(max_tokens=limit)
    service, _, _ = make_service(plans, "stream", ("slow",), config=config)
    gate = tmp_path / "answer"
    try:
        register_gated_look(service, gate, wall_s=20.0)
        request = TaskRequest(robot_id="slow", instruction="find the cat", replan_on_failure=True)
        search = service.submit(request)
        segments: list[Segment] = []
        search.on_segment(segments.append)
        seen: list[object] = []

        def robot() -> None:  # another thread, while the loop waits for the tool
            deadline = time.monotonic() + 15
            while service.stats().awaiting_verdicts == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
            seen.append(service.stats().awaiting_verdicts)
            seen.append(search.segment_failed(0, "blocked"))
            gate.touch()

        thread = threading.Thread(target=robot)
        thread.start()
        service.run_until_idle()
        thread.join()
        assert seen[0] == 1 and isinstance(seen[1], Rollback)
        stats = service.stats()
        assert (stats.awaiting_verdicts, stats.awaiting_reports) == (0, 1)
        # the search, held for its verdict, was never delivered: the replan took its place
        assert [(s.index, s.text.strip()) for s in segments] == [(0, "mf(0);"), (1, "mf(1);")]
    finally:
        service.close_tools()


def test_a_tool_error_while_waiting_ends_only_its_task(
    fleet: tuple[PlanningService, RobotDriver, SimulatedEngine],
) -> None:
    service, driver, _ = fleet
    bomb = {"name": "look", "plugin": "tools_fault_plugins:Look", "expected_s": SLOW_PRIOR_S}
    service.register_tool("slow", bomb)
    service.register_tool("fast", bomb)
    bad = driver.submit_at(0.0, TaskRequest(robot_id="slow", instruction="find the bomb"))
    good = driver.submit_at(0.0, TaskRequest(robot_id="fast", instruction="find the keys"))
    driver.run()
    assert good.result(timeout_s=0).success
    error = bad.result(timeout_s=0).error
    assert "tool 'look'" in error and "search('bomb')" in error
    assert [s.text.strip() for s in bad.segments()] == ["mf(0);"]


def test_on_a_real_clock_the_loop_serves_others_and_wakes_for_the_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The background loop (real clock, `stream`: no suspension between segments):
    the other robot's plan is served while the searching generation waits, and the
    answer, when it comes, resumes the waiter."""
    monkeypatch.syspath_prepend(TOOLS)
    engine = SimulatedEngine(
        VirtualClock(),  # the engine's own costs: instant on the service's real clock
        LatencyModel(),
        plan_script(PLANS),
        SimulatedEngineConfig(eos_token_id=eos_id()),
    )
    service = PlanningService(engine, make_tokenizer(), policy="stream", clock=MonotonicClock())
    for robot in ("slow", "fast"):
        service.register_robot(robot, TinyLanguage())
    gate = tmp_path / "answer"
    register_gated_look(service, gate, wall_s=10.0)
    service.start()
    try:
        search = service.submit(TaskRequest(robot_id="slow", instruction="find the keys"))
        spin = service.submit(TaskRequest(robot_id="fast", instruction="spin"))
        assert spin.result(timeout_s=30).success  # served while the search waits
        assert not search.done()  # its verdict is still out
        gate.touch()
        result = search.result(timeout_s=30)
        assert result.success, result.error
        assert result.plan_text == "mf(0); search('keys'); say('found it');"
    finally:
        service.stop()
        service.close_tools()
