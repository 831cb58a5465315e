"""Widen a Llama checkpoint's attention heads with zeros, keeping its outputs exact.

vLLM's FlashInfer attention serves heads 64, 128, 256 or 512 wide; the planner's
are 32. Widening a head from d to D = k*d (k whole) changes no output:

- q and k: old dim i of each rotary half goes to new dim k*i of that half. Rotary
  pairs dims (j, j + D/2) at frequency theta^(-2j/D), so new pair k*i turns at
  theta^(-2i/d), old pair i's; the new dims in between hold zeros, which rotate to
  zeros and add nothing to q.k.
- q is scaled by sqrt(D/d): attention divides q.k by sqrt(D) where it divided by
  sqrt(d).
- v and o: v's new dims hold zeros, and o reads the old dims where v put them.

The KV cache per token grows k times: a price for tiny models on GPU hosts only.
LoRA adapters (PEFT) of the checkpoint are widened the same way, so fleet variants
keep working on the widened base.

    python -m robot_models.checkpoints.widen_heads SRC DST --head-dim 64
    python -m robot_models.checkpoints.widen_heads ADAPTER DST --head-dim 64 --base SRC
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

# what each attention projection's head dims are: its rows (q, k, v) or columns (o)
_ROWS = ("q_proj", "k_proj", "v_proj")
_WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors")
WIDENED_FROM = "widened_from.json"
# rotary embeddings whose frequencies depend on nothing but the default ones (others,
# such as YaRN or dynamic NTK, also read the head width, which widening changes)
_EXACT_ROPE = ("default", "linear", "llama3")


class WidenError(ValueError):
    """The folder cannot be widened as asked; the message says why."""


def head_dim_of(config: dict[str, object]) -> int:
    """The heads' width from an HF config: `head_dim`, else hidden / heads."""
    head_dim = config.get("head_dim")
    if isinstance(head_dim, int) and head_dim > 0:
        return head_dim
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        return hidden // heads
    raise WidenError("config.json gives neither head_dim nor hidden_size and num_attention_heads")


def check_rope(config: dict[str, object]) -> None:
    """WidenError unless widening keeps the rotary embedding exact for this config."""
    raw = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = raw.get("rope_type", raw.get("type", "default")) if isinstance(raw, dict) else None
    if rope_type not in _EXACT_ROPE:
        raise WidenError(
            f"rope type {rope_type!r}: its frequencies depend on the head width, so widening "
            f"would change the model (exact for {', '.join(_EXACT_ROPE)})"
        )
    if config.get("partial_rotary_factor", 1.0) != 1.0:
        raise WidenError("a partial rotary embedding (partial_rotary_factor) is not widened")


def new_positions(old: int, new: int) -> torch.Tensor:
    """Where each of a head's `old` dims goes in a head `new` wide (rotary pairs kept)."""
    if old % 2 or new % old or new <= old:
        raise WidenError(
            f"head_dim {old} cannot widen to {new}: the new width must be a whole multiple "
            "(2 or more) of the old, and the old even"
        )
    factor, half = new // old, old // 2
    first = torch.arange(half) * factor
    return torch.cat((first, first + new // 2))


def _widen_dim(
    weight: torch.Tensor, dim: int, heads: int, old: int, new: int, scale: float
) -> torch.Tensor:
    """`weight` with its `dim` (heads * old long) made heads * new long."""
    moved = weight.movedim(dim, 0)
    if moved.shape[0] != heads * old:
        raise WidenError(
            f"a projection has {moved.shape[0]} head dims where {heads} heads of {old} "
            "were expected"
        )
    grouped = moved.reshape(heads, old, *moved.shape[1:])
    wide = grouped.new_zeros(heads, new, *moved.shape[1:])
    wide[:, new_positions(old, new)] = grouped * scale
    return wide.reshape(heads * new, *moved.shape[1:]).movedim(0, dim).contiguous()


def _heads_of(config: dict[str, object], projection: str) -> int:
    key = "num_key_value_heads" if projection in ("k_proj", "v_proj") else "num_attention_heads"
    value = config.get(key, config.get("num_attention_heads"))
    if not isinstance(value, int) or value <= 0:
        raise WidenError(f"config.json lacks {key}")
    return value


def _projection(name: str) -> str | None:
    for projection in (*_ROWS, "o_proj"):
        if f".self_attn.{projection}." in name:
            return projection
    return None


def widen_tensor(
    name: str, weight: torch.Tensor, config: dict[str, object], old: int, new: int
) -> torch.Tensor:
    """One tensor of a checkpoint or PEFT adapter, widened (others returned as they are).

    A base weight [out, in], a bias [out] (Qwen2's q/k/v) and an adapter's lora_B
    [out, r] carry q/k/v's head dims in their rows; o's base weight and its lora_A
    [r, in] in their columns (o's bias is per hidden unit: kept)."""
    projection = _projection(name)
    if projection is None or (projection == "o_proj" and name.endswith(".bias")):
        return weight
    heads = _heads_of(config, projection)
    if projection in _ROWS:
        if ".lora_A." in name:
            return weight
        scale = math.sqrt(new / old) if projection == "q_proj" else 1.0
        return _widen_dim(weight, 0, heads, old, new, scale)
    if ".lora_B." in name:
        return weight
    return _widen_dim(weight, 1, heads, old, new, 1.0)


def _read_json(path: Path) -> dict[str, object]:
    if not path.is_file():
        raise WidenError(f"no {path.name} in {path.parent}")
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise WidenError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise WidenError(f"{path}: not a JSON object")
    return data


def _weights_file(folder: Path) -> Path:
    for name in _WEIGHT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise WidenError(f"{folder} holds neither {' nor '.join(_WEIGHT_FILES)}")


def widen(
    source: Path,
    destination: Path,
    head_dim: int,
    base: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Path:
    """Write `source` (a checkpoint, or with `base` a PEFT adapter of it) to
    `destination` with heads `head_dim` wide; every other file is copied."""
    if destination.exists() and any(destination.iterdir()):
        raise WidenError(f"{destination} exists and is not empty")
    is_adapter = base is not None
    config = _read_json((base if base is not None else source) / "config.json")
    old = head_dim_of(config)
    check_rope(config)
    new_positions(old, head_dim)  # refuses a width it cannot reach before anything is written
    if is_adapter:
        _read_json(source / "adapter_config.json")
    weights_path = _weights_file(source)
    try:
        tensors = load_file(str(weights_path))
    except Exception as exc:  # safetensors raises its own error type for a bad file
        raise WidenError(f"{weights_path}: not readable as safetensors ({exc})") from None
    widened = {name: widen_tensor(name, t, config, old, head_dim) for name, t in tensors.items()}
    changed = sum(widened[name] is not tensors[name] for name in tensors)
    if not changed:
        raise WidenError(f"{weights_path} has no attention projections to widen")
    destination.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file() and item != weights_path and item.name != "config.json":
            shutil.copy2(item, destination / item.name)
    if not is_adapter:
        (destination / "config.json").write_text(
            json.dumps({**config, "head_dim": head_dim}, indent=2) + "\n"
        )
    save_file(widened, str(destination / weights_path.name), metadata={"format": "pt"})
    note = {"source": str(source), "head_dim": old, "widened_to": head_dim}
    (destination / WIDENED_FROM).write_text(json.dumps(note, indent=2) + "\n")
    progress(f"{source} -> {destination}: {changed} projections, heads {old} -> {head_dim} wide")
    return destination


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="checkpoint folder (or PEFT adapter folder)")
    parser.add_argument("destination", type=Path, help="new folder (absent or empty)")
    parser.add_argument("--head-dim", type=int, required=True, help="the new head width")
    parser.add_argument("--base", type=Path, help="for an adapter: the checkpoint it adapts")
    args = parser.parse_args(argv)
    try:
        widen(args.source, args.destination, args.head_dim, args.base, progress=print)
    except (WidenError, OSError) as exc:
        print(f"widen_heads: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
