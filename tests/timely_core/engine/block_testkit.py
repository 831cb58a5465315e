"""Block-variant helpers of the engine tests: full fine-tunes of a checkpoint with
chosen blocks changed (HF format), and the bytes of the blocks where a fine-tune
differs from its base, computed from the files with robot_models' own partition."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from timely_core.blocks.partition import checkpoint_place


def full_finetune(base: Path, out: Path, seed: int, blocks: set[str]) -> Path:
    """`base` with every parameter of `blocks` (partition names: embedding,
    layers.1.ffn, lm_head, ...) randomly changed, saved to `out` as transformers does."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    changed = set()
    with torch.no_grad():
        for name, param in model.named_parameters():
            block = checkpoint_place(name).block
            if block in blocks:
                scale = 0.1 if param.dim() == 1 else 0.05
                param.add_(torch.randn(param.shape, generator=generator) * scale)
                changed.add(block)
    assert changed == blocks, f"no parameters for {blocks - changed}"
    model.save_pretrained(out)
    return out


def differing_blocks(base: Path, variant: Path) -> dict[str, int]:
    """Block -> bytes of its tensors, for every block of which some tensor differs."""
    ours = load_file(str(variant / "model.safetensors"))
    theirs = load_file(str(base / "model.safetensors"))
    sizes: dict[str, int] = {}
    differing: set[str] = set()
    for name, tensor in ours.items():
        block = checkpoint_place(name).block
        sizes[block] = sizes.get(block, 0) + tensor.nbytes
        if not torch.equal(tensor, theirs[name]):
            differing.add(block)
    return {block: sizes[block] for block in differing}
