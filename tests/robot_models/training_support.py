"""A training configuration small enough for a whole run in a test (seconds)."""

from __future__ import annotations

from robot_models.training.loop import TrainConfig


def tiny_config(**overrides: object) -> TrainConfig:
    settings: dict[str, object] = {
        "examples": 40,
        "steps": 3,
        "tail_steps": 2,
        "batch_size": 2,
        "tail_batch_size": 2,
        "warmup_steps": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "vocab_size": 400,
        "lrtrace_repeats": 1,
        "max_positions": 4096,
    }
    settings.update(overrides)
    return TrainConfig(**settings)  # type: ignore[arg-type]
