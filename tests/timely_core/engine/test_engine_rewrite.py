"""`rewrite` (RewritableEngine) on both engines: a rollback to k generated ids then
generates exactly what the uninterrupted generation did after them; appended ids
are input, never output, and what follows them is what a fresh generation whose
prompt ends with them writes (so no stale KV survives), whatever the suspension
did with the KV; the kept full blocks come from the content cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from engine_testkit import check_memory

from timely_core.clock import VirtualClock
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.protocol import (
    FIXED_STRATEGIES,
    EngineError,
    HandlingStrategy,
    RewritableEngine,
    SamplingParams,
)
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

BLOCK = 4
PROMPT = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]  # two full blocks and a partial one
MAX_TOKENS = 10
PARAMS = SamplingParams(max_tokens=MAX_TOKENS)
OBSERVATION = [21, 22, 23]


def sim_script(prompt: Sequence[int]) -> list[int]:
    """Depends on the context's last id, so appended ids change what follows."""
    last = prompt[-1]
    return [(last + i) % 30 + 4 for i in range(1, 40)]


@pytest.fixture(params=["torch", "sim"])
def factory(request: pytest.FixtureRequest, qwen2_path: Path) -> Callable[[], PagedEngine]:
    def make() -> PagedEngine:
        if request.param == "torch":
            return TorchEngine(qwen2_path, EngineConfig(block_size=BLOCK, device_kv_bytes=2**20))
        config = SimulatedEngineConfig(eos_token_id=0, block_size=BLOCK, device_blocks=64)
        return SimulatedEngine(VirtualClock(), LatencyModel(), sim_script, config)

    return make


def run(engine: PagedEngine, gen_id: int, steps: int | None = None) -> list[int]:
    tokens: list[int] = []
    for _ in range(100):
        if steps is not None and len(tokens) >= steps:
            return tokens
        for output in engine.step([gen_id]):
            tokens.append(output.token_id)
            if output.finished:
                return tokens
    raise AssertionError("the generation did not finish")


def fresh(make: Callable[[], PagedEngine], prompt: list[int], max_tokens: int) -> list[int]:
    engine = make()
    engine.add(7, prompt, SamplingParams(max_tokens=max_tokens))
    return run(engine, 7)


@pytest.mark.parametrize("strategy", FIXED_STRATEGIES)
def test_a_rollback_generates_the_same_again(
    factory: Callable[[], PagedEngine], strategy: HandlingStrategy
) -> None:
    expected = fresh(factory, PROMPT, MAX_TOKENS)
    assert len(expected) == MAX_TOKENS  # no early EOS, so every index below exists
    engine = factory()
    assert isinstance(engine, RewritableEngine)
    engine.add(1, PROMPT, PARAMS)
    assert run(engine, 1, steps=7) == expected[:7]
    engine.suspend(1, strategy)
    engine.rewrite(1, 3, [])
    assert engine.token_ids(1) == PROMPT + expected[:3]
    engine.resume(1)
    assert run(engine, 1) == expected[3:]
    if isinstance(engine, TorchEngine):
        check_memory(engine)


@pytest.mark.parametrize("strategy", FIXED_STRATEGIES)
def test_appended_ids_are_input_and_what_follows_sees_them(
    factory: Callable[[], PagedEngine], strategy: HandlingStrategy
) -> None:
    engine = factory()
    engine.add(1, PROMPT, PARAMS)
    generated = run(engine, 1, steps=5)
    engine.suspend(1, strategy)
    engine.rewrite(1, 2, OBSERVATION)
    engine.resume(1)
    after = run(engine, 1)
    context = PROMPT + generated[:2] + OBSERVATION
    assert after == fresh(factory, context, MAX_TOKENS - 2 - len(OBSERVATION))
    assert len(after) == MAX_TOKENS - 2 - len(OBSERVATION)  # the observation counts
    if isinstance(engine, TorchEngine):
        check_memory(engine)


def test_the_kept_full_blocks_come_from_the_cache() -> None:
    config = SimulatedEngineConfig(eos_token_id=0, block_size=BLOCK, device_blocks=64)
    engine = SimulatedEngine(VirtualClock(), LatencyModel(), sim_script, config)
    engine.add(1, PROMPT, PARAMS)
    run(engine, 1, steps=6)  # 16 ids: four full blocks
    engine.suspend(1, HandlingStrategy.PRESERVE)
    engine.rewrite(1, 5, OBSERVATION)  # keeps 15 ids: three full blocks, then 3 more
    engine.resume(1)
    assert engine.generation(1).num_computed == 3 * BLOCK
    before = engine.stats.prefill_tokens
    engine.step([1])
    assert engine.stats.prefill_tokens - before == 15 + len(OBSERVATION) - 3 * BLOCK
    # only the kept ids past the last kept full block had KV before: computed again
    assert engine.recomputed_tokens == 15 - 3 * BLOCK
    assert engine.rewrites == 1


def test_rewrite_errors(factory: Callable[[], PagedEngine]) -> None:
    engine = factory()
    engine.add(1, PROMPT, PARAMS)
    run(engine, 1, steps=2)
    with pytest.raises(EngineError, match="must be suspended"):
        engine.rewrite(1, 1, [])
    engine.suspend(1, HandlingStrategy.PRESERVE)
    with pytest.raises(ValueError, match=r"keep_generated=3 is outside \[0, 2\]"):
        engine.rewrite(1, 3, [])
    if isinstance(engine, TorchEngine):
        with pytest.raises(ValueError, match="outside"):
            engine.rewrite(1, 1, [10**6])
    assert engine.token_ids(1)[len(PROMPT) :] != []  # refused rewrites changed nothing
    assert len(engine.token_ids(1)) == len(PROMPT) + 2
