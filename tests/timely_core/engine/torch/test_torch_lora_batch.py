"""The two ways a mixed batch adds its LoRA deltas (model/lora_batch.py): the grouped
batched matmul gives the per-adapter loop's sums, with adapters of different ranks,
one that leaves slots and targets out and one on the last layer's FFN only (alone
and beside each other); it is chosen only for balanced rows."""

from __future__ import annotations

from pathlib import Path

import torch
from engine_testkit import save_checkpoint
from lora_testkit import random_adapter

from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.lora import LoraAdapter
from timely_core.engine.torch.model.lora_batch import LoraBatch


def _partial_adapter(base: Path, out: Path) -> Path:
    """Rank 2 on q and v only: no k part, and no o, gate_up or down slot."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(7)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    get_peft_model(model, config).save_pretrained(str(out))
    return out


def _last_layer_ffn_adapter(base: Path, out: Path, layers: int) -> Path:
    """Rank 4 on the last layer's gate, up and down only."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(11)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["gate_proj", "up_proj", "down_proj"],
        layers_to_transform=[layers - 1],
        init_lora_weights=False,
    )
    get_peft_model(model, config).save_pretrained(str(out))
    return out


def _lora(engine: TorchEngine, name: str, path: Path) -> LoraAdapter:
    adapter = engine.load_adapter(name, path)
    assert isinstance(adapter, LoraAdapter)
    return adapter


def test_grouped_deltas_equal_the_per_adapter_loop(tmp_path: Path) -> None:
    base = save_checkpoint(tmp_path / "base", "llama", seed=5)
    engine = TorchEngine(base, EngineConfig(device_kv_bytes=2**20, host_kv_bytes=0))
    a = _lora(engine, "a", random_adapter(base, tmp_path / "a", seed=1, rank=4))
    b = _lora(engine, "b", random_adapter(base, tmp_path / "b", seed=2, rank=8))
    c = _lora(engine, "c", _partial_adapter(base, tmp_path / "c"))
    cfg = engine.model.config
    d = _lora(engine, "d", _last_layer_ffn_adapter(base, tmp_path / "d", cfg.num_hidden_layers))
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    shapes = {  # slot -> (in, out)
        "qkv": (cfg.hidden_size, q + 2 * kv),
        "o": (q, cfg.hidden_size),
        "gate_up": (cfg.hidden_size, 2 * cfg.intermediate_size),
        "down": (cfg.intermediate_size, cfg.hidden_size),
    }
    none: LoraAdapter | None = None
    # decoding rows of four variants beside base rows, one variant with two rows
    segments = [(a, 1), (none, 1), (b, 1), (c, 1), (d, 1), (a, 1), (b, 2), (none, 1), (c, 1)]
    grouped = LoraBatch.from_segments(segments)
    assert grouped is not None and grouped.is_grouped
    # and c beside d: every slot is held by one of them alone
    pair = LoraBatch.from_segments([(c, 2), (d, 2)])
    assert pair is not None and pair.is_grouped
    torch.manual_seed(0)
    for batch, base_rows in ((grouped, [1, 8]), (pair, [])):
        loop = LoraBatch(batch.groups)
        rows = sum(n for _, n in segments) if batch is grouped else 4
        for layer in range(cfg.num_hidden_layers):
            for slot, (fan_in, fan_out) in shapes.items():
                x = torch.randn(rows, fan_in)
                start = torch.randn(rows, fan_out)
                expected, got = start.clone(), start.clone()
                loop.add(expected, x, layer, slot)
                batch.add(got, x, layer, slot)
                torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
                assert torch.equal(got[base_rows], start[base_rows])  # base rows untouched


def test_uneven_or_single_adapter_rows_take_the_loop(tmp_path: Path) -> None:
    base = save_checkpoint(tmp_path / "base", "llama", seed=5)
    engine = TorchEngine(base, EngineConfig(device_kv_bytes=2**20, host_kv_bytes=0))
    a = _lora(engine, "a", random_adapter(base, tmp_path / "a", seed=1))
    b = _lora(engine, "b", random_adapter(base, tmp_path / "b", seed=2))
    one_prefill = LoraBatch.from_segments([(a, 1), (b, 1), (a, 40)])  # a: 41 rows, b: 1
    assert one_prefill is not None and not one_prefill.is_grouped
    single = LoraBatch.from_segments([(a, 3), (None, 2), (a, 1)])
    assert single is not None and not single.is_grouped
    balanced = LoraBatch.from_segments([(a, 3), (b, 2)])
    assert balanced is not None and balanced.is_grouped
