"""Writing and reading the checkpoint in the Hugging Face Llama layout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from robot_models.training.model import LlamaShape, TinyLlama

EOS_TOKEN = "<eos>"
PAD_TOKEN = "<pad>"


def hf_config(shape: LlamaShape, eos_id: int, pad_id: int) -> dict[str, Any]:
    """config.json of a LlamaForCausalLM with this shape. No BOS is used."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": shape.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": shape.max_position_embeddings,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_theta": shape.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": shape.rope_theta},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "use_cache": True,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "torch_dtype": "float32",
    }


def save_checkpoint(model: TinyLlama, out_dir: Path, eos_id: int, pad_id: int) -> None:
    """config.json, generation_config.json and model.safetensors (fp32)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config = hf_config(model.shape, eos_id, pad_id)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "bos_token_id": eos_id,
        "do_sample": False,
        "max_new_tokens": 256,
    }
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    # A copy of each tensor: with tied embeddings `lm_head.weight` is the embedding
    # matrix, and safetensors refuses shared storage. Saved untied (an equal copy), the
    # checkpoint loads in every Llama loader whether or not it supports tying.
    tensors = {
        name: t.detach().to(device="cpu", dtype=torch.float32).contiguous().clone()
        for name, t in model.state_dict().items()
    }
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})


def shape_from_config(config: dict[str, Any]) -> LlamaShape:
    """The model shape a checkpoint's config.json describes (KeyError if it lacks one)."""
    return LlamaShape(
        vocab_size=config["vocab_size"],
        hidden_size=config["hidden_size"],
        intermediate_size=config["intermediate_size"],
        num_hidden_layers=config["num_hidden_layers"],
        num_attention_heads=config["num_attention_heads"],
        num_key_value_heads=config["num_key_value_heads"],
        max_position_embeddings=config["max_position_embeddings"],
        rms_norm_eps=config["rms_norm_eps"],
        rope_theta=config["rope_theta"],
    )


def has_tied_output(path: Path) -> bool:
    """Whether the checkpoint's output layer equals its embeddings (how a tied model is
    saved), read without loading the other tensors."""
    with safe_open(str(path / "model.safetensors"), framework="pt") as weights:
        return torch.equal(
            weights.get_tensor("lm_head.weight"), weights.get_tensor("model.embed_tokens.weight")
        )


def load_checkpoint(path: Path, tie_embeddings: bool = False) -> TinyLlama:
    """Rebuild the training model from a saved checkpoint (for evaluation, or to go on
    training it). `tie_embeddings` needs a checkpoint whose output layer equals its
    embeddings, which is how a tied model is saved."""
    shape = shape_from_config(json.loads((path / "config.json").read_text()))
    tensors = load_file(str(path / "model.safetensors"))
    if tie_embeddings and not torch.equal(
        tensors["lm_head.weight"], tensors["model.embed_tokens.weight"]
    ):
        raise ValueError(f"{path} was trained with an untied output layer; it cannot be tied")
    model = TinyLlama(shape, tie_embeddings)
    model.load_state_dict(tensors)
    return model.eval()
