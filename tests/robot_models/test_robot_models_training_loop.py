"""A whole (tiny) training run: data, tokenizer, both curriculum phases, checkpoint."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from robot_models.prompts import prompt_prefix
from robot_models.training.hf_format import load_checkpoint
from robot_models.training.loop import check_run, train, training_data, training_tokenizer
from robot_models.training.options import OptionError
from robot_models.training.recipe import SHIPPED_STAGES
from tests.robot_models.training_support import tiny_config


def test_a_run_writes_a_checkpoint_that_loads_with_its_shape(tmp_path: Path) -> None:
    lines: list[str] = []
    stats = train(tiny_config(), tmp_path, log=lines.append)
    assert stats["steps_done"] == 3
    assert any(" tail " in line for line in lines) and any(" full " in line for line in lines)
    model = load_checkpoint(tmp_path)
    assert model.shape.hidden_size == 32 and model.shape.num_hidden_layers == 1
    weights = dict(model.state_dict())
    assert all(t.device.type == "cpu" and t.dtype == torch.float32 for t in weights.values())
    for name in ("tokenizer.json", "train_stats.json", "MODEL_CARD.md"):
        assert (tmp_path / name).is_file(), name


def test_a_device_that_is_not_a_torch_device_is_refused() -> None:
    with pytest.raises(ValueError, match="'gpu0' is not a torch device"):
        tiny_config(device="gpu0")


def test_an_accelerator_the_machine_lacks_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no cuda device is available"):
        tiny_config(device="cuda")


def test_a_run_with_failure_observations_records_them(tmp_path: Path) -> None:
    stats = train(tiny_config(observations=0.5), tmp_path, log=lambda line: None)
    assert stats["steps_done"] == 3
    recorded = json.loads((tmp_path / "train_stats.json").read_text())
    assert recorded["config"]["observations"] == 0.5


def test_a_run_over_an_evaluated_checkpoint_removes_its_stale_evaluation(tmp_path: Path) -> None:
    """eval.json measured the weights the run overwrites: it goes, and the card the run
    writes says the new weights are not evaluated."""
    (tmp_path / "eval.json").write_text('{"heldout_valid": 999}\n')
    lines: list[str] = []
    train(tiny_config(), tmp_path, log=lines.append)
    assert not (tmp_path / "eval.json").exists()
    assert any(line.startswith("removed ") and "eval.json" in line for line in lines)
    assert "Not evaluated yet" in (tmp_path / "MODEL_CARD.md").read_text()


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"steps": 0}, "steps: must be at least 1, got 0"),
        ({"steps": 2, "tail_steps": 3}, "tail_steps: must be at most steps (2), got 3"),
        ({"batch_size": 0}, "batch_size: must be at least 1, got 0"),
        ({"tail_batch_size": -1}, "tail_batch_size: must be at least 1, got -1"),
        ({"warmup_steps": -1}, "warmup_steps: must be at least 0, got -1"),
        ({"threads": 0}, "threads: must be at least 1, got 0"),
        ({"examples": 0}, "examples: must be at least 1, got 0"),
        ({"extra_examples": -1}, "extra_examples: must be at least 0, got -1"),
        ({"lrtrace_repeats": -1}, "lrtrace_repeats: must be at least 0, got -1"),
        ({"lr": 0.0}, "lr: must be a number above 0, got 0.0"),
        ({"full_lr": float("inf")}, "full_lr: must be a number above 0, got inf"),
        ({"weight_decay": float("nan")}, "weight_decay: must be 0 or more, got nan"),
        ({"answers": float("nan")}, "answers: must be a fraction in [0, 1], got nan"),
        ({"seed": 2**64}, "seed: must be a 64-bit integer"),
        ({"num_attention_heads": 3}, "num_attention_heads: 3 heads must split hidden_size 32"),
        ({"hidden_size": 32, "num_attention_heads": 32}, "into heads of an even width"),
        ({"num_attention_heads": 2, "num_key_value_heads": 3}, "num_key_value_heads: 3 must"),
        ({"data": "poems"}, "data: unknown data generator 'poems'"),
    ],
)
def test_values_the_loop_cannot_run_with_are_refused_when_the_config_is_made(
    overrides: dict[str, object], error: str
) -> None:
    with pytest.raises(OptionError) as refused:
        tiny_config(**overrides)
    assert error in str(refused.value)


def test_every_shipped_recipe_stage_passes_the_checks(tmp_path: Path) -> None:
    for stage in SHIPPED_STAGES:
        stage.check()
        check_run(stage, tmp_path / "out")


def test_positions_the_trained_tokenizer_cannot_fill_are_refused_before_the_first_step(
    tmp_path: Path,
) -> None:
    """Between the bound checked before data building and the tokenizer's real count:
    refused once the tokenizer is trained, before any step."""
    config = tiny_config(max_positions=1800)  # above the bound, below this small vocabulary's
    lines: list[str] = []
    with pytest.raises(OptionError, match="max_positions: 1800 positions cannot hold the drone"):
        train(config, tmp_path, log=lines.append)
    assert not any(line.startswith("step") for line in lines)
    tokenizer = training_tokenizer(training_data(config), config.numbers, config.words, 400)
    longest = max(len(tokenizer.encode(prompt_prefix(t)).ids) for t in ("drone", "arm"))
    with pytest.raises(OptionError, match="cannot hold an LRTrace task"):
        train(replace(config, max_positions=longest + 2), tmp_path, log=lines.append)
    assert not any(line.startswith("step") for line in lines)
    assert not (tmp_path / "model.safetensors").exists()
