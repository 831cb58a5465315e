"""Each suspended generation's KV handled by the service (virtual time, simulated
engine): `auto` resolved to preserve, swap or discard by predicted waste and never
passed to the engine; fixed strategies as configured; a wait longer than predicted
decided again; `ttl` released after its time; predictions refined by
segment_done; call-waiting policies resumed only after the call returned."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from tests.timely_core.core_support import (
    Statement,
    TinyLanguage,
    eos_id,
    make_service,
    make_tokenizer,
)
from tests.timely_core.serving.serving_robot_driver import RobotDriver
from timely_core.clock import VirtualClock
from timely_core.engine.protocol import EngineError, HandlingStrategy
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.events import Segment
from timely_core.language.plan_language import PlanStatement
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

PLANS = {
    "quick then slow": "mf(0); search('cat'); say('found it');",
    "long": "mu(30); md(30); mf(100); tr(45); search('keys'); search('wallet');",
    "walk": "mf(50); tl(90); mf(50); tl(90); mf(50); tl(90); mf(50);",
    "spin": "mf(0); " * 30,  # no execution time: its generation hardly ever waits
}


@dataclass(frozen=True)
class ExactLanguage(TinyLanguage):
    """mf(cm) 0.02 s/cm, search 4 s, anything else 0.5 s; minimum = mean."""

    def estimate_execution_s(self, statements: Sequence[PlanStatement]) -> tuple[float, float]:
        total = 0.0
        for statement in statements:
            assert isinstance(statement, Statement)
            if statement.skill == "mf":
                total += 0.02 * float(statement.argument or 0)
            elif statement.skill == "search":
                total += 4.0
            else:
                total += 0.5
        return total, total


def service_with(
    policy: str,
    config: ServiceConfig | None = None,
    robots: Sequence[str] = ("d1",),
    engine_config: SimulatedEngineConfig | None = None,
    **latency: float,
) -> tuple[PlanningService, RobotDriver, SimulatedEngine, list[HandlingStrategy]]:
    model = PAPER_LLAMA3_8B_RTX4090.model_copy(update=latency)
    service, clock, engine = make_service(
        PLANS, policy=policy, robots=(), latency=model, config=config, engine_config=engine_config
    )
    for robot in robots:
        service.register_robot(robot, ExactLanguage())
    told: list[HandlingStrategy] = []
    suspend = engine.suspend

    def recording(gen_id: int, strategy: HandlingStrategy) -> None:
        told.append(HandlingStrategy(strategy))
        suspend(gen_id, strategy)

    engine.suspend = recording  # type: ignore[method-assign]
    return service, RobotDriver(service, clock), engine, told


def test_auto_keeps_a_call_of_no_length_and_swaps_a_long_one() -> None:
    _service, driver, engine, told = service_with("infercept")
    handle = driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    driver.run()
    assert handle.result(timeout_s=0).success
    # mf(0) takes no time: kept; search takes 4 s: swapping costs the batch far less
    # (and say's 0.5 s too: the last segment goes before the end is decoded)
    assert told == [HandlingStrategy.PRESERVE, HandlingStrategy.SWAP, HandlingStrategy.SWAP]
    assert engine.stats.swapped_out_blocks > 0 and engine.stats.recomputed_tokens == 0


def test_auto_discards_when_the_swap_link_is_slow() -> None:
    _service, driver, engine, told = service_with("infercept", swap_bytes_per_s=1e6)
    handle = driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    driver.run()
    assert handle.result(timeout_s=0).success
    assert told == [HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD, HandlingStrategy.DISCARD]
    assert engine.stats.recomputed_tokens > 0 and engine.stats.swapped_out_blocks == 0


def test_auto_never_swaps_on_an_engine_without_a_host_pool() -> None:
    """An engine with no host KV (vLLM) is given only what it can do: where swap
    would waste least, the next best; a fixed swap is refused at construction."""
    no_host = SimulatedEngineConfig(eos_token_id=eos_id(), host_blocks=0)
    _service, driver, engine, told = service_with("infercept", engine_config=no_host)
    handle = driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    driver.run()
    assert handle.result(timeout_s=0).success
    assert told == [HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD, HandlingStrategy.DISCARD]
    assert engine.stats.swapped_out_blocks == 0
    with pytest.raises(ValueError, match="handling_strategy swap: the SimulatedEngine has no host"):
        service_with(
            "timely", ServiceConfig(handling_strategy=HandlingStrategy.SWAP), engine_config=no_host
        )


def test_the_engine_refuses_strategies_the_service_resolves() -> None:
    service, driver, engine, _told = service_with("timely")
    driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="walk"))
    service.run_until(0.2)
    live = list(service._state.running)
    assert live
    for strategy in (HandlingStrategy.AUTO, HandlingStrategy.TTL):
        with pytest.raises(EngineError, match="resolved by the service"):
            engine.suspend(live[0], strategy)


@pytest.mark.parametrize("strategy", ["preserve", "swap", "discard"])
def test_a_fixed_strategy_is_applied_to_every_suspension(strategy: str) -> None:
    config = ServiceConfig(handling_strategy=HandlingStrategy(strategy))
    _service, driver, _, told = service_with("timely", config, robots=("d1", "d2"))
    for robot in ("d1", "d2"):
        driver.submit_at(0.0, TaskRequest(robot_id=robot, instruction="walk"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert told and set(told) == {HandlingStrategy(strategy)}


def test_auto_under_timely_reaches_the_engine_only_as_fixed_strategies() -> None:
    _service, driver, _, told = service_with("timely", robots=("d1", "d2", "d3"))
    for i, robot in enumerate(("d1", "d2", "d3")):
        driver.submit_at(0.01 * i, TaskRequest(robot_id=robot, instruction="long"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert told and all(s.is_fixed for s in told)


def test_a_wait_longer_than_predicted_is_decided_again() -> None:
    """Predicted to wait nothing, the generation is kept; its robot searches for 4 s
    while another robot's plan keeps the engine busy: after 10 iterations past the
    prediction it is swapped out (preserved -> swapped, never the reverse)."""
    service, driver, engine, told = service_with("infercept", robots=("d1", "d2"))
    kv = service._state.kv_handling
    kv.wait_noise = lambda wait_s: 0.0  # every prediction says: no wait
    driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    driver.submit_at(0.0, TaskRequest(robot_id="d2", instruction="spin"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert set(told) == {HandlingStrategy.PRESERVE}
    assert kv.counts["rehandled-swap"] >= 1
    assert engine.stats.swapped_out_blocks > 0


def test_ttl_pins_then_releases() -> None:
    """`ttl` under timely, one generation per iteration: a generation waiting past
    its time-to-live (its robot searches for 4 s, predicted as 0.5 s) is released
    while another robot's plan runs."""
    config = ServiceConfig(handling_strategy=HandlingStrategy.TTL, max_batch_size=1)
    service, driver, _engine, told = service_with("timely", config, robots=("d1", "d2"))
    kv = service._state.kv_handling
    kv.wait_noise = lambda wait_s: min(wait_s, 0.5)
    kv.queue_delay_s = 1.0  # an eviction would cost a second in the queue
    driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="quick then slow"))
    driver.submit_at(0.0, TaskRequest(robot_id="d2", instruction="spin"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    assert HandlingStrategy.PRESERVE in told
    assert sum(n for k, n in kv.counts.items() if k.startswith("rehandled-")) >= 1


def test_predictions_follow_measured_executions() -> None:
    service, driver, _, _ = service_with("infercept", robots=("d1", "d2", "d3"))
    driver.exec_s = lambda segment: 2.0 * segment.estimated_execution_s  # twice as slow
    for robot in ("d1", "d2", "d3"):
        driver.submit_at(0.0, TaskRequest(robot_id=robot, instruction="walk"))
    driver.run()
    correction = service._state.kv_handling.predictor.correction("tiny")
    assert correction == pytest.approx(2.0, rel=0.05)


def test_a_call_waiting_policy_resumes_only_after_the_call_returned() -> None:
    service, driver, _engine, _ = service_with("lamps")
    handle = driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="walk"))
    service.run_until_idle()
    delivered: list[Segment] = []
    handle.on_segment(delivered.append)
    assert not handle.done() and service.stats().suspended == 1 and len(delivered) == 1
    service.run_until(service.clock.now() + 30.0)  # no report: still waiting
    assert len(delivered) == 1
    service.segment_done(handle.task_id, 0)
    service.run_until(service.clock.now() + 0.5)
    assert len(delivered) == 2


def test_preemption_order_trades_places_by_wait_only_within_a_tuf_class() -> None:
    """Preserved generations: two normal ones (the one waiting longer goes first)
    and an urgent one that waits longest of all but keeps its place."""
    service, driver, _, told = service_with("infercept", robots=("d1", "d2", "d3"))
    urgent = Tuf(initial_utility=3.0, slope=-1.0, expected_response_time_s=0.5)
    driver.submit_at(0.0, TaskRequest(robot_id="d1", instruction="walk", tuf=urgent))
    driver.submit_at(0.0, TaskRequest(robot_id="d2", instruction="walk"))
    driver.submit_at(0.0, TaskRequest(robot_id="d3", instruction="walk"))
    kv = service._state.kv_handling
    kv.wait_noise = lambda wait_s: 0.0  # all preserved
    service.run_until_idle()
    gens = {g.robot_id: g.gen_id for g in service._state.by_gen_id.values()}
    assert set(told) == {HandlingStrategy.PRESERVE} and len(told) == 3
    kv._waiting[gens["d1"]].check_s = 100.0  # urgent, the longest wait
    kv._waiting[gens["d2"]].check_s = 10.0
    kv._waiting[gens["d3"]].check_s = 1.0
    ranking = [gens["d1"], gens["d2"], gens["d3"]]
    assert kv.engine_ranking(ranking) == [gens["d1"], gens["d3"], gens["d2"]]


@pytest.mark.parametrize("device_blocks", [4096, 24])
def test_auto_under_timely_keeps_kv_unless_memory_is_short(device_blocks: int) -> None:
    """Six robots with long plans contend for a batch of 2: with ample device KV
    every wait is kept (idle memory nobody needs wastes nothing); with KV for a
    few contexts, `auto` swaps some out."""
    config = ServiceConfig(max_batch_size=2)
    robots = [f"d{i}" for i in range(6)]
    service, clock, engine = make_service(
        PLANS,
        robots=(),
        config=config,
        engine_config=SimulatedEngineConfig(
            eos_token_id=eos_id(), block_size=4, device_blocks=device_blocks
        ),
    )
    for robot in robots:
        service.register_robot(robot, ExactLanguage())
    driver = RobotDriver(service, clock)
    for robot in robots:
        driver.submit_at(0.0, TaskRequest(robot_id=robot, instruction="long"))
    driver.run()
    assert all(h.result(timeout_s=0).success for h in driver.handles)
    counts = service._state.kv_handling.counts
    if device_blocks > 1000:
        assert set(counts) == {"preserve"} and engine.stats.swapped_out_blocks == 0
    else:
        assert counts["swap"] + counts["rehandled-swap"] > 0


@pytest.mark.parametrize("strategy", ["discard", "ttl", "swap"])
def test_a_strategy_the_engine_does_not_accept_is_refused_when_the_service_is_built(
    strategy: str,
) -> None:
    """An engine that names the strategies it accepts (vLLM: preserve only, here) gets
    no other: refused at construction, not after a task's first segment went out."""
    engine_config = SimulatedEngineConfig(eos_token_id=eos_id(), host_blocks=0)
    engine = SimulatedEngine(
        VirtualClock(), PAPER_LLAMA3_8B_RTX4090, lambda _ids: [], engine_config
    )
    engine.suspend_strategies = frozenset({HandlingStrategy.PRESERVE})  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=rf"handling_strategy {strategy}: the SimulatedEngine"):
        PlanningService(
            engine,
            make_tokenizer(),
            "timely",
            clock=VirtualClock(),
            config=ServiceConfig(handling_strategy=HandlingStrategy(strategy)),
        )
    # auto chooses among what it accepts
    service = PlanningService(engine, make_tokenizer(), "timely", clock=VirtualClock())
    assert service._state.kv_handling.allowed == (HandlingStrategy.PRESERVE,)
