"""Registered prefixes and content-hash prefix caching reuse KV without changing
a single output token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_testkit import check_memory, drive, hf_greedy, random_prompts

from timely_core.engine.protocol import EngineError, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

NEW = 10
PARAMS = SamplingParams(max_tokens=NEW)


def _engine(path: Path, **kw: Any) -> TorchEngine:
    return TorchEngine(
        path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22, **kw)
    )


@pytest.mark.parametrize("prefix_len", [37, 40])  # partial last block, block-aligned
def test_engine_registered_prefix_gives_identical_output(qwen2_path: Path, prefix_len: int) -> None:
    prefix = [(7 * i + 5) % 500 + 4 for i in range(prefix_len)]
    tails = random_prompts(3, 5, 30)
    prompts = [prefix + tail for tail in tails] + [list(prefix)]  # one prompt == prefix
    engine = _engine(qwen2_path)
    engine.register_prefix("drone", prefix)
    check_memory(engine)
    pinned = engine.memory().pinned_prefix_blocks
    assert pinned == -(-prefix_len // 8)
    got = drive(engine, prompts, PARAMS, arrivals=[0, 0, 2, 3, 5, 6], prefix_id="drone")
    assert got == [hf_greedy(qwen2_path, p, NEW) for p in prompts]
    check_memory(engine)
    report = engine.memory()
    assert report.device_blocks_total - report.device_blocks_free == pinned
    engine.unregister_prefix("drone")
    check_memory(engine)
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total


def test_engine_prefix_skips_prefill_of_the_prefix(qwen2_path: Path) -> None:
    prefix = [(11 * i) % 500 + 4 for i in range(45)]
    engine = _engine(qwen2_path)
    engine.register_prefix("arm", prefix)
    engine.add(0, [*prefix, 9, 10, 11], PARAMS, prefix_id="arm")
    state = engine.generation(0)
    assert state.num_computed == len(prefix)
    # the partial last block was copied, not shared: writes cannot corrupt the prefix
    assert state.block_table[5] not in engine.blocks.prefixes["arm"].blocks
    assert state.block_table[:5] == engine.blocks.prefixes["arm"].blocks[:5]
    check_memory(engine)


def test_engine_content_hash_cache_hits_after_finish(llama_path: Path) -> None:
    prompt = random_prompts(9, 1, 2)[0] + [(5 * i) % 500 + 4 for i in range(70)]
    engine = _engine(llama_path)
    first = drive(engine, [prompt], PARAMS)
    engine.add(1, prompt, PARAMS)
    assert engine.generation(1).num_computed == (len(prompt) - 1) // 8 * 8
    engine.abort(1)
    second = drive(engine, [prompt], PARAMS)
    assert first == second == [hf_greedy(llama_path, prompt, NEW)]
    check_memory(engine)


def test_engine_reregistering_replaces_and_unknown_prefix_is_refused(qwen2_path: Path) -> None:
    engine = _engine(qwen2_path)
    engine.register_prefix("p", list(range(4, 30)))
    engine.register_prefix("p", list(range(40, 60)))
    assert engine.blocks.prefixes["p"].token_ids == list(range(40, 60))
    check_memory(engine)
    with pytest.raises(ValueError, match="does not start with prefix 'p'"):
        engine.add(0, list(range(4, 40)), PARAMS, prefix_id="p")
    with pytest.raises(EngineError, match="no registered prefix 'q'"):
        engine.add(0, list(range(4, 40)), PARAMS, prefix_id="q")
    with pytest.raises(EngineError, match="no registered prefix 'q'"):
        engine.unregister_prefix("q")
