"""Fleet variants on the in-process vLLM engine (vLLM's multi-LoRA, CPU build): the
shipped LoRA variants and the base in the same iterations give the torch engine's
greedy tokens for each variant, prefixes hold one variant's KV, adapters that do not
fit are refused naming why, and the weights report counts the base once."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from vllm_testkit import (
    SERVED,
    VARIANTS,
    assert_variants_equal_torch,
    robot_prompts,
    torch_with_variants,
)

from timely_core.engine.protocol import AdapterError, EngineError, SamplingParams, UnknownVariant
from timely_core.engine.variants import VariantEngine
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.engine import VllmEngine

GREEDY = SamplingParams(max_tokens=24)


@pytest.fixture(scope="module")
def lora_engine(planner: Path) -> Iterator[VllmEngine]:
    engine = VllmEngine(planner, VllmConfig(max_num_seqs=8, max_loras=2, max_lora_rank=8))
    for name in SERVED:
        engine.load_adapter(name, VARIANTS / name)
    yield engine
    engine.close()  # before the next module builds its own (see VllmEngine.close)


def test_variants_and_base_in_one_batch_equal_the_torch_engine(
    planner: Path, lora_engine: VllmEngine
) -> None:
    assert_variants_equal_torch(planner, lora_engine)


def test_a_prefix_holds_one_variants_kv(lora_engine: VllmEngine) -> None:
    prefixes, _ = robot_prompts()
    prefix = [7, *prefixes["drone"]]  # nothing cached starts like this yet
    lora_engine.register_prefix("drone@heavy", prefix, variant="heavy-drone")
    with pytest.raises(EngineError, match="runs variant 'base' but prefix 'drone@heavy'"):
        lora_engine.add(100, [*prefix, 5], GREEDY, prefix_id="drone@heavy")
    lora_engine.add(101, [*prefix, 5], GREEDY, prefix_id="drone@heavy", variant="heavy-drone")
    lora_engine.add(102, [*prefix, 5], GREEDY)  # the base: vLLM keys its cache by adapter
    lora_engine.step([101, 102])
    assert lora_engine.generation(101).cached_tokens == len(prefix) // 32 * 32
    assert lora_engine.generation(102).cached_tokens == 0
    lora_engine.abort(101)
    lora_engine.abort(102)
    lora_engine.unregister_prefix("drone@heavy")


def test_unknown_variants_and_unfit_adapters_are_named(
    lora_engine: VllmEngine, tmp_path: Path
) -> None:
    with pytest.raises(UnknownVariant, match="unknown variant 'packing'; loaded variants"):
        lora_engine.add(200, [1, 2, 3], GREEDY, variant="packing")
    with pytest.raises(UnknownVariant, match="prefix 'p'"):
        lora_engine.register_prefix("p", [1, 2, 3], variant="packing")
    with pytest.raises(AdapterError, match="already loaded"):
        lora_engine.load_adapter("heavy-drone", VARIANTS / "heavy-drone")
    with pytest.raises(AdapterError, match="'base'"):
        lora_engine.load_adapter("base", VARIANTS / "heavy-drone")
    with pytest.raises(AdapterError, match=r"no adapter_config\.json"):
        lora_engine.load_adapter("empty", tmp_path)
    wide = _rank_16_copy(VARIANTS / "heavy-drone", tmp_path / "wide")
    with pytest.raises(AdapterError, match=r"r=16, above this engine's max_lora_rank=8"):
        lora_engine.load_adapter("wide", wide)
    with pytest.raises(AdapterError, match=r"at most max_loras=2 variants"):
        lora_engine.load_adapter("packing-arm", VARIANTS / "packing-arm")
    assert lora_engine.resident_weights().names() == list(SERVED)  # nothing half-loaded


def test_resident_weights_count_the_base_once(lora_engine: VllmEngine, planner: Path) -> None:
    assert isinstance(lora_engine, VariantEngine)
    weights = lora_engine.resident_weights()
    checkpoint = sum(t.nbytes for t in load_file(str(planner / "model.safetensors")).values())
    assert weights.base_bytes > checkpoint  # the base once, with vLLM's LoRA slots
    reference = torch_with_variants(planner).resident_weights()
    by_name = {v.name: v.nbytes for v in reference.variants}
    assert {v.name: v.nbytes for v in weights.variants} == by_name
    assert weights.total_bytes == weights.base_bytes + sum(by_name.values())


def _rank_16_copy(source: Path, target: Path) -> Path:
    """The adapter padded to rank 16 with zero factors: the same function, r=16."""
    shutil.copytree(source, target)
    config = json.loads((source / "adapter_config.json").read_text())
    rank = int(config["r"])
    tensors = load_file(str(source / "adapter_model.safetensors"))
    padded = {}
    for key, t in tensors.items():
        if "lora_A" in key:  # [r, in]
            padded[key] = torch.cat([t, t.new_zeros(16 - rank, t.shape[1])], dim=0).contiguous()
        else:  # lora_B: [out, r]
            padded[key] = torch.cat([t, t.new_zeros(t.shape[0], 16 - rank)], dim=1).contiguous()
    save_file(padded, str(target / "adapter_model.safetensors"))
    config["r"], config["lora_alpha"] = 16, config["lora_alpha"] * 16 / rank  # same scale
    (target / "adapter_config.json").write_text(json.dumps(config))
    return target
