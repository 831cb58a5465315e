"""LoRA variants in the torch engine: the prefix cache never shares KV across
variants, a variant adds only its adapter's bytes, bad input is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from engine_testkit import random_prompts, save_checkpoint
from lora_testkit import PLANNER, hf_merged_greedy, random_adapter
from safetensors.torch import load_file, save_file

from timely_core.engine.protocol import HandlingStrategy, SamplingParams, UnknownVariant
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.lora import AdapterError
from timely_core.engine.variants import ResidentWeights


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("lora_base"), "llama", seed=7)


@pytest.fixture(scope="module")
def adapters(base: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lora_adapters")
    return {name: random_adapter(base, root / name, seed=i) for i, name in enumerate("ab")}


def _engine(base: Path, adapters: dict[str, Path]) -> TorchEngine:
    engine = TorchEngine(
        base, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    for name, path in adapters.items():
        engine.load_adapter(name, path)
    return engine


def test_prefix_cache_keys_blocks_by_variant(base: Path, adapters: dict[str, Path]) -> None:
    engine = _engine(base, adapters)
    prompt = random_prompts(1, 1, 60)[0] + [5] * 40  # several full blocks
    params = SamplingParams(max_tokens=1)
    engine.add(1, prompt, params)
    engine.step([1])  # computed, finished, its full blocks stay cached
    engine.add(2, prompt, params)  # base again: reuses them
    cached = engine.generation(2).num_computed
    assert cached >= 8 * (len(prompt) // 8 - 1)
    base_blocks = set(engine.generation(2).block_table[: cached // 8])
    engine.add(3, prompt, params, variant="a")  # same tokens, other KV: nothing reused
    assert engine.generation(3).num_computed == 0
    assert not base_blocks & set(engine.generation(3).block_table)
    engine.step([2, 3])
    engine.add(4, prompt, params, variant="b")
    assert engine.generation(4).num_computed == 0
    engine.add(5, prompt, params, variant="a")  # a's own cached blocks are found
    assert engine.generation(5).num_computed == cached


def test_registered_prefix_belongs_to_its_variant(base: Path, adapters: dict[str, Path]) -> None:
    engine = _engine(base, adapters)
    prefix = random_prompts(2, 1, 40)[0] + [9] * 24
    engine.register_prefix("robot", prefix, variant="a")
    prompt = [*prefix, 11, 12, 13]
    with pytest.raises(
        ValueError, match="runs variant 'base' but prefix 'robot' holds the KV of variant 'a'"
    ):
        engine.add(1, prompt, SamplingParams(max_tokens=4), prefix_id="robot")
    engine.add(2, prompt, SamplingParams(max_tokens=4), prefix_id="robot", variant="a")
    assert engine.generation(2).num_computed >= 8 * (len(prefix) // 8)
    # decoded over the prefix's cached KV: what transformers gives with the adapter merged
    with_prefix = [o.token_id for _ in range(4) for o in engine.step([2])]
    assert prompt + with_prefix == hf_merged_greedy(base, adapters["a"], prompt, 4)
    engine.add(3, prompt, SamplingParams(max_tokens=4), variant="b")
    assert engine.generation(3).num_computed == 0  # a's prefix blocks are not b's


def test_a_variant_adds_only_its_adapter_bytes(base: Path, adapters: dict[str, Path]) -> None:
    engine = TorchEngine(base, EngineConfig(block_size=8, device_kv_bytes=2**20, host_kv_bytes=0))
    before = engine.resident_weights()
    pointers = [
        engine.model.weights.embed.data_ptr(),
        engine.model.weights.layers[0].qkv.data_ptr(),
    ]
    expected_base = sum(t.nbytes for t in load_file(str(base / "model.safetensors")).values())
    tied = json.loads((base / "config.json").read_text())["tie_word_embeddings"]
    if tied:  # the engine keeps the head as its own [hidden, vocab] copy
        expected_base += engine.model.weights.lm_head.nbytes
    assert (before.base_bytes, before.variants) == (expected_base, ())
    for name, path in adapters.items():
        engine.load_adapter(name, path)
    after = engine.resident_weights()
    assert after.names() == list(adapters)  # in load order
    for variant, path in zip(after.variants, adapters.values(), strict=True):
        file_bytes = sum(
            t.nbytes for t in load_file(str(path / "adapter_model.safetensors")).values()
        )
        assert variant.nbytes == file_bytes  # float32 factors, nothing of the base copied
        assert (variant.kind, variant.source) == ("lora", str(path))
    assert after.base_bytes == before.base_bytes
    assert after.total_bytes == before.base_bytes + after.variant_bytes
    assert [
        engine.model.weights.embed.data_ptr(),
        engine.model.weights.layers[0].qkv.data_ptr(),
    ] == pointers


def test_unknown_variant_is_named(base: Path, adapters: dict[str, Path]) -> None:
    engine = _engine(base, adapters)
    with pytest.raises(
        UnknownVariant,
        match=r"generation 1: unknown variant 'c'; loaded variants: a, b "
        r"\(the base model is variant None\)",
    ):
        engine.add(1, [3, 4, 5], SamplingParams(), variant="c")
    with pytest.raises(UnknownVariant, match="prefix 'p': unknown variant 'c'"):
        engine.register_prefix("p", [3, 4, 5], variant="c")
    assert engine.memory().device_blocks_free == engine.memory().device_blocks_total


def test_adapter_of_another_base_shape_is_refused(
    base: Path, adapters: dict[str, Path], tmp_path: Path
) -> None:
    engine = TorchEngine(base, EngineConfig(block_size=8, device_kv_bytes=2**20, host_kv_bytes=0))
    planner_lora = random_adapter(PLANNER, tmp_path / "planner_lora", seed=1)  # 4 layers, not 2
    with pytest.raises(
        AdapterError, match=r"adapter 'x' .*is for layer 2, the base model has 2 layers"
    ):
        engine.load_adapter("x", planner_lora)
    # same layer count, a wider q_proj input than this base's hidden size
    folder = tmp_path / "wide"
    folder.mkdir()
    (folder / "adapter_config.json").write_text((adapters["a"] / "adapter_config.json").read_text())
    tensors = load_file(str(adapters["a"] / "adapter_model.safetensors"))
    key = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"
    hidden = tensors[key].shape[1]
    tensors[key] = torch.zeros(4, hidden * 2)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    with pytest.raises(
        AdapterError,
        match=rf"layers\.1\.self_attn\.q_proj\.lora_A is \[4, {hidden * 2}\], "
        rf"the base model needs \[4, {hidden}\]",
    ):
        engine.load_adapter("x", folder)
    assert "x" not in engine.adapters
    assert engine.resident_weights() == ResidentWeights(engine.model.weights_nbytes)


def test_bad_adapter_folders_are_named(
    base: Path, adapters: dict[str, Path], tmp_path: Path
) -> None:
    engine = _engine(base, adapters)
    with pytest.raises(AdapterError, match="already loaded"):
        engine.load_adapter("a", adapters["a"])
    with pytest.raises(AdapterError, match="give a name other than '' and 'base'"):
        engine.load_adapter("base", adapters["a"])
    with pytest.raises(AdapterError, match="folder does not exist"):
        engine.load_adapter("z", tmp_path / "missing")
    folder = tmp_path / "dora"
    folder.mkdir()
    config = json.loads((adapters["a"] / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(AdapterError, match="use_dora=True is not supported"):
        engine.load_adapter("z", folder)
    (folder / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(AdapterError, match=r"no adapter_model\.safetensors"):
        engine.load_adapter("z", folder)
    tensors = load_file(str(adapters["a"] / "adapter_model.safetensors"))
    key = next(k for k in tensors if "lora_B" in k)
    del tensors[key]
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    with pytest.raises(AdapterError, match="has lora_A without its pair"):
        engine.load_adapter("z", folder)
    assert set(engine.adapters) == {"a", "b"}
    assert torch.is_tensor(engine.model.weights.embed)


@pytest.mark.parametrize("strategy", [HandlingStrategy.DISCARD, HandlingStrategy.SWAP])
def test_suspended_variant_resumes_on_its_own_kv(
    base: Path, adapters: dict[str, Path], strategy: HandlingStrategy
) -> None:
    """A variant's generation suspended beside a base one of the same prompt comes back
    on its own KV (re-prefilled or swapped in), never on the base's cached blocks."""
    engine = _engine(base, adapters)
    prompt = random_prompts(4, 1, 40)[0] + [7] * 24
    engine.add(1, prompt, SamplingParams(max_tokens=8), variant="a")
    engine.add(2, prompt, SamplingParams(max_tokens=8))
    tokens: dict[int, list[int]] = {1: [], 2: []}
    for _ in range(3):
        for o in engine.step([1, 2]):
            tokens[o.gen_id].append(o.token_id)
    engine.suspend(1, strategy)
    for _ in range(5):
        for o in engine.step([2]):
            tokens[o.gen_id].append(o.token_id)
    engine.resume(1)
    while len(tokens[1]) < 8:
        for o in engine.step([1]):
            tokens[o.gen_id].append(o.token_id)
    assert prompt + tokens[1] == hf_merged_greedy(base, adapters["a"], prompt, 8)
    assert prompt + tokens[2] == hf_merged_greedy(base, None, prompt, 8)
