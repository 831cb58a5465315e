"""A whole (tiny) training run: data, tokenizer, both curriculum phases, checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from robot_models.training.hf_format import load_checkpoint
from robot_models.training.loop import train
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
