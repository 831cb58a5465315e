"""The service prefetches a waiting generation's swapped-out KV when device memory
is free (virtual time, simulated engine): before its predicted resume, so the
resume copies nothing; never while memory is short; off by `kv_prefetch`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.timely_core.core_support import eos_id
from tests.timely_core.serving.test_serving_kv_handling import service_with
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig


@dataclass
class Watch:
    """What the engine was asked: each prefetch (gen id, virtual time) and each
    resume (gen id, was it prefetched, blocks it swapped in)."""

    prefetched: list[tuple[int, float]] = field(default_factory=list)
    resumed: list[tuple[int, bool, int]] = field(default_factory=list)


def watch(service: PlanningService, engine: SimulatedEngine) -> Watch:
    seen = Watch()
    prefetch, resume = engine.prefetch, engine.resume

    def prefetching(gen_id: int) -> bool:
        done = prefetch(gen_id)
        if done:
            seen.prefetched.append((gen_id, service.clock.now()))
        return done

    def resuming(gen_id: int) -> None:
        was = engine.generation(gen_id).prefetched
        before = engine.stats.swapped_in_blocks
        resume(gen_id)
        seen.resumed.append((gen_id, was, engine.stats.swapped_in_blocks - before))

    engine.prefetch = prefetching  # type: ignore[method-assign]
    engine.resume = resuming  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("horizon_s", [5.0, 1.0])
def test_a_swapped_generation_is_prefetched_before_its_resume_and_resumes_without_a_copy(
    horizon_s: float,
) -> None:
    """d1 waits 4 s on a search (auto swaps it out) while d2's plan keeps the engine
    busy and memory is ample: d1's KV is back on the device before its predicted
    resume, no earlier than the prefetch horizon before it, and the resume swaps
    nothing in."""
    service, driver, engine, _told = service_with("infercept", robots=("d1", "d2"))
    seen = watch(service, engine)
    kv = service._state.kv_handling
    kv.prefetch_horizon_s = horizon_s
    checks: list[tuple[float, float]] = []  # (its predicted resume, prefetched at)
    prefetch = engine.prefetch

    def prefetching(gen_id: int) -> bool:
        done = prefetch(gen_id)
        if done:
            checks.append((kv._suspended[gen_id][0], service.clock.now()))
        return done

    engine.prefetch = prefetching  # type: ignore[method-assign]
    d1 = driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    driver.submit_at(0.0, TaskRequest(robot_id="d2", instruction="walk"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert kv.counts["swap"] >= 1 and kv.counts["prefetch"] >= 1
    d1_gen = service._state.generations[d1.task_id].gen_id
    assert d1_gen in {g for g, _ in seen.prefetched}
    assert len(checks) == len(seen.prefetched)
    for resume_s, at_s in checks:
        assert 0 < resume_s - at_s <= horizon_s  # before its resume, within the horizon
    hits = [r for r in seen.resumed if r[1]]
    assert hits and all(copied == 0 for _, _, copied in hits)
    counts = kv.prefetch_counts()
    assert counts["prefetches"] == kv.counts["prefetch"] == len(seen.prefetched)
    assert counts["prefetch_hits"] == len(hits)


def test_no_prefetch_without_the_setting() -> None:
    config = ServiceConfig(kv_prefetch=False)
    service, driver, engine, _told = service_with("infercept", config, robots=("d1", "d2"))
    seen = watch(service, engine)
    driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    driver.submit_at(0.0, TaskRequest(robot_id="d2", instruction="walk"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert service._state.kv_handling.counts["swap"] >= 1
    assert not seen.prefetched and engine.stats.prefetches == 0
    assert any(copied > 0 for _, _, copied in seen.resumed)  # resumes paid the swap-in


@pytest.mark.parametrize("device_blocks", [52, 80])
def test_a_burst_takes_the_prefetched_kv_and_stalls_stop_prefetching(device_blocks: int) -> None:
    """d1 waits 4 s on a search and its KV, swapped out, is prefetched at once (the
    engine is idle). At 1 s five robots' long plans arrive: their admissions take
    the prefetched blocks back (given up, nothing copied, no one preempted for it)
    and d1's resume swaps its KV in from the kept host copy. With KV for fewer of
    them (52 blocks) admissions stall while d1 waits on its last call: that wait is
    not prefetched, nor any within 20 iterations of a stall; with 80 blocks nothing
    stalls and it is."""
    engine_config = SimulatedEngineConfig(
        eos_token_id=eos_id(), block_size=4, device_blocks=device_blocks
    )
    robots = ("d1", *(f"s{i}" for i in range(5)))
    service, driver, engine, _told = service_with(
        "infercept", robots=robots, engine_config=engine_config
    )
    seen = watch(service, engine)
    kv = service._state.kv_handling
    stalls: list[int] = []  # the service's kv_stalls at each iteration
    prefetch_at: list[int] = []  # iterations that prefetched
    refresh = kv.refresh

    def refreshing(now_s: float) -> None:
        before = len(seen.prefetched)
        refresh(now_s)
        stalls.append(service._state.counters["kv_stalls"])
        if len(seen.prefetched) > before:
            prefetch_at.append(len(stalls) - 1)

    kv.refresh = refreshing  # type: ignore[method-assign]
    driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    for robot in robots[1:]:
        driver.submit_at(1.0, TaskRequest(robot_id=robot, instruction="spin"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert kv.counts["swap"] == 2  # search, then say
    first = seen.prefetched[0]
    assert first[1] < 1.0  # before the burst
    counts = kv.prefetch_counts()
    assert counts["prefetch_given_up"] >= 1  # the burst took it back
    resumed = [r for r in seen.resumed if r[0] == first[0]]
    assert resumed[1] == (first[0], False, resumed[1][2]) and resumed[1][2] > 0
    for at in prefetch_at:
        window = stalls[max(at - 20, 0) : at + 1]
        assert window[0] == window[-1]  # no admission stalled for memory lately
    if device_blocks == 52:
        assert stalls[-1] > 0 and len(seen.prefetched) == 1
    else:
        assert stalls[-1] == 0 and len(seen.prefetched) == 2 and counts["prefetch_hits"] == 1
