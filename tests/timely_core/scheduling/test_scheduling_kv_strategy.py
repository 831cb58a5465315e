"""The three waste equations on an engine's own costs, the min-waste choice, the
TTL of a waiting generation and LAMPS's memory-over-time score."""

from __future__ import annotations

import pytest

from tests.timely_core.core_support import eos_id
from timely_core.clock import VirtualClock
from timely_core.engine.protocol import HandlingStrategy
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090, LatencyKvCosts, LatencyModel
from timely_core.scheduling.kv_strategy import (
    DISCARD,
    PRESERVE,
    SWAP,
    kv_costs_for,
    memory_time,
    ttl_s,
    waste,
)

M = 1000.0  # bytes per token
COSTS = LatencyKvCosts(
    LatencyModel(prefill_token_s=1e-4, context_token_s=0.0, swap_bytes_per_s=1e8), M
)


def test_the_three_equations() -> None:
    w = waste(COSTS, context_tokens=500, other_tokens=1500, wait_s=2.0)
    t_fwd = 500 * 1e-4
    t_swap = 500 * M / 1e8
    assert w.preserve == pytest.approx(2.0 * 500 * M)
    assert w.discard == pytest.approx(t_fwd * 500 * M + t_fwd * 1500 * M)
    assert w.swap == pytest.approx(2 * t_swap * 2000 * M)


def test_min_waste_follows_the_wait() -> None:
    assert waste(COSTS, 500, 1500, 0.0).least() is PRESERVE  # nothing lost by keeping
    assert waste(COSTS, 500, 1500, 0.001).least() is PRESERVE
    # swap here costs 0.01 s of a 2,000-token batch, discard 0.05 s: swap wins
    assert waste(COSTS, 500, 1500, 30.0).least() is SWAP
    slow_link = LatencyKvCosts(COSTS.latency.model_copy(update={"swap_bytes_per_s": 1e6}), M)
    assert waste(slow_link, 500, 1500, 30.0).least() is DISCARD
    assert waste(slow_link, 500, 1500, 30.0).least((PRESERVE, SWAP)) is SWAP
    with pytest.raises(ValueError, match="no fixed strategy"):
        waste(COSTS, 1, 1, 1.0).least(())
    with pytest.raises(ValueError, match=">= 0"):
        waste(COSTS, -1, 0, 1.0)


def test_ttl_pins_only_when_eviction_costs_more_than_holding() -> None:
    # a short wait, costly eviction (long queueing delay): pinned past the mean wait
    tau = ttl_s(COSTS, 500, 1500, wait_s=0.5, wait_cv=0.2, queue_delay_s=5.0)
    assert tau >= 0.5
    # a long wait, cheap eviction, no queueing: not pinned at all
    assert ttl_s(COSTS, 500, 1500, wait_s=60.0, wait_cv=0.2, queue_delay_s=0.0) == 0.0
    # a zero-length wait gains nothing from pinning
    assert ttl_s(COSTS, 500, 1500, wait_s=0.0, wait_cv=0.2, queue_delay_s=5.0) == 0.0


def test_memory_time_counts_the_wait_under_its_strategy() -> None:
    short = memory_time(COSTS, 500, 20, 0.02, wait_s=1.0, strategy=PRESERVE)
    long = memory_time(COSTS, 500, 20, 0.02, wait_s=10.0, strategy=PRESERVE)
    assert long - short == pytest.approx(9.0 * 520 * M)
    # swapped, the wait costs the same however long it is
    assert memory_time(COSTS, 500, 20, 0.02, 1.0, SWAP) == memory_time(
        COSTS, 500, 20, 0.02, 10.0, SWAP
    )
    assert memory_time(COSTS, 100, 20, 0.02, 1.0, SWAP) < memory_time(
        COSTS, 500, 20, 0.02, 1.0, SWAP
    )


def test_costs_come_from_the_engine_else_the_fallback() -> None:
    config = SimulatedEngineConfig(eos_token_id=eos_id(), block_size=16, bytes_per_block=16 * 64)
    latency = LatencyModel(prefill_token_s=3e-4, swap_bytes_per_s=5e9)
    engine = SimulatedEngine(VirtualClock(), latency, lambda ids: [], config)
    costs = kv_costs_for(engine, PAPER_LLAMA3_8B_RTX4090, 1.0)
    assert costs.bytes_per_token == 64 and costs.forward_s(10) == pytest.approx(3e-3)
    fallback = kv_costs_for(object(), PAPER_LLAMA3_8B_RTX4090, 7.0)
    assert fallback.bytes_per_token == 7.0
    assert fallback.swap_s(1) == pytest.approx(7.0 / PAPER_LLAMA3_8B_RTX4090.swap_bytes_per_s)


def test_auto_and_ttl_are_not_engine_strategies() -> None:
    assert not HandlingStrategy.AUTO.is_fixed and not HandlingStrategy.TTL.is_fixed
    assert all(s.is_fixed for s in (PRESERVE, SWAP, DISCARD))
