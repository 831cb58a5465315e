"""Suspend/resume with every handling strategy, and engine-side preemption under
memory pressure, give exactly the uninterrupted output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_testkit import check_memory, drive, random_prompts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timely_core.engine.protocol import (
    FIXED_STRATEGIES,
    EngineError,
    GenerationsFailed,
    HandlingStrategy,
    OutOfKvMemory,
    SamplingParams,
)
from timely_core.engine.sequence import KvLocation
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

NEW = 10
PROMPTS = random_prompts(21, 3, 60)
GREEDY = SamplingParams(max_tokens=NEW)
SAMPLED = SamplingParams(max_tokens=NEW, temperature=0.9, top_p=0.9, seed=5)

BLOCK_BYTES = 2 * 2 * 8 * 2 * 16 * 4  # layers, k/v, block_size, kv_heads, head_dim, fp32

_references: dict[tuple[str, SamplingParams], list[list[int]]] = {}


def _engine(
    path: Path, device_bytes: int = 2**22, host_bytes: int = 2**22, **kw: Any
) -> TorchEngine:
    config = EngineConfig(
        block_size=8, device_kv_bytes=device_bytes, host_kv_bytes=host_bytes, **kw
    )
    return TorchEngine(path, config)


def _reference(path: Path, params: SamplingParams) -> list[list[int]]:
    key = (str(path), params)
    if key not in _references:
        _references[key] = drive(_engine(path), PROMPTS, params)
    return _references[key]


# an event: at iteration `at`, suspend generation `gen` with `strategy` for `pause` steps
events = st.lists(
    st.tuples(
        st.integers(0, 12),
        st.integers(0, len(PROMPTS) - 1),
        st.sampled_from(list(FIXED_STRATEGIES)),
        st.integers(0, 3),
    ),
    max_size=6,
)


@pytest.mark.slow
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    plan=events,
    sampled=st.booleans(),
    host_blocks=st.sampled_from([0, 64]),
    spare_device_blocks=st.sampled_from([1, 3, 1000]),
)
def test_engine_suspend_resume_gives_uninterrupted_output(
    qwen2_path: Path,
    plan: list[tuple[int, int, HandlingStrategy, int]],
    sampled: bool,
    host_blocks: int,
    spare_device_blocks: int,
) -> None:
    """Random suspensions (any strategy, any moment, any pause) on a device pool
    that may be too small for everyone (then the engine also preempts)."""
    params = SAMPLED if sampled else GREEDY
    prompt_blocks = sum(-(-len(p) // 8) for p in PROMPTS)
    engine = _engine(
        qwen2_path,
        device_bytes=(prompt_blocks + spare_device_blocks) * BLOCK_BYTES,
        host_bytes=host_blocks * BLOCK_BYTES,
    )
    out = {i: list(p) for i, p in enumerate(PROMPTS)}
    for i, prompt in enumerate(PROMPTS):
        engine.add(i, prompt, params)
    live, paused = set(out), {}  # paused: gen -> iteration to resume at
    for iteration in range(400):
        for at, gen, strategy, pause in plan:
            if at == iteration and gen in live and gen not in paused:
                engine.suspend(gen, strategy)
                paused[gen] = iteration + pause
                check_memory(engine)
        for gen, until in list(paused.items()):
            if until <= iteration:
                try:
                    engine.resume(gen)
                except OutOfKvMemory:  # a caller retries later; nothing changed
                    check_memory(engine)
                    continue
                del paused[gen]
        runnable = sorted(live - set(paused))
        if not live:
            break
        for o in engine.step(runnable):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.discard(o.gen_id)
        check_memory(engine)
    assert [out[i] for i in range(len(PROMPTS))] == _reference(qwen2_path, params)
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total
    assert engine.memory().host_blocks_free == engine.memory().host_blocks_total


def test_engine_swap_moves_exclusive_blocks_to_host_and_back(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path)
    assert engine.bytes_per_block == BLOCK_BYTES
    engine.add(0, PROMPTS[0], GREEDY)
    engine.step([0])
    blocks = len(engine.generation(0).block_table)
    engine.suspend(0, HandlingStrategy.SWAP)
    assert engine.generation(0).kv is KvLocation.HOST
    assert engine.memory().host_blocks_total - engine.memory().host_blocks_free == blocks
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total
    with pytest.raises(EngineError, match="suspended"):
        engine.step([0])
    engine.resume(0)
    assert engine.generation(0).kv is KvLocation.DEVICE
    check_memory(engine)


def test_engine_swap_without_host_room_falls_back_to_discard(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, host_bytes=0)
    engine.add(0, PROMPTS[0], GREEDY)
    engine.step([0])
    engine.suspend(0, HandlingStrategy.SWAP)
    assert engine.generation(0).strategy is HandlingStrategy.DISCARD
    assert engine.generation(0).kv is KvLocation.NONE


@pytest.mark.parametrize("strategy", ["swap", "discard"])
def test_engine_preempts_under_memory_pressure_without_changing_output(
    qwen2_path: Path, strategy: str
) -> None:
    """Three prompts whose growth cannot all fit: the engine preempts the most
    recently admitted one and brings it back later."""
    prompt_blocks = sum(-(-len(p) // 8) for p in PROMPTS)
    final_blocks = sum(-(-(len(p) + NEW - 1) // 8) for p in PROMPTS)
    assert final_blocks >= prompt_blocks + 3
    engine = _engine(
        qwen2_path, device_bytes=(prompt_blocks + 1) * BLOCK_BYTES, preemption_strategy=strategy
    )
    got = drive(engine, PROMPTS, GREEDY)
    assert engine.timings.steps > NEW  # some generations waited while preempted
    assert got == _reference(qwen2_path, GREEDY)
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total


def test_engine_lifecycle_errors_name_the_generation(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path)
    engine.add(4, PROMPTS[0], GREEDY)
    with pytest.raises(EngineError, match="generation 4 is already live"):
        engine.add(4, PROMPTS[0], GREEDY)
    with pytest.raises(EngineError, match="generation 4 is not suspended"):
        engine.resume(4)
    engine.suspend(4, HandlingStrategy.PRESERVE)
    with pytest.raises(EngineError, match="generation 4 is already suspended"):
        engine.suspend(4, HandlingStrategy.SWAP)
    with pytest.raises(EngineError, match="twice"):
        engine.step([5, 5])


def test_engine_preempts_a_preserved_generation_rather_than_stall(qwen2_path: Path) -> None:
    """Every free block held by a generation suspended with `preserve` (its robot is
    moving): a running generation that must grow swaps it out instead of waiting
    forever, and the suspended one resumes from the host with its output unchanged."""
    prompt_blocks = sum(-(-len(p) // 8) for p in PROMPTS[:2])
    engine = _engine(qwen2_path, device_bytes=prompt_blocks * BLOCK_BYTES)
    engine.add(0, PROMPTS[0], GREEDY)
    engine.add(1, PROMPTS[1], GREEDY)
    out: dict[int, list[int]] = {0: [], 1: []}
    for o in engine.step([0, 1]):  # both prefilled: the device is full
        out[o.gen_id].append(o.token_id)
    engine.suspend(0, HandlingStrategy.PRESERVE)
    for _ in range(3 * NEW):  # bounded: without preempting 0, these steps ran nothing
        for o in engine.step([1]):
            out[1].append(o.token_id)
        if len(out[1]) == NEW:
            break
    assert len(out[1]) == NEW
    assert engine.generation(0).strategy is HandlingStrategy.SWAP
    assert engine.generation(0).kv is KvLocation.HOST
    engine.resume(0)
    while len(out[0]) < NEW:
        (o,) = engine.step([0])
        out[0].append(o.token_id)
    reference = _reference(qwen2_path, GREEDY)
    assert [PROMPTS[i] + out[i] for i in (0, 1)] == reference[:2]
    check_memory(engine)


def test_engine_resume_preempts_other_suspended_generations_only(qwen2_path: Path) -> None:
    """A swapped-out generation resumes by swapping out a preserved one; with the
    device held by a runnable generation instead, it raises and changes nothing."""
    blocks = [-(-len(p) // 8) for p in PROMPTS[:2]]
    engine = _engine(qwen2_path, device_bytes=max(blocks) * BLOCK_BYTES)
    engine.add(0, PROMPTS[0], GREEDY)
    engine.step([0])
    engine.suspend(0, HandlingStrategy.SWAP)
    engine.add(1, PROMPTS[1], GREEDY)
    engine.step([1])
    free_before = engine.memory().device_blocks_free
    with pytest.raises(OutOfKvMemory):  # 1 is runnable: never a victim of a resume
        engine.resume(0)
    assert engine.generation(1).kv is KvLocation.DEVICE
    assert engine.memory().device_blocks_free == free_before
    engine.suspend(1, HandlingStrategy.PRESERVE)
    engine.resume(0)
    assert engine.generation(0).kv is KvLocation.DEVICE
    assert engine.generation(1).kv is KvLocation.HOST
    check_memory(engine)


def test_engine_step_fails_a_generation_that_can_never_fit(qwen2_path: Path) -> None:
    """A generation that outgrows the whole device: a clear error, not an idle loop."""
    blocks = -(-len(PROMPTS[0]) // 8)
    engine = _engine(qwen2_path, device_bytes=blocks * BLOCK_BYTES)
    engine.add(0, PROMPTS[0], SamplingParams(max_tokens=8 * blocks))
    with pytest.raises(GenerationsFailed, match="generation 0 does not fit") as failed:
        for _ in range(8 * blocks):
            engine.step([0])
    assert list(failed.value.failures) == [0] and failed.value.outputs == []
    assert engine.memory().device_blocks_free == blocks  # ended: its KV is free


def test_engine_add_preempts_suspended_generations_never_runnable_ones(qwen2_path: Path) -> None:
    blocks = [-(-len(p) // 8) for p in PROMPTS[:3]]
    engine = _engine(qwen2_path, device_bytes=(blocks[0] + blocks[1]) * BLOCK_BYTES)
    engine.add(0, PROMPTS[0], GREEDY)
    engine.add(1, PROMPTS[1], GREEDY)
    engine.step([0, 1])
    small = min(blocks[0], blocks[1]) * 8
    assert not engine.can_admit(small)  # everything runnable
    with pytest.raises(OutOfKvMemory):
        engine.add(2, PROMPTS[2][:small], GREEDY)
    assert engine.generation(0).kv is KvLocation.DEVICE
    engine.suspend(0, HandlingStrategy.PRESERVE)
    assert engine.can_admit(blocks[0] * 8)
    engine.add(2, PROMPTS[2][: blocks[0] * 8], GREEDY)
    assert engine.generation(0).kv is KvLocation.HOST
    assert engine.generation(1).kv is KvLocation.DEVICE
    check_memory(engine)
