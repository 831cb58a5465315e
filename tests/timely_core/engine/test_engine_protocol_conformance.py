"""TorchEngine honours the `Engine` protocol's contract details."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from engine_testkit import drive, random_prompts

from timely_core.engine.protocol import Engine, SamplingParams, UnknownGeneration
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

PARAMS = SamplingParams(max_tokens=5)


def _engine(path: Path, **kw: Any) -> TorchEngine:
    return TorchEngine(
        path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22, **kw)
    )


def test_engine_is_an_engine_and_reports_in_caller_order(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path)
    assert isinstance(engine, Engine)
    prompts = random_prompts(41, 3, 30)
    for i, prompt in enumerate(prompts):
        engine.add(i, prompt, PARAMS)
    outputs = engine.step([2, 0, 1])
    assert [o.gen_id for o in outputs] == [2, 0, 1]
    assert all(engine.token_ids(o.gen_id)[-1] == o.token_id for o in outputs)
    with pytest.raises(UnknownGeneration, match="no live generation 7"):
        engine.step([0, 7])


def test_engine_token_budget_splits_prefill_across_iterations(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, max_batched_tokens=16)
    engine.add(0, list(range(4, 44)), PARAMS)  # 40 tokens: 16 + 16 + 8
    assert engine.step([0]) == []
    assert engine.generation(0).num_computed == 16
    assert engine.step([0]) == []
    assert len(engine.step([0])) == 1


def test_engine_prefix_caching_can_be_switched_off(qwen2_path: Path) -> None:
    prompt = list(range(4, 44))
    for caching, cached in ((True, 32), (False, 0)):
        engine = _engine(qwen2_path, enable_prefix_caching=caching)
        engine.add(0, prompt, PARAMS)
        engine.step([0])
        engine.add(1, prompt, PARAMS)
        assert engine.generation(1).num_computed == cached


def test_engine_thread_setting_is_restored_after_a_step(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path, num_threads=1, small_step_threads=1)
    before = torch.get_num_threads()
    engine.add(0, list(range(4, 100)), PARAMS)
    engine.step([0])
    assert torch.get_num_threads() == before


def test_engine_half_precision_halves_kv_bytes_and_is_deterministic(qwen2_path: Path) -> None:
    full = _engine(qwen2_path)
    half = _engine(qwen2_path, dtype="bfloat16")
    assert half.cache.device.dtype == torch.bfloat16
    assert 2 * half.bytes_per_block == full.bytes_per_block
    prompts = random_prompts(43, 3, 40)
    first = drive(half, prompts, PARAMS, [0, 1, 1])
    second = drive(_engine(qwen2_path, dtype="bfloat16"), prompts, PARAMS, [0, 1, 1])
    assert first == second
    assert all(
        len(ids) == len(p) + PARAMS.max_tokens
        for ids, p in zip(first, prompts, strict=True)
        if 3 not in ids
    )
