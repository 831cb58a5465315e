"""Discard means the same on both engines: the generation's blocks are free at once;
a resume reuses what the content cache still holds of them and recomputes the rest.
Both cases (still cached, evicted meanwhile) with the recompute counted, on the
torch engine and on the simulator, which keep the same books."""

from __future__ import annotations

from pathlib import Path

import pytest

from timely_core.clock import VirtualClock
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.protocol import HandlingStrategy, SamplingParams
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

BLOCK = 4
DEVICE_BLOCKS = 6
PROMPT = [5, 6, 7, 8, 9, 10, 11, 12]  # two full blocks
OTHER = list(range(40, 40 + BLOCK * DEVICE_BLOCKS - 1))  # needs every device block
PARAMS = SamplingParams(max_tokens=5)


def torch_engine(path: Path) -> TorchEngine:
    probe = TorchEngine(path, EngineConfig(block_size=BLOCK, device_kv_bytes=2**20))
    return TorchEngine(
        path,
        EngineConfig(
            block_size=BLOCK,
            device_kv_bytes=DEVICE_BLOCKS * probe.bytes_per_block,
            host_kv_bytes=0,
        ),
    )


def sim_engine(_: Path) -> SimulatedEngine:
    config = SimulatedEngineConfig(
        eos_token_id=0, block_size=BLOCK, device_blocks=DEVICE_BLOCKS, host_blocks=0
    )
    return SimulatedEngine(VirtualClock(), LatencyModel(), lambda p: [3, 2, 1, 3, 2], config)


@pytest.fixture(params=["torch", "sim"])
def make(request: pytest.FixtureRequest, qwen2_path: Path) -> PagedEngine:
    factory = torch_engine if request.param == "torch" else sim_engine
    return factory(qwen2_path)


@pytest.fixture(params=[None, "robot"])
def prefix(request: pytest.FixtureRequest, make: PagedEngine) -> str | None:
    """Without a prefix, or with a registered one covering the prompt's first
    block and a half (its partial block copied, as the service's are)."""
    if request.param is not None:
        make.register_prefix(request.param, PROMPT[:6])
    return request.param


def run(engine: PagedEngine, gen_id: int) -> list[int]:
    tokens: list[int] = []
    for _ in range(50):
        for output in engine.step([gen_id]):
            tokens.append(output.token_id)
            if output.finished:
                return tokens
    raise AssertionError("the generation did not finish")


def uninterrupted(engine: PagedEngine) -> list[int]:
    engine.add(99, PROMPT, PARAMS)
    tokens = run(engine, 99)
    memory = engine.memory()  # the pool is whole again
    assert memory.device_blocks_free == DEVICE_BLOCKS - memory.pinned_prefix_blocks
    return tokens


def test_discard_frees_at_once_and_resume_reuses_what_is_still_cached(
    make: PagedEngine, prefix: str | None
) -> None:
    engine = make
    expected = uninterrupted(engine)
    pinned = engine.memory().pinned_prefix_blocks
    engine.add(1, PROMPT, PARAMS, prefix_id=prefix)
    first = [o.token_id for o in engine.step([1])]
    engine.suspend(1, HandlingStrategy.DISCARD)
    assert engine.memory().device_blocks_free == DEVICE_BLOCKS - pinned  # free at once
    engine.resume(1)
    assert engine.generation(1).num_computed == len(PROMPT)  # both blocks found again
    assert first + run(engine, 1) == expected
    assert engine.recomputed_tokens == 0


def test_discard_recomputes_what_was_evicted_meanwhile(
    make: PagedEngine, prefix: str | None
) -> None:
    engine = make
    expected = uninterrupted(engine)
    engine.add(1, PROMPT, PARAMS, prefix_id=prefix)
    first = [o.token_id for o in engine.step([1])]
    engine.suspend(1, HandlingStrategy.DISCARD)
    free = engine.memory().device_blocks_free
    other = OTHER[: free * BLOCK - 1]  # takes every free block: 1's cached ones go
    engine.add(2, other, PARAMS)
    engine.step([2])
    engine.abort(2)
    engine.resume(1)
    kept = 6 if prefix else 0  # the pinned prefix is never evicted
    assert engine.generation(1).num_computed == kept
    assert first + run(engine, 1) == expected
    assert engine.recomputed_tokens == len(PROMPT) - kept  # every token that had KV, once
