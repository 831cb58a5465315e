"""LoRA adapters in peft's on-disk format (adapter_config.json +
adapter_model.safetensors), read directly and checked against the base model.

Each adapter is kept as its low-rank factors only, grouped by the engine's fused
projections: per layer and slot (qkv, o, gate_up, down) the A matrices of the
slot's targets side by side ([in, sum of ranks]: one matmul per slot) and each
target's B ([rank, out], scaled by lora_alpha / r) with the output columns it
adds to. Nothing of the base model is copied: a variant costs its factors' bytes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from timely_core.engine.protocol import AdapterError
from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.variants import BASE_VARIANT

_KEY = re.compile(
    r"^(?:base_model\.model\.)?model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$"
)
# target -> (module, slot); the slot's column layout follows loader.py's fusing
TARGETS = {
    "q_proj": ("self_attn", "qkv"),
    "k_proj": ("self_attn", "qkv"),
    "v_proj": ("self_attn", "qkv"),
    "o_proj": ("self_attn", "o"),
    "gate_proj": ("mlp", "gate_up"),
    "up_proj": ("mlp", "gate_up"),
    "down_proj": ("mlp", "down"),
}
# peft options that change what the factors mean; refused rather than misread
_UNSUPPORTED = {
    "use_dora": False,
    "fan_in_fan_out": False,
    "lora_bias": False,
    "use_qalora": False,
    "modules_to_save": None,
    "layer_replication": None,
    "trainable_token_indices": None,
}


@dataclass(frozen=True)
class LoraPart:
    """One target's B factor ([rank, out], scaled) and where it reads and writes."""

    ranks: slice  # its columns of the slot's A product
    b: torch.Tensor
    columns: slice  # the slot output's columns it adds to


@dataclass(frozen=True)
class LoraSlot:
    a: torch.Tensor  # [in, sum of the parts' ranks]
    parts: tuple[LoraPart, ...]


@dataclass(frozen=True)
class LoraAdapter:
    name: str
    path: Path
    rank: int
    scaling: float
    layers: tuple[dict[str, LoraSlot], ...]  # per layer: slot -> factors

    @property
    def nbytes(self) -> int:
        """Bytes of the factors the engine holds for this adapter."""
        return sum(
            slot.a.nbytes + sum(p.b.nbytes for p in slot.parts)
            for layer in self.layers
            for slot in layer.values()
        )


def _shapes(cfg: ModelConfig) -> dict[str, tuple[int, int, int]]:
    """target -> (in features, out features, first output column in its slot)."""
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    h, i = cfg.hidden_size, cfg.intermediate_size
    return {
        "q_proj": (h, q, 0),
        "k_proj": (h, kv, q),
        "v_proj": (h, kv, q + kv),
        "o_proj": (q, h, 0),
        "gate_proj": (h, i, 0),
        "up_proj": (h, i, i),
        "down_proj": (i, h, 0),
    }


def _read_config(folder: Path, where: str) -> dict[str, object]:
    config_path = folder / "adapter_config.json"
    if not config_path.is_file():
        raise AdapterError(f"{where}: no adapter_config.json in {folder}")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as exc:
        raise AdapterError(f"{where}: adapter_config.json is not JSON ({exc})") from exc
    if config.get("peft_type") != "LORA":
        raise AdapterError(f"{where}: peft_type is {config.get('peft_type')!r}, not 'LORA'")
    for option, plain in _UNSUPPORTED.items():
        if config.get(option, plain) not in (plain, False, None, [], {}):
            raise AdapterError(f"{where}: {option}={config[option]!r} is not supported")
    if config.get("bias", "none") != "none":
        raise AdapterError(f"{where}: bias={config['bias']!r} is not supported (only 'none')")
    for pattern in ("rank_pattern", "alpha_pattern"):
        if config.get(pattern):
            raise AdapterError(f"{where}: per-module {pattern} is not supported")
    r, alpha = config.get("r"), config.get("lora_alpha")
    if not isinstance(r, int) or r < 1 or not isinstance(alpha, int | float):
        raise AdapterError(f"{where}: needs a positive integer r and a number lora_alpha")
    return config


def load_adapter(name: str, path: str | Path, cfg: ModelConfig, dtype: torch.dtype) -> LoraAdapter:
    """Read and check a peft LoRA folder against the base model's shapes (AdapterError
    naming the tensor and both shapes on any mismatch)."""
    if not name or name == BASE_VARIANT:
        raise AdapterError(f"adapter name {name!r}: give a name other than '' and 'base'")
    folder = Path(path)
    where = f"adapter {name!r} ({folder})"
    if not folder.is_dir():
        raise AdapterError(f"{where}: folder does not exist")
    config = _read_config(folder, where)
    rank = int(config["r"])  # type: ignore[call-overload]
    alpha = float(config["lora_alpha"])  # type: ignore[arg-type]
    scaling = alpha / (math.sqrt(rank) if config.get("use_rslora") else rank)
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        raise AdapterError(f"{where}: no adapter_model.safetensors")
    factors: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in load_file(str(weights)).items():
        match = _KEY.match(key)
        if match is None or match.group(3) not in TARGETS:
            raise AdapterError(f"{where}: unexpected tensor {key!r} (LoRA of q/k/v/o/gate/up/down)")
        layer, module, target, which = int(match.group(1)), *match.group(2, 3, 4)
        if TARGETS[target][0] != module:
            raise AdapterError(f"{where}: tensor {key!r} puts {target} under {module}")
        if layer >= cfg.num_hidden_layers:
            raise AdapterError(
                f"{where}: tensor {key!r} is for layer {layer}, the base model has "
                f"{cfg.num_hidden_layers} layers"
            )
        factors.setdefault((layer, target), {})[which] = tensor
    if not factors:
        raise AdapterError(f"{where}: adapter_model.safetensors holds no LoRA tensors")
    shapes = _shapes(cfg)
    layers: list[dict[str, list[tuple[torch.Tensor, torch.Tensor, slice]]]] = [
        {} for _ in range(cfg.num_hidden_layers)
    ]
    for (layer, target), pair in sorted(factors.items()):
        label = f"layers.{layer}.{TARGETS[target][0]}.{target}"
        if set(pair) != {"A", "B"}:
            raise AdapterError(f"{where}: {label} has lora_{''.join(pair)} without its pair")
        fan_in, fan_out, first = shapes[target]
        for which, want in (("A", (rank, fan_in)), ("B", (fan_out, rank))):
            got = tuple(pair[which].shape)
            if got != want:
                raise AdapterError(
                    f"{where}: {label}.lora_{which} is {list(got)}, the base model needs "
                    f"{list(want)} (r={rank}, {target} {fan_in} -> {fan_out})"
                )
        a = pair["A"].to(torch.float32).t()
        b = (pair["B"].to(torch.float32) * scaling).t()
        slot = TARGETS[target][1]
        layers[layer].setdefault(slot, []).append((a, b, slice(first, first + fan_out)))
    return LoraAdapter(name, folder, rank, scaling, tuple(_slots(layer, dtype) for layer in layers))


def _slots(
    layer: dict[str, list[tuple[torch.Tensor, torch.Tensor, slice]]], dtype: torch.dtype
) -> dict[str, LoraSlot]:
    slots = {}
    for slot, targets in layer.items():
        parts, start = [], 0
        for a, b, columns in targets:
            r = a.shape[1]
            parts.append(LoraPart(slice(start, start + r), b.to(dtype).contiguous(), columns))
            start += r
        a_cat = torch.cat([a for a, _, _ in targets], dim=1).to(dtype).contiguous()
        slots[slot] = LoraSlot(a_cat, tuple(parts))
    return slots
