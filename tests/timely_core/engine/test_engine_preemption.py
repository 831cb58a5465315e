"""Preemption follows the policy's ranking (`set_ranking`), not admission order, on
the torch engine and the simulator alike (they share the victim order); a step
longer than the engine's `max_generations` is refused, not truncated; a generation
that outgrows the whole device fails alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_testkit import drive_to_end

from timely_core.clock import VirtualClock
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.protocol import (
    EngineError,
    HandlingStrategy,
    SamplingParams,
    UnknownGeneration,
)
from timely_core.engine.sequence import KvLocation
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

BLOCK = 4
PARAMS = SamplingParams(max_tokens=6)


def prompt(gen_id: int) -> list[int]:
    return [10 * gen_id + i for i in range(1, 9)]  # two full blocks, unlike the others


def torch_engine(path: Path, device_blocks: int, max_generations: int) -> TorchEngine:
    probe = TorchEngine(path, EngineConfig(block_size=BLOCK, device_kv_bytes=2**20))
    config = EngineConfig(
        block_size=BLOCK,
        device_kv_bytes=device_blocks * probe.bytes_per_block,
        host_kv_bytes=2**20,
        max_generations=max_generations,
    )
    return TorchEngine(path, config)


def sim_engine(_: Path, device_blocks: int, max_generations: int) -> SimulatedEngine:
    config = SimulatedEngineConfig(
        eos_token_id=0,
        block_size=BLOCK,
        device_blocks=device_blocks,
        max_generations=max_generations,
    )
    return SimulatedEngine(VirtualClock(), LatencyModel(), lambda p: [3] * 6, config)


@pytest.fixture(params=["torch", "sim"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make(kind: str, path: Path, device_blocks: int = 6, max_generations: int = 8) -> PagedEngine:
    factory = torch_engine if kind == "torch" else sim_engine
    return factory(path, device_blocks, max_generations)


def test_a_step_preempts_the_least_urgent_not_the_latest_admitted(
    kind: str, qwen2_path: Path
) -> None:
    engine = make(kind, qwen2_path)
    for gen_id in (1, 2, 3):  # 2 blocks each: the device is full
        engine.add(gen_id, prompt(gen_id), PARAMS)
    engine.set_ranking([3, 1, 2])  # the last admitted is the most urgent
    engine.step([1, 2, 3])  # prefill; each then needs a third block to decode
    outputs = engine.step([1, 2, 3])
    assert engine.generation(2).kv is KvLocation.HOST  # the least urgent made room
    assert engine.generation(3).kv is KvLocation.DEVICE
    assert 3 in {o.gen_id for o in outputs}


def test_add_reclaims_the_least_urgent_suspended_generation(kind: str, qwen2_path: Path) -> None:
    engine = make(kind, qwen2_path, device_blocks=6)
    for gen_id in (1, 2, 3):
        engine.add(gen_id, prompt(gen_id), PARAMS)
    engine.step([1, 2, 3])
    engine.abort(3)
    for gen_id in (1, 2):  # their robots move; both keep their KV
        engine.suspend(gen_id, HandlingStrategy.PRESERVE)
    engine.set_ranking([2, 4, 1])  # 1, admitted first, is now the least urgent
    engine.add(4, prompt(4) + prompt(5), PARAMS)  # 4 blocks: one suspended must go
    assert engine.generation(1).kv is KvLocation.HOST
    assert engine.generation(2).kv is KvLocation.DEVICE


def test_unranked_generations_go_first_most_recent_first(kind: str, qwen2_path: Path) -> None:
    engine = make(kind, qwen2_path)
    for gen_id in (1, 2, 3):
        engine.add(gen_id, prompt(gen_id), PARAMS)
    engine.step([1, 2, 3])
    outputs = engine.step([1, 2, 3])  # no ranking: the last listed is preempted
    assert engine.generation(3).kv is KvLocation.HOST
    assert {o.gen_id for o in outputs} == {1, 2}


def test_a_step_longer_than_max_generations_is_refused(kind: str, qwen2_path: Path) -> None:
    engine = make(kind, qwen2_path, device_blocks=16, max_generations=2)
    for gen_id in (1, 2, 3):
        engine.add(gen_id, prompt(gen_id), PARAMS)
    with pytest.raises(EngineError, match="max_generations=2"):
        engine.step([1, 2, 3])
    assert engine.generation(3).num_computed == 0  # nothing ran
    assert {o.gen_id for o in engine.step([3, 1])} == {3, 1}


def test_a_decode_preempts_a_less_urgent_one_in_its_step_before_an_urgent_waiting_one(
    kind: str, qwen2_path: Path
) -> None:
    """An urgent generation waits with its KV kept while two less urgent ones decode:
    room for the first of them comes from the other, not from the urgent one's cache,
    and the other's comeback does not take it either (the iteration runs anyway)."""
    engine = make(kind, qwen2_path, device_blocks=6)
    for gen_id in (1, 2, 3):  # 2 blocks each: the device is full
        engine.add(gen_id, prompt(gen_id), PARAMS)
    engine.step([1, 2, 3])  # prefill; each then needs a third block to decode
    engine.suspend(1, HandlingStrategy.PRESERVE)  # its robot moves: it keeps its KV
    engine.set_ranking([1, 2, 3])  # the waiting one is the most urgent
    outputs = engine.step([2, 3])
    assert engine.generation(1).kv is KvLocation.DEVICE  # kept
    assert engine.generation(3).kv is KvLocation.HOST  # the least urgent made room
    assert {o.gen_id for o in outputs} == {2}
    engine.abort(2)  # its room goes back: the least urgent runs again, the urgent kept
    assert {o.gen_id for o in engine.step([3])} == {3}
    assert engine.generation(1).kv is KvLocation.DEVICE


def test_a_generation_that_outgrows_the_device_fails_alone(kind: str, qwen2_path: Path) -> None:
    """Preempting every other one cannot make room for a generation longer than the
    device: it is ended alone, with its reason (`GenerationsFailed`), and the one it
    pushed aside while it grew decodes to its end."""
    engine = make(kind, qwen2_path, device_blocks=4)
    engine.add(1, prompt(1) + prompt(2)[:4], SamplingParams(max_tokens=8))  # 3 blocks
    engine.add(2, [7, 8, 9], SamplingParams(max_tokens=10))  # 1 block, then 3
    engine.set_ranking([1, 2])
    out, raised = drive_to_end(engine, [1, 2])  # returns once 2 decoded to its end
    failed = {g: reason for exc in raised for g, reason in exc.failures.items()}
    assert list(failed) == [1]
    assert "does not fit in device KV memory" in failed[1]
    assert "4 blocks of 4 tokens" in failed[1]
    with pytest.raises(UnknownGeneration):  # ended: the engine holds it no more
        engine.generation(1)
    assert out[2]  # pushed aside while 1 grew, then decoded on
    assert len(out[1]) == 5  # 16 tokens fill the device; the 17th's KV cannot
