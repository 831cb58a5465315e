"""Variants that write the base's KV share its prefix-cache blocks: a full fine-tune
or LoRA that changes nothing feeding a k/v projection (the last layer's q/o, FFN and
norms, the final norm, lm_head) finds the base's cached and registered prefix blocks,
allocates none of its own for them, and still decodes exactly as HF on its own
checkpoint; anything upstream (layer 0's FFN, the last layer's k_proj) keeps its own
chain."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from block_testkit import full_finetune
from engine_testkit import check_memory, drive, hf_greedy, random_prompts, save_checkpoint
from lora_testkit import hf_merged_greedy

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

BLOCK = 8
HEAD = {"layers.1.post_attention_norm", "layers.1.ffn", "norm", "lm_head"}
PREFIX = list(range(40, 64))  # 3 full blocks
PARAMS = SamplingParams(max_tokens=10)


def _perturb(base: Path, out: Path, seed: int, names: tuple[str, ...]) -> Path:
    """`base` with the named parameters (substrings of HF names) randomly changed."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    changed = 0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if any(n in name for n in names):
                param.add_(torch.randn(param.shape, generator=generator) * 0.05)
                changed += 1
    assert changed == len(names)
    model.save_pretrained(out)
    return out


def _lora(base: Path, out: Path, targets: list[str], layers: list[int]) -> Path:
    """A random peft LoRA adapter of `base` on `targets` of `layers` only."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(len(targets) + 10 * len(layers))
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=targets,
        layers_to_transform=layers,
        init_lora_weights=False,
    )
    get_peft_model(model, config).save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("block_kv")
    base = save_checkpoint(root / "base", "llama", seed=7)
    last_attn = "layers.1.self_attn."
    return {
        "base": base,
        "head": full_finetune(base, root / "head", seed=1, blocks=HEAD),
        "qo": _perturb(base, root / "qo", 2, (last_attn + "q_proj", last_attn + "o_proj")),
        "k": _perturb(base, root / "k", 3, (last_attn + "k_proj",)),
        "ffn0": full_finetune(base, root / "ffn0", seed=4, blocks={"layers.0.ffn"}),
        "lora_late": _lora(base, root / "lora_late", ["q_proj", "o_proj", "down_proj"], [1]),
        "lora_v": _lora(base, root / "lora_v", ["v_proj"], [1]),
        "lora_early": _lora(base, root / "lora_early", ["o_proj"], [0]),
    }


def _engine(fleet: dict[str, Path], *names: str) -> TorchEngine:
    config = EngineConfig(block_size=BLOCK, device_kv_bytes=2**20, host_kv_bytes=0)
    engine = TorchEngine(fleet["base"], config)
    for name in names:
        engine.load_adapter(name, fleet[name])
    return engine


def test_only_variants_that_change_nothing_upstream_of_kv_write_the_base_kv(
    fleet: dict[str, Path],
) -> None:
    names = ("head", "qo", "k", "ffn0", "lora_late", "lora_v", "lora_early")
    engine = _engine(fleet, *names)
    weights = engine.resident_weights()
    shares = {v.name: v.base_kv for v in weights.variants}
    assert shares == {
        "head": True,
        "qo": True,  # owns layer 1's attention, but its k/v columns are the base's
        "k": False,
        "ffn0": False,  # layer 1's input is layer 0's FFN output
        "lora_late": True,
        "lora_v": False,
        "lora_early": False,
    }
    kinds = {v.name: (v.kind, v.blocks) for v in weights.variants}
    assert kinds["qo"] == ("blocks", ("layers.1.attention",))
    assert kinds["head"][0] == "blocks" and set(kinds["head"][1]) == HEAD
    # the memory report is unchanged by the sharing: own bytes, base once
    assert weights.total_bytes == weights.base_bytes + sum(v.nbytes for v in weights.variants)


def test_a_base_kv_variant_hits_the_base_prefix_and_decodes_as_hf(fleet: dict[str, Path]) -> None:
    engine = _engine(fleet, "head", "qo", "lora_late")
    engine.register_prefix("robot", PREFIX)
    base_blocks = engine.blocks.prefixes["robot"].blocks
    free = engine.blocks.num_free_device
    for name in ("head", "qo", "lora_late"):
        engine.register_prefix(f"robot@{name}", PREFIX, variant=name)
        assert engine.blocks.prefixes[f"robot@{name}"].blocks == base_blocks
    assert engine.blocks.num_free_device == free  # no block allocated for their prefixes
    prompts = [[*PREFIX, *tail] for tail in random_prompts(5, 6, 12)]
    variants: list[str | None] = ["head", None, "qo", "lora_late", "head", "qo"]
    # the cache, not a named prefix: each generation finds the base's blocks itself
    for i, (prompt, variant) in enumerate(zip(prompts, variants, strict=True)):
        engine.add(i, prompt, PARAMS, variant=variant)
        state = engine.generation(i)
        assert state.num_computed == len(PREFIX), variant  # cached tokens
        assert state.block_table[:3] == base_blocks, variant
    check_memory(engine)
    for i in range(len(prompts)):
        engine.abort(i)
    outputs = drive(engine, prompts, PARAMS, prefix_id=None, variants=variants)
    for prompt, variant, out in zip(prompts, variants, outputs, strict=True):
        if variant == "lora_late":
            want = hf_merged_greedy(fleet["base"], fleet["lora_late"], prompt, 10)
        else:
            want = hf_greedy(fleet[variant or "base"], prompt, 10)
        assert out == want, variant
    check_memory(engine)


def _block_kv(engine: TorchEngine, block: int, layer: int) -> torch.Tensor:
    return engine.cache.device[layer, :, :, block * BLOCK : (block + 1) * BLOCK].clone()


@pytest.mark.parametrize("variant", ["ffn0", "k", "lora_v", "lora_early"])
def test_a_variant_changing_kv_keeps_its_own_chain(fleet: dict[str, Path], variant: str) -> None:
    engine = _engine(fleet, variant)
    engine.register_prefix("robot", PREFIX)
    free = engine.blocks.num_free_device
    engine.register_prefix("robot@v", PREFIX, variant=variant)
    ours, theirs = engine.blocks.prefixes["robot@v"].blocks, engine.blocks.prefixes["robot"].blocks
    assert not set(ours) & set(theirs) and engine.blocks.num_free_device == free - 3
    for a, b in zip(ours, theirs, strict=True):
        # layer 0's KV reads only the embedding, its input norm and k/v: all the base's
        assert torch.equal(_block_kv(engine, a, 0), _block_kv(engine, b, 0))
        assert not torch.equal(_block_kv(engine, a, 1), _block_kv(engine, b, 1))
    prompt = [*PREFIX, 9, 10]
    engine.add(1, prompt, PARAMS, variant=variant)
    assert engine.generation(1).block_table[:3] == ours  # its own blocks, not the base's
