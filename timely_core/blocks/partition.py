"""Where a tensor of an HF Llama checkpoint or a peft LoRA adapter belongs: its block
(an architectural unit) and its role inside the block.

Blocks of a checkpoint: `embedding`, per layer `layers.<i>.attention` (q/k/v/o),
`layers.<i>.ffn` (gate/up/down), `layers.<i>.input_norm`,
`layers.<i>.post_attention_norm`, then `norm` (final) and `lm_head`. A LoRA adapter's
delta of one projection (its A and B) is the block `layers.<i>.<unit>.<proj>.lora`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LAYER = re.compile(r"^model\.layers\.(\d+)\.([a-z_]+)\.(.+)$")
_LAYER_UNITS = {
    "self_attn": "attention",
    "mlp": "ffn",
    "input_layernorm": "input_norm",
    "post_attention_layernorm": "post_attention_norm",
}
_TOP = {"model.embed_tokens.": "embedding", "model.norm.": "norm", "lm_head.": "lm_head"}
_LORA = re.compile(
    r"^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.([a-z_]+)\.(lora_[AB])\.weight$"
)


class PartitionError(ValueError):
    """A tensor name outside the layouts the zoo partitions."""


@dataclass(frozen=True, order=True)
class Place:
    """A tensor's block and its name inside the block."""

    block: str
    role: str


def checkpoint_place(tensor: str) -> Place:
    """The block of an HF Llama checkpoint tensor (`model.layers.3.mlp.up_proj.weight`
    -> `layers.3.ffn`, role `up_proj.weight`)."""
    match = _LAYER.match(tensor)
    if match and match.group(2) in _LAYER_UNITS:
        layer, unit, role = match.groups()
        return Place(f"layers.{int(layer)}.{_LAYER_UNITS[unit]}", role)
    for prefix, block in _TOP.items():
        if tensor.startswith(prefix):
            return Place(block, tensor[len(prefix) :])
    raise PartitionError(
        f"tensor {tensor!r} is not part of an HF Llama checkpoint's layout "
        "(model.embed_tokens, model.layers.<i>.{self_attn,mlp,input_layernorm,"
        "post_attention_layernorm}, model.norm, lm_head)"
    )


@dataclass(frozen=True)
class LoraTarget:
    """The base tensor a LoRA factor adapts, and the factor's block and role."""

    place: Place
    base_tensor: str
    factor: str  # lora_A or lora_B


def lora_place(tensor: str) -> LoraTarget:
    """`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight` -> block
    `layers.0.attention.q_proj.lora`, role `lora_A.weight`, adapting
    `model.layers.0.self_attn.q_proj.weight`."""
    match = _LORA.match(tensor)
    if not match:
        raise PartitionError(
            f"tensor {tensor!r} is not a peft LoRA factor of an HF Llama projection "
            "(base_model.model.model.layers.<i>.{self_attn,mlp}.<proj>.lora_{A,B}.weight)"
        )
    layer, unit, proj, factor = match.groups()
    block = f"layers.{int(layer)}.{_LAYER_UNITS[unit]}.{proj}.lora"
    base = f"model.layers.{int(layer)}.{unit}.{proj}.weight"
    return LoraTarget(Place(block, f"{factor}.weight"), base, factor)


def block_order(name: str) -> tuple[int, int, str]:
    """Sort key putting blocks in the order a token passes them."""
    if name == "embedding":
        return (-1, 0, name)
    if name.startswith("layers."):
        parts = name.split(".")
        unit = ("input_norm", "attention", "post_attention_norm", "ffn").index(parts[2])
        return (int(parts[1]), unit, name)
    return (1 << 30, ("norm", "lm_head").index(name) if name in ("norm", "lm_head") else 2, name)
