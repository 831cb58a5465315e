"""The service on a real clock: a background thread serves many robots submitting
from their own threads; segments arrive in order, callbacks and iterators agree."""

from __future__ import annotations

import threading
import time

from tests.timely_core.core_support import TinyLanguage, eos_id, make_tokenizer, plan_script
from timely_core.clock import MonotonicClock, VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.events import Segment
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService

PLANS = {
    "look for the cat": "mf(50); tl(90); search('cat'); say('found it');",
    "evade": "mu(30); tr(45); md(30);",
}
ROBOTS = 12


def instant_engine() -> SimulatedEngine:
    """The scripted plans, at no engine cost (its own virtual clock never advances the
    service's real one)."""
    return SimulatedEngine(
        VirtualClock(),
        LatencyModel(),
        plan_script(PLANS),
        SimulatedEngineConfig(eos_token_id=eos_id()),
    )


def test_concurrent_robots_on_a_real_clock() -> None:
    # The engine's own costs run in virtual time (instant here); the service's clock is real.
    engine = instant_engine()
    service = PlanningService(engine, make_tokenizer(), policy="timely", clock=MonotonicClock())
    for i in range(ROBOTS):
        service.register_robot(f"r{i}", TinyLanguage())
    service.start()
    failures: list[str] = []

    def robot(i: int) -> None:
        task = "evade" if i % 3 == 0 else "look for the cat"
        handle = service.submit(
            TaskRequest(
                robot_id=f"r{i}",
                instruction=task,
                tuf=Tuf.urgent() if task == "evade" else Tuf.normal(),
            )
        )
        called: list[Segment] = []
        handle.on_segment(called.append)
        texts = []
        for segment in handle.segments(timeout_s=30):
            texts.append(segment.text)
            handle.segment_done(segment.index)
        result = handle.result(timeout_s=30)
        if not result.success or "".join(texts) != PLANS[task]:
            failures.append(f"robot {i}: {result.error or texts}")
        if [s.index for s in called] != list(range(result.segment_count)):
            failures.append(f"robot {i}: callbacks {[s.index for s in called]}")

    threads = [threading.Thread(target=robot, args=(i,)) for i in range(ROBOTS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        service.stop()
    assert not failures
    stats = service.stats()
    assert stats.succeeded == ROBOTS and stats.failed == 0
    assert stats.kv_device_blocks_free == stats.kv_device_blocks_total - 3


class _BlockingEngine:
    """A SimulatedEngine whose first step over a batch waits for `release`, and which
    records whether `abort` was ever called in the middle of a step."""

    def __init__(self, engine: SimulatedEngine) -> None:
        self._engine = engine
        self.in_step = threading.Event()
        self.release = threading.Event()
        self.abort_during_step = False
        self._stepping = False

    @property
    def stepping(self) -> bool:
        return self._stepping

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)

    def step(self, gen_ids: list[int]) -> object:
        self._stepping = True
        self.in_step.set()
        try:
            self.release.wait(timeout=10)
            return self._engine.step(gen_ids)
        finally:
            self._stepping = False

    def abort(self, gen_id: int) -> None:
        self.abort_during_step |= self._stepping
        self._engine.abort(gen_id)


def test_submit_does_not_wait_for_an_engine_step_and_cancel_does() -> None:
    engine = _BlockingEngine(instant_engine())
    service = PlanningService(engine, make_tokenizer(), policy="timely", clock=MonotonicClock())  # type: ignore[arg-type]
    for robot in ("r0", "r1"):
        service.register_robot(robot, TinyLanguage())
    service.start()
    try:
        first = service.submit(TaskRequest(robot_id="r0", instruction="evade", tuf=Tuf.urgent()))
        assert engine.in_step.wait(timeout=30)
        # The loop is inside a step: a second robot's submission goes through at once.
        second = service.submit(TaskRequest(robot_id="r1", instruction="look for the cat"))
        assert engine.stepping and not engine.release.is_set()
        # A cancel frees KV, so it waits for the step to end.
        canceller = threading.Thread(target=first.cancel)
        canceller.start()
        canceller.join(timeout=0.3)
        assert canceller.is_alive()
        engine.release.set()
        canceller.join(timeout=30)
        assert not canceller.is_alive()
        assert first.result(timeout_s=30).error == "cancelled"
        assert second.result(timeout_s=30).success
        assert not engine.abort_during_step
    finally:
        engine.release.set()
        service.stop()


def test_loop_busy_time_counts_the_service_work_around_engine_steps() -> None:
    """A segment callback that takes 20 ms runs in the loop after an engine step: it is
    loop time the engine waits through, not engine time."""
    engine = instant_engine()
    service = PlanningService(engine, make_tokenizer(), policy="stream", clock=MonotonicClock())
    service.register_robot("r0", TinyLanguage())
    handle = service.submit(TaskRequest(robot_id="r0", instruction="evade"))
    handle.on_segment(lambda segment: time.sleep(0.02))  # before the loop can deliver
    started = time.monotonic()
    service.start()
    try:
        assert handle.result(timeout_s=30).success
    finally:
        service.stop()
    elapsed = time.monotonic() - started
    stats = service.stats()
    assert stats.segments_emitted == 3
    assert stats.loop_busy_s - stats.engine_busy_s >= 3 * 0.02
    assert stats.loop_busy_s <= elapsed
