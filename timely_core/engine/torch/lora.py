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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
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
    "target_parameters": None,
}
# the factor dtypes peft writes; anything else (int8, float8, ...) is refused, not cast
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_ALL_LINEAR = "all-linear"  # peft's shorthand: every linear layer but the output head


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


def read_adapter_config(config_path: Path, where: str) -> dict[str, object]:
    """adapter_config.json checked field by field: a value that would serve garbage
    (NaN or inf alpha, r=True) or change what the factors mean is refused, named."""
    if not config_path.is_file():
        raise AdapterError(f"{where}: no adapter_config.json in {config_path.parent}")
    try:
        config = json.loads(config_path.read_text())
    except OSError as exc:
        raise AdapterError(f"{where}: adapter_config.json cannot be read ({_line(exc)})") from exc
    except ValueError as exc:  # JSONDecodeError, or bytes that are not UTF-8
        raise AdapterError(f"{where}: adapter_config.json is not JSON ({_line(exc)})") from exc
    if not isinstance(config, dict):
        raise AdapterError(f"{where}: adapter_config.json is not a JSON object")
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
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise AdapterError(f"{where}: r={r!r} in adapter_config.json is not a positive integer")
    if (
        not isinstance(alpha, int | float)
        or isinstance(alpha, bool)
        or not math.isfinite(alpha)
        or alpha <= 0
    ):
        raise AdapterError(
            f"{where}: lora_alpha={alpha!r} in adapter_config.json is not a finite number > 0"
        )
    return config


def _line(exc: BaseException) -> str:
    """An exception's text on one line (errors are reported as one line each)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _matcher(config: dict[str, object], where: str) -> Callable[[str], bool]:
    """Whether peft applies this config to a module key (`model.layers.0.self_attn.q_proj`),
    as peft's check_target_module_exists: a list names modules or key suffixes (narrowed
    by layers_to_transform / layers_pattern), a string is a regex the whole key must
    match ('all-linear': every projection), and exclude_modules wins over both."""
    targets = config.get("target_modules")
    if isinstance(targets, str):
        regex = None if targets.lower() == _ALL_LINEAR else _regex(targets, "target_modules", where)
        targeted = _by_regex(regex)
    elif isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets):
        targeted = _by_names(tuple(targets), config, where)
    else:
        raise AdapterError(
            f"{where}: target_modules={targets!r} in adapter_config.json is neither a list of "
            "module names nor a regex string"
        )
    exclude = config.get("exclude_modules")
    if not exclude:
        return targeted
    if isinstance(exclude, str):
        excluded = _by_regex(_regex(exclude, "exclude_modules", where))
    elif isinstance(exclude, list) and all(isinstance(e, str) for e in exclude):
        names = tuple(exclude)

        def excluded(key: str) -> bool:
            return _named(key, names)
    else:
        raise AdapterError(f"{where}: exclude_modules={exclude!r} is neither a list nor a regex")
    return lambda key: targeted(key) and not excluded(key)


def _by_regex(regex: re.Pattern[str] | None) -> Callable[[str], bool]:
    """peft's string form: the whole key matches (None: 'all-linear', every key)."""
    return lambda key: regex is None or regex.fullmatch(key) is not None


def _by_names(
    names: tuple[str, ...], config: dict[str, object], where: str
) -> Callable[[str], bool]:
    """peft's list form: an exact key always; a key suffix only on layers_to_transform."""
    indexes = config.get("layers_to_transform")
    if indexes is None or indexes == []:
        return lambda key: _named(key, names)
    if isinstance(indexes, int) and not isinstance(indexes, bool):
        indexes = [indexes]
    if not isinstance(indexes, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in indexes
    ):
        raise AdapterError(f"{where}: layers_to_transform={indexes!r} is not a list of layers")
    patterns = config.get("layers_pattern") or []
    patterns = [patterns] if isinstance(patterns, str) else patterns
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise AdapterError(f"{where}: layers_pattern={patterns!r} is not a list of names")
    finders = [
        _regex(rf"(?:^|.*?\.){p}\.(?P<idx>\d+)\.", "layers_pattern", where) for p in patterns
    ]
    finders = finders or [re.compile(r".*?\.[^.]*\.(?P<idx>\d+)\.")]  # the first index
    layers = set(indexes)

    def on_layers(key: str) -> bool:
        if key in names:
            return True
        if not _named(key, names):
            return False
        found = next((m for m in (f.match(key) for f in finders) if m is not None), None)
        return found is not None and int(found.group("idx")) in layers

    return on_layers


def _named(key: str, names: tuple[str, ...]) -> bool:
    """A key names a listed module: all of it, or its last dotted parts."""
    return key in names or any(key.endswith(f".{name}") for name in names)


def _regex(pattern: str, field: str, where: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise AdapterError(
            f"{where}: {field}={pattern!r} in adapter_config.json is not a valid regex "
            f"({_line(exc)})"
        ) from exc


def _check_targets(
    config: dict[str, object], covered: set[tuple[int, str]], cfg: ModelConfig, where: str
) -> None:
    """The projections target_modules selects must be the ones the tensors hold (peft
    and vLLM follow target_modules; serving other tensors would be another adapter)."""
    matches = _matcher(config, where)
    targeted = {
        (layer, target)
        for layer in range(cfg.num_hidden_layers)
        for target, (module, _) in TARGETS.items()
        if matches(f"model.layers.{layer}.{module}.{target}")
    }
    if targeted == covered:
        return
    layer, target = min(targeted ^ covered)
    label = f"layers.{layer}.{TARGETS[target][0]}.{target}"
    why = (
        f"{label} has no tensors"
        if (layer, target) in targeted
        else f"{label} has tensors but is not targeted"
    )
    raise AdapterError(
        f"{where}: target_modules={config.get('target_modules')!r} in adapter_config.json "
        f"selects {_projections(targeted, cfg)}, the tensors cover "
        f"{_projections(covered, cfg)} ({why})"
    )


def _projections(modules: set[tuple[int, str]], cfg: ModelConfig) -> str:
    """`[q_proj, o_proj (layers 3)]`: each projection, with its layers unless all."""
    parts = []
    for target in TARGETS:
        layers = sorted(layer for layer, t in modules if t == target)
        if layers:
            every = len(layers) == cfg.num_hidden_layers
            parts.append(target if every else f"{target} (layers {','.join(map(str, layers))})")
    return f"[{', '.join(parts)}]"


def _read_tensors(weights: Path, where: str) -> dict[str, torch.Tensor]:
    """adapter_model.safetensors, a truncated or damaged file named as an AdapterError."""
    try:
        return load_file(str(weights))
    except (SafetensorError, OSError) as exc:
        raise AdapterError(
            f"{where}: adapter_model.safetensors is unreadable ({weights.stat().st_size} "
            f"bytes, truncated or not safetensors?): {_line(exc)}"
        ) from exc


def _check_finite(tensor: torch.Tensor, label: str, where: str, after: str = "") -> None:
    """NaN or inf in a factor would make every plan of this variant garbage."""
    if not bool(torch.isfinite(tensor).all()):
        bad = int((~torch.isfinite(tensor)).sum())
        raise AdapterError(f"{where}: {label} has {bad} NaN or inf values{after}")


def load_adapter(name: str, path: str | Path, cfg: ModelConfig, dtype: torch.dtype) -> LoraAdapter:
    """Read and check a peft LoRA folder against the base model's shapes (AdapterError
    naming the tensor and both shapes on any mismatch). A damaged file, a NaN/inf alpha
    or factor, or target_modules other than the tensors' projections is refused too,
    one line naming the adapter and folder: such an adapter would plan garbage
    reported as success, or differ from what peft and vLLM serve from the folder."""
    check_adapter_name(name)
    folder = Path(path)
    where = f"adapter {name!r} ({folder})"
    if not folder.is_dir():
        raise AdapterError(f"{where}: folder does not exist")
    config = read_adapter_config(folder / "adapter_config.json", where)
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        raise AdapterError(f"{where}: no adapter_model.safetensors")
    return adapter_from(name, folder, config, _read_tensors(weights, where), cfg, dtype, where)


def check_adapter_name(name: str) -> None:
    if not name or name == BASE_VARIANT:
        raise AdapterError(f"adapter name {name!r}: give a name other than '' and 'base'")


def adapter_from(
    name: str,
    source: Path,
    config: dict[str, object],
    tensors: dict[str, torch.Tensor],
    cfg: ModelConfig,
    dtype: torch.dtype,
    where: str,
) -> LoraAdapter:
    """The adapter of a checked `adapter_config.json` (`read_adapter_config`) and its
    factors by peft's tensor names, checked against the base model's shapes; `source`
    is where it was read from (a folder, or a block zoo's manifest)."""
    rank = int(config["r"])  # type: ignore[call-overload]
    alpha = float(config["lora_alpha"])  # type: ignore[arg-type]
    scaling = alpha / (math.sqrt(rank) if config.get("use_rslora") else rank)
    factors: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in tensors.items():
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
        if tensor.dtype not in _FLOAT_DTYPES:
            raise AdapterError(
                f"{where}: tensor {key!r} is {tensor.dtype}, not float16/bfloat16/float32/float64"
            )
        factors.setdefault((layer, target), {})[which] = tensor
    if not factors:
        raise AdapterError(f"{where}: adapter_model.safetensors holds no LoRA tensors")
    _check_targets(config, set(factors), cfg, where)
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
            _check_finite(pair[which], f"{label}.lora_{which}", where)
        a = pair["A"].to(torch.float32).t().to(dtype)
        b = (pair["B"].to(torch.float32) * scaling).t().to(dtype)
        _check_finite(b, f"{label}.lora_B", where, f" once scaled by {scaling:g} in {dtype}")
        _check_finite(a, f"{label}.lora_A", where, f" in {dtype}")
        slot = TARGETS[target][1]
        layers[layer].setdefault(slot, []).append((a, b, slice(first, first + fan_out)))
    return LoraAdapter(name, source, rank, scaling, tuple(_slots(layer, dtype) for layer in layers))


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
