"""A full fine-tune of the base planner's last layers: a fleet variant that changes
whole blocks rather than adding an adapter (the block zoo stores only the blocks it
changed). Every other parameter is frozen, so its tensors stay bit-identical to
the base's; the robot's prompt prefix runs through the current weights every step
(without gradient), as served."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from robot_models.training.hf_format import save_checkpoint
from robot_models.training.model import TinyLlama
from robot_models.training.threads import torch_threads
from robot_models.variants.data import VariantData
from robot_models.variants.tuning import TuningRun, load_tuning_base, tune, write_stats

# Files of the base checkpoint a fine-tune keeps as they are (the weights and the
# configs are written anew).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
# A decoder layer's blocks (the block zoo's units) and their modules in TinyLlama.
LAYER_UNITS = {
    "input_norm": "input_layernorm",
    "attention": "self_attn",
    "post_attention_norm": "post_attention_layernorm",
    "ffn": "mlp",
}


@dataclass(frozen=True)
class FullTuneConfig:
    seed: int = 20240601  # the LoRA variants' seed: the same held-out examples
    layers: int = 1  # the last `layers` decoder layers train
    lm_head: bool = True  # the output layer trains too
    units: str = ",".join(LAYER_UNITS)  # which blocks of those layers train (LAYER_UNITS)
    steps: int = 120
    batch_size: int = 12
    lr: float = 1e-3
    warmup_steps: int = 20
    train_examples: int = 1200
    heldout_examples: int = 60
    threads: int = 2


def check_layers(config: FullTuneConfig, count: int) -> None:
    """ValueError unless `config.layers` fits a base of `count` layers (the commands
    check it before data building, the trainer again on the model)."""
    if not 0 <= config.layers <= count or (config.layers == 0 and not config.lm_head):
        raise ValueError(f"layers must be 1 to {count} (or 0 with lm_head), not {config.layers}")


def check_units(config: FullTuneConfig) -> list[str]:
    """The layer units `config.units` names; ValueError for an unknown one or none."""
    units = [u.strip() for u in config.units.split(",") if u.strip()]
    unknown = [u for u in units if u not in LAYER_UNITS]
    if unknown or (config.layers and not units):
        raise ValueError(f"units {config.units!r}: give one or more of {', '.join(LAYER_UNITS)}")
    return units


def trainable_parameters(model: TinyLlama, config: FullTuneConfig) -> list[torch.nn.Parameter]:
    """Freeze everything but `config.units` of the last `config.layers` layers (and
    lm_head if asked)."""
    count = len(model.model.layers)
    check_layers(config, count)
    units = check_units(config)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    modules: list[torch.nn.Module] = [
        getattr(layer, LAYER_UNITS[u])
        for layer in model.model.layers[count - config.layers :]
        for u in units
    ]
    if config.lm_head:
        modules.append(model.lm_head)
    chosen = [p for m in modules for p in m.parameters()]
    for parameter in chosen:
        parameter.requires_grad_(True)
    return chosen


def full_tune(
    base: Path,
    robot_type: str,
    data: VariantData,
    out_dir: Path,
    config: FullTuneConfig,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """Fine-tune the last layers of `base` on `data.train`; writes an HF Llama
    checkpoint (with the base's tokenizer) and train_stats.json to `out_dir`."""
    with torch_threads(config.threads):
        return _full_tune(base, robot_type, data, out_dir, config, log)


def _full_tune(
    base: Path,
    robot_type: str,
    data: VariantData,
    out_dir: Path,
    config: FullTuneConfig,
    log: Callable[[str], None],
) -> dict[str, float]:
    started = time.monotonic()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    loaded = load_tuning_base(base, robot_type, data)
    if loaded.tied and config.lm_head:
        raise ValueError(f"{base} ties lm_head to the embeddings: it cannot train alone")
    model = loaded.model
    parameters = trainable_parameters(model, config)
    trainable = sum(p.numel() for p in parameters)
    log(
        f"{len(loaded.encoded)} train examples, prefix {loaded.prefix.shape[1]} tokens, "
        f"{trainable} trainable parameters (last {config.layers} layers' {config.units}, "
        f"lm_head {config.lm_head})"
    )
    run = TuningRun(config.steps, config.batch_size, config.lr, config.warmup_steps)
    recent = tune(model, parameters, loaded.encoded, loaded.prefix, loaded.pad_id, run, rng, log)
    save_checkpoint(model, out_dir, loaded.eos_id, loaded.pad_id)
    for name in TOKENIZER_FILES:
        if (base / name).is_file():
            shutil.copyfile(base / name, out_dir / name)
    return write_stats(out_dir, asdict(config), config.steps, started, recent, trainable)
