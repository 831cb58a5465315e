"""KV memory accounting and out-of-memory behaviour: refuse with OutOfKvMemory,
never crash, free everything on finish and abort."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_testkit import check_memory, random_prompts

from timely_core.engine.protocol import (
    HandlingStrategy,
    OutOfKvMemory,
    SamplingParams,
    UnknownGeneration,
)
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

PARAMS = SamplingParams(max_tokens=6)


def _engine(path: Path, blocks: int) -> TorchEngine:
    probe = TorchEngine(path, EngineConfig(block_size=8, device_kv_bytes=2**20, host_kv_bytes=0))
    config = EngineConfig(
        block_size=8, device_kv_bytes=blocks * probe.bytes_per_block, host_kv_bytes=2**20
    )
    return TorchEngine(path, config)


def test_engine_refuses_what_does_not_fit_and_changes_nothing(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, blocks=10)
    assert engine.memory().device_blocks_total == 10
    assert engine.can_admit(80) and not engine.can_admit(81)
    engine.add(0, list(range(4, 44)), PARAMS)  # 5 blocks
    assert not engine.can_admit(41)
    before = engine.memory()
    with pytest.raises(OutOfKvMemory, match="generation 1 needs 6 free KV blocks"):
        engine.add(1, list(range(4, 48)), PARAMS)
    assert engine.memory() == before
    with pytest.raises(UnknownGeneration):
        engine.token_ids(1)
    check_memory(engine)


def test_engine_resume_refused_when_device_is_full(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, blocks=10)
    engine.add(0, list(range(4, 44)), PARAMS)
    engine.step([0])
    engine.suspend(0, HandlingStrategy.SWAP)
    engine.add(1, list(range(100, 170)), PARAMS)  # 9 blocks: only 1 left
    with pytest.raises(OutOfKvMemory):
        engine.resume(0)
    check_memory(engine)
    engine.abort(1)
    engine.resume(0)
    check_memory(engine)


def test_engine_frees_everything_on_finish_and_abort(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, blocks=64)
    engine.register_prefix("robot", list(range(4, 30)))
    prompts = [list(range(4, 30)) + tail for tail in random_prompts(4, 4, 20)]
    for i, prompt in enumerate(prompts):
        engine.add(i, prompt, PARAMS, prefix_id="robot")
    engine.step([0, 1, 2, 3])
    engine.suspend(2, HandlingStrategy.SWAP)
    engine.suspend(3, HandlingStrategy.PRESERVE)
    check_memory(engine)
    engine.abort(2)
    engine.abort(3)
    live = [0, 1]
    while live:
        for o in engine.step(live):
            if o.finished:
                live.remove(o.gen_id)
        check_memory(engine)
    report = engine.memory()
    assert report.device_blocks_total - report.device_blocks_free == report.pinned_prefix_blocks
    assert report.host_blocks_free == report.host_blocks_total
    with pytest.raises(UnknownGeneration, match="no live generation 2"):
        engine.abort(2)


def test_engine_rejects_bad_input_with_named_field(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, blocks=16)
    with pytest.raises(ValueError, match="prompt of generation 0 is empty"):
        engine.add(0, [], PARAMS)
    with pytest.raises(ValueError, match="token 512 at index 1 is outside"):
        engine.add(0, [5, 512], PARAMS)
    with pytest.raises(ValueError, match="top_p"):
        engine.add(0, [5], SamplingParams(top_p=0))
    with pytest.raises(ValueError, match="temperature"):
        engine.add(0, [5], SamplingParams(temperature=-1))
    with pytest.raises(ValueError, match="less than one KV block"):
        TorchEngine(qwen2_path, EngineConfig(device_kv_bytes=10, host_kv_bytes=0))


def test_engine_failed_reregistration_keeps_the_old_prefix(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, blocks=6)
    engine.register_prefix("robot", list(range(4, 36)))  # 4 blocks
    with pytest.raises(OutOfKvMemory):
        engine.register_prefix("robot", list(range(100, 140)))  # 5 more do not fit
    assert engine.blocks.prefixes["robot"].token_ids == list(range(4, 36))
    check_memory(engine)
    assert engine.memory().pinned_prefix_blocks == 4
