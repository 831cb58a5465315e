"""Training a variant's LoRA adapter on the base planner with peft.

The base checkpoint is loaded as the training `TinyLlama` (its module names are
HF Llama's, so peft's adapter keys are the ones HF, vLLM and the torch engine
read). The robot's prompt prefix (about 1,900 tokens) runs through the adapter,
as the serving engine runs it, without gradient, every `prefix_every` steps (1:
every batch, exactly the KV it is served with); only the LoRA matrices train.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from pydantic import ValidationError

from robot_models.training.options import OptionError
from robot_models.training.threads import torch_threads
from robot_models.variants.adapter_shape import TARGET_MODULES, AdapterShape
from robot_models.variants.data import VariantData
from robot_models.variants.tuning import TuningRun, load_tuning_base, tune, write_stats

__all__ = ["TARGET_MODULES", "LoraTrainConfig", "train_adapter"]
BASE_NAME = "robot_models/checkpoints/planner"  # recorded in adapter_config.json


@dataclass(frozen=True)
class LoraTrainConfig:
    seed: int = 20240601
    steps: int = 300
    prefix_every: int = 1  # steps between recomputing the prefix KV through the adapter
    batch_size: int = 16
    lr: float = 5e-4
    warmup_steps: int = 20
    rank: int = 8
    alpha: int = 16
    targets: str = ",".join(TARGET_MODULES)  # projections adapted (AdapterShape.targets)
    layers: str = ""  # decoder layers adapted, comma-separated ('': every layer)
    train_examples: int = 1200
    heldout_examples: int = 60
    threads: int = 2


def check_shape(config: LoraTrainConfig, layer_count: int) -> None:
    """OptionError naming the flag of an adapter shape the base cannot take (rank 0, a
    target that is no projection, a layer it lacks), before any data is built."""
    try:
        shape = AdapterShape.from_flags(config.rank, config.alpha, config.targets, config.layers)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "layers"
        raise OptionError(field, first["msg"].removeprefix("Value error, ")) from None
    except ValueError:  # a layer index that is not an integer
        raise OptionError("layers", f"not comma-separated integers: {config.layers!r}") from None
    try:
        shape.check_layers(layer_count)
    except ValueError as error:
        raise OptionError("layers", str(error)) from None


def _name_base(config_path: Path) -> None:
    """Name the HF base checkpoint (peft records None and the training class, which
    has no config of its own); readers load the adapter onto LlamaForCausalLM."""
    record = json.loads(config_path.read_text())
    record["base_model_name_or_path"] = BASE_NAME
    record["auto_mapping"] = None
    config_path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def train_adapter(
    base: Path,
    robot_type: str,
    data: VariantData,
    out_dir: Path,
    config: LoraTrainConfig,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """Train a LoRA adapter of `base` on `data.train`; writes peft's
    adapter_config.json + adapter_model.safetensors (and train_stats.json) to `out_dir`."""
    with torch_threads(config.threads):
        return _train_adapter(base, robot_type, data, out_dir, config, log)


def _train_adapter(
    base: Path,
    robot_type: str,
    data: VariantData,
    out_dir: Path,
    config: LoraTrainConfig,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    shape = AdapterShape.from_flags(config.rank, config.alpha, config.targets, config.layers)
    started = time.monotonic()
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    loaded = load_tuning_base(base, robot_type, data)
    model = loaded.model
    shape.check_layers(len(model.model.layers))
    lora = LoraConfig(
        r=shape.rank,
        lora_alpha=shape.lora_alpha,
        target_modules=list(shape.targets),
        layers_to_transform=list(shape.layers) if shape.layers else None,
        lora_dropout=0.0,
        bias="none",
    )
    peft_model = get_peft_model(model, lora)
    parameters = [p for p in peft_model.parameters() if p.requires_grad]
    trainable = sum(p.numel() for p in parameters)
    log(
        f"{len(loaded.encoded)} train examples, prefix {loaded.prefix.shape[1]} tokens, "
        f"{trainable} trainable LoRA parameters (r={shape.rank}, alpha={shape.lora_alpha}, "
        f"{','.join(shape.targets)}, layers {config.layers or 'all'})"
    )
    run = TuningRun(
        config.steps, config.batch_size, config.lr, config.warmup_steps, config.prefix_every
    )
    # the prefix's KV runs through the adapter, as served
    recent = tune(model, parameters, loaded.encoded, loaded.prefix, loaded.pad_id, run, rng, log)
    out_dir.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(str(out_dir))
    (out_dir / "README.md").unlink(missing_ok=True)  # peft's empty model-card template
    _name_base(out_dir / "adapter_config.json")
    return write_stats(out_dir, asdict(config), config.steps, started, recent, trainable)
