"""Where each tensor of an HF Llama checkpoint or a peft LoRA adapter belongs in
the block zoo: its block (an architectural unit) and its role in it."""

from __future__ import annotations

import pytest

from timely_core.blocks.partition import PartitionError, block_order, checkpoint_place, lora_place


def test_partition_names_each_tensor_block() -> None:
    assert checkpoint_place("model.layers.3.mlp.up_proj.weight").block == "layers.3.ffn"
    assert checkpoint_place("model.layers.0.self_attn.k_proj.weight").role == "k_proj.weight"
    assert checkpoint_place("model.layers.1.input_layernorm.weight").block == "layers.1.input_norm"
    assert checkpoint_place("model.embed_tokens.weight").block == "embedding"
    assert checkpoint_place("lm_head.weight").block == "lm_head"
    target = lora_place("base_model.model.model.layers.2.mlp.down_proj.lora_B.weight")
    assert (target.place.block, target.base_tensor) == (
        "layers.2.ffn.down_proj.lora",
        "model.layers.2.mlp.down_proj.weight",
    )
    with pytest.raises(PartitionError, match=r"'model\.vision_tower\.weight' is not part"):
        checkpoint_place("model.vision_tower.weight")


def test_blocks_sort_in_the_order_a_token_passes_them() -> None:
    names = ["lm_head", "layers.1.ffn", "norm", "layers.0.attention", "embedding", "layers.0.ffn"]
    assert sorted(names, key=block_order) == [
        "embedding",
        "layers.0.attention",
        "layers.0.ffn",
        "layers.1.ffn",
        "norm",
        "lm_head",
    ]
