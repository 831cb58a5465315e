"""The planner checkpoints shipped with the package (HF Llama format)."""

from __future__ import annotations

from pathlib import Path

CHECKPOINT_DIR = Path(__file__).resolve().parent


def default_planner_path() -> Path:
    """Directory of the embedded default planner (config.json, model.safetensors,
    tokenizer.json, generation_config.json, MODEL_CARD.md)."""
    return CHECKPOINT_DIR / "planner"
