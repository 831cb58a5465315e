"""Block variants' memory and KV: a full fine-tune adds only the bytes of the blocks
where it differs from the base (counted from the files by robot_models' partition),
its other blocks are the base's tensors; its KV is its own in the prefix cache; an
iteration without its rows runs the model as without variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from block_testkit import differing_blocks, full_finetune
from engine_testkit import drive, random_prompts, save_checkpoint
from lora_testkit import PLANNER, VARIANTS, random_adapter

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.model.block_batch import BlockBatch

LATE = {"layers.1.attention", "layers.1.post_attention_norm", "lm_head"}
BLOCK = 8


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("block_memory")
    base = save_checkpoint(root / "base", "llama", seed=4)
    return {
        "base": base,
        "lora": random_adapter(base, root / "lora", seed=5),
        "late": full_finetune(base, root / "late", seed=6, blocks=LATE),
    }


def _engine(base: Path) -> TorchEngine:
    config = EngineConfig(block_size=BLOCK, device_kv_bytes=2**21, host_kv_bytes=0)
    return TorchEngine(base, config)


def test_a_full_finetune_adds_only_its_differing_blocks(fleet: dict[str, Path]) -> None:
    engine = _engine(fleet["base"])
    base_bytes = engine.resident_weights().base_bytes
    lora = engine.load_adapter("lora", fleet["lora"])
    late = engine.load_block_variant("late", fleet["late"])
    weights = engine.resident_weights()
    expected = differing_blocks(fleet["base"], fleet["late"])
    assert set(expected) == LATE
    assert [(v.name, v.kind) for v in weights.variants] == [("lora", "lora"), ("late", "blocks")]
    assert weights.variants[1].nbytes == sum(expected.values())
    assert weights.variants[1].blocks == (
        "layers.1.attention",
        "layers.1.post_attention_norm",
        "lm_head",
    )
    assert weights.base_bytes == base_bytes
    assert weights.total_bytes == base_bytes + lora.nbytes + sum(expected.values())
    # every block it does not own is the base's very tensors
    ours, theirs = late.weights, engine.model.weights
    assert ours.embed is theirs.embed and ours.norm is theirs.norm
    assert ours.lm_head is not theirs.lm_head
    for i, (layer, base_layer) in enumerate(zip(ours.layers, theirs.layers, strict=True)):
        for field, tensor in vars(layer).items():
            owned = i == 1 and field in ("qkv", "o", "post_norm")
            assert (tensor is getattr(base_layer, field)) is (not owned or tensor is None), field


def test_the_shipped_full_finetune_holds_only_layer_3_attention() -> None:
    engine = TorchEngine(PLANNER, EngineConfig(device_kv_bytes=2**20, host_kv_bytes=0))
    folder = VARIANTS / "warehouse-drone-full"
    engine.load_adapter("warehouse-drone-full", folder)
    (variant,) = engine.resident_weights().variants
    expected = differing_blocks(PLANNER, folder)
    assert variant.blocks == ("layers.3.attention",)  # trained with --units attention
    assert set(variant.blocks) == set(expected)
    assert variant.nbytes == sum(expected.values())
    assert variant.nbytes < engine.model.weights_nbytes / 20


def _block_kv(engine: TorchEngine, block: int, layer: int) -> torch.Tensor:
    return engine.cache.device[layer, :, :, block * BLOCK : (block + 1) * BLOCK].clone()


def test_a_prefix_under_a_full_finetune_holds_its_own_kv(fleet: dict[str, Path]) -> None:
    engine = _engine(fleet["base"])
    engine.load_adapter("late", fleet["late"])
    prefix = random_prompts(8, 1, 20)[0][:4] + list(range(40, 60))  # 3 full blocks
    engine.register_prefix("robot", prefix)
    engine.register_prefix("robot@late", prefix, variant="late")
    ours = engine.blocks.prefixes["robot@late"].blocks
    theirs = engine.blocks.prefixes["robot"].blocks
    assert len(ours) == len(theirs) == 3 and not set(ours) & set(theirs)
    for a, b in zip(ours, theirs, strict=True):
        # layer 0 is shared: the same K/V; layer 1's attention is the fine-tune's
        assert torch.equal(_block_kv(engine, a, 0), _block_kv(engine, b, 0))
        assert not torch.allclose(_block_kv(engine, a, 1), _block_kv(engine, b, 1))
    prompt = [*prefix, 7, 8, 9]
    params = SamplingParams(max_tokens=2)
    engine.add(1, prompt, params, variant="late")  # no prefix named: the cache finds its own
    engine.add(2, prompt, params)
    late, base = engine.generation(1), engine.generation(2)
    assert late.num_computed == base.num_computed == len(prefix)
    assert late.block_table[:3] == list(ours) and base.block_table[:3] == list(theirs)
    with pytest.raises(ValueError, match="runs variant 'late' but prefix 'robot' holds"):
        engine.add(3, prompt, params, prefix_id="robot", variant="late")


def test_iterations_without_its_rows_run_as_without_variants(
    fleet: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _engine(fleet["base"])
    plain = _engine(fleet["base"])
    engine.load_adapter("lora", fleet["lora"])
    engine.load_adapter("late", fleet["late"])
    calls: list[tuple[Any, ...]] = []
    forward = engine.model.forward

    def spy(*args: Any) -> torch.Tensor:
        calls.append(args[6:])  # what follows logits_index: the variants' rows
        return forward(*args)

    monkeypatch.setattr(engine.model, "forward", spy)
    prompts = random_prompts(9, 3, 30)
    params = SamplingParams(max_tokens=6)
    assert drive(engine, prompts, params) == drive(plain, prompts, params)
    assert calls and all(extra == () for extra in calls)  # no LoRA, no block rows
    calls.clear()
    drive(engine, prompts, params, variants=["lora", None, "lora"])
    assert calls and all(extra[1] is None for extra in calls)  # LoRA rows only
    calls.clear()
    drive(engine, prompts, params, variants=["late", None, "lora"])
    assert isinstance(calls[0][1], BlockBatch)  # its rows run its blocks
