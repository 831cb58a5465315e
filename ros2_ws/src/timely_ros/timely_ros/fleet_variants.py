"""The planner config's fleet variants: each adapter folder found and loaded into the
engine (torch, or vLLM's multi-LoRA in process or on its servers), what does not fit
named as a configuration error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from timely_ros.config import ConfigError, PlannerParams


def resolve_adapter(name: str, path: str) -> Path:
    """An adapter folder; relative paths are taken from the repository root when they
    do not exist relative to the working directory (as model_path)."""
    folder = Path(path)
    if not folder.is_absolute() and not folder.exists():
        from robot_models.checkpoints import CHECKPOINT_DIR

        folder = CHECKPOINT_DIR.parents[1] / folder
    if not folder.is_dir():
        raise ConfigError(f"adapters.{name}: no adapter folder at {path!r} (looked in {folder})")
    return folder


def load_adapters(engine: Any, params: PlannerParams) -> None:
    """Load every configured adapter into `engine` (any engine with `load_adapter`; the
    torch engine also takes a full fine-tune's checkpoint folder). A folder that is not
    a variant of this base model, or one a vLLM server was not started with, is a
    ConfigError naming the adapter and what does not fit."""
    from timely_core.engine.protocol import AdapterError

    for name, path in params.adapters.items():
        folder = resolve_adapter(name, path)
        try:
            engine.load_adapter(name, folder)
        except AdapterError as err:
            raise ConfigError(f"adapters.{name}: {err}") from None


def lora_rank(params: PlannerParams) -> int:
    """The largest rank `r` among the configured adapters (1 when none says): vLLM
    preallocates its LoRA slots at a rank at least this large."""
    ranks = [1]
    for name, path in params.adapters.items():
        config = resolve_adapter(name, path) / "adapter_config.json"
        try:
            rank = json.loads(config.read_text()).get("r")
        except (OSError, ValueError):
            continue  # loading the adapter names what is wrong with it
        if isinstance(rank, int) and rank > 0:
            ranks.append(rank)
    return max(ranks)
