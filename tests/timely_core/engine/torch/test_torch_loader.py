"""Checkpoint loading: any transformers config layout, clear errors for the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from timely_core.engine.torch.loader import CheckpointError, load_model, load_tokenizer
from timely_core.engine.torch.model.config import ModelConfig


def _edit_config(path: Path, **changes: Any) -> None:
    config_path = path / "config.json"
    raw = json.loads(config_path.read_text())
    raw.update(changes)
    config_path.write_text(json.dumps(raw))


def test_engine_loads_qwen2_biases_and_tied_llama(qwen2_path: Path, llama_path: Path) -> None:
    qwen = load_model(qwen2_path)
    assert qwen.weights.layers[0].qkv_bias is not None
    assert qwen.weights.layers[0].o_bias is None
    llama = load_model(llama_path)
    assert torch.equal(llama.weights.lm_head, llama.weights.embed.t())
    assert llama.weights.layers[0].qkv_bias is None


def test_engine_reads_legacy_rope_fields() -> None:
    raw = {
        "model_type": "llama",
        "vocab_size": 10,
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "rope_theta": 500000.0,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "eos_token_id": [1, 2],
    }
    config = ModelConfig.from_hf(raw)
    assert config.rope.rope_type == "linear" and config.rope.rope_theta == 500000.0
    assert config.num_key_value_heads == 2 and config.head_dim == 4
    assert config.eos_token_ids == (1, 2)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_type": "gpt2"}, "model_type 'gpt2' is not supported"),
        ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "rope type 'yarn'"),
        ({"num_key_value_heads": 3}, "not a multiple of num_key_value_heads"),
        ({"use_sliding_window": True}, "sliding-window"),
    ],
)
def test_engine_unsupported_checkpoints_fail_clearly(
    tmp_path: Path, qwen2_path: Path, changes: dict[str, object], message: str
) -> None:
    for file in qwen2_path.iterdir():
        (tmp_path / file.name).write_bytes(file.read_bytes())
    _edit_config(tmp_path, **changes)
    with pytest.raises(CheckpointError, match=message):
        load_model(tmp_path)


def test_engine_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match=r"no config\.json"):
        load_model(tmp_path)
    with pytest.raises(CheckpointError, match=r"no tokenizer\.json"):
        load_tokenizer(tmp_path)


def test_engine_load_tokenizer_returns_tokenizers_tokenizer(tmp_path: Path) -> None:
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "go": 1, "up": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, Tokenizer)
    assert loaded.encode("go up").ids == [1, 2]
