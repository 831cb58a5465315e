"""Greedy outputs of the torch engine equal transformers' `generate`, token for
token, for batches of mixed-length prompts arriving at different iterations."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from engine_testkit import check_memory, drive, hf_greedy, random_prompts, save_checkpoint

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

NEW_TOKENS = 12


@pytest.mark.parametrize("batch", [1, 5, 16])
def test_engine_qwen2_batches_match_hf(qwen2_path: Path, batch: int) -> None:
    prompts = random_prompts(batch, batch, 120)
    arrivals = [random.Random(batch + i).randrange(0, 8) for i in range(batch)]
    engine = TorchEngine(
        qwen2_path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    got = drive(engine, prompts, SamplingParams(max_tokens=NEW_TOKENS), arrivals)
    assert got == [hf_greedy(qwen2_path, p, NEW_TOKENS) for p in prompts]
    check_memory(engine)
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total


def test_engine_llama_tied_chunked_prefill_matches_hf(llama_path: Path) -> None:
    """A token budget smaller than the prompts forces prefill in chunks mixed with
    other generations' decodes."""
    prompts = random_prompts(7, 6, 200)
    config = EngineConfig(
        block_size=16, device_kv_bytes=2**22, host_kv_bytes=2**22, max_batched_tokens=37
    )
    engine = TorchEngine(llama_path, config)
    got = drive(engine, prompts, SamplingParams(max_tokens=NEW_TOKENS), [0, 0, 1, 3, 3, 9])
    assert got == [hf_greedy(llama_path, p, NEW_TOKENS) for p in prompts]


def test_engine_llama3_rope_scaling_matches_hf(tmp_path: Path) -> None:
    rope = {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    path = save_checkpoint(tmp_path, "llama", seed=3, rope_parameters=rope)
    prompts = random_prompts(11, 3, 150)
    engine = TorchEngine(
        path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    got = drive(engine, prompts, SamplingParams(max_tokens=NEW_TOKENS), [0, 1, 2])
    assert got == [hf_greedy(path, p, NEW_TOKENS) for p in prompts]


def test_engine_stops_at_eos_and_stop_tokens(qwen2_path: Path) -> None:
    prompt = random_prompts(5, 1, 40)[0]
    reference = hf_greedy(qwen2_path, prompt, NEW_TOKENS)[len(prompt) :]
    engine = TorchEngine(
        qwen2_path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    stop = reference[4]
    params = SamplingParams(max_tokens=NEW_TOKENS, stop_token_ids=(stop,))
    got = drive(engine, [prompt], params)[0][len(prompt) :]
    assert got == reference[: reference.index(stop) + 1]
    assert engine.eos_token_id == 3
