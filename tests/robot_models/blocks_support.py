"""Checkpoints the block-zoo tests build: the shipped planner with chosen tensors
changed, and tiny HF Llama layouts."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from robot_models.checkpoints import default_planner_path


def planner_copy(
    out: Path, change: Callable[[dict[str, torch.Tensor]], None] | None = None
) -> Path:
    """The shipped planner's folder copied to `out`, its tensors passed to `change`
    first (which edits them in place)."""
    shutil.copytree(default_planner_path(), out)
    if change is not None:
        tensors = load_file(str(out / "model.safetensors"))
        change(tensors)
        save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def tiny_llama(out: Path, layers: int = 2, tied: str = "copy", seed: int = 0) -> Path:
    """A 2-layer HF Llama layout of tiny random tensors. `tied`: "copy" (lm_head an
    equal copy of the embeddings), "absent" (no lm_head tensor) or "untied"."""
    generator = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator)

    tensors = {"model.embed_tokens.weight": rand(32, 8), "model.norm.weight": rand(8)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for proj, shape in {"q": (8, 8), "k": (4, 8), "v": (4, 8), "o": (8, 8)}.items():
            tensors[f"{p}self_attn.{proj}_proj.weight"] = rand(*shape)
        for proj, shape in {"gate": (16, 8), "up": (16, 8), "down": (8, 16)}.items():
            tensors[f"{p}mlp.{proj}_proj.weight"] = rand(*shape)
        tensors[f"{p}input_layernorm.weight"] = rand(8)
        tensors[f"{p}post_attention_layernorm.weight"] = rand(8)
    if tied == "copy":
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    elif tied == "untied":
        tensors["lm_head.weight"] = rand(32, 8)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"))
    (out / "config.json").write_text('{"model_type": "llama"}\n')
    return out
