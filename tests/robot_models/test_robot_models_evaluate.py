"""`python -m robot_models.evaluate` refuses every option it cannot finish with before
the data is built or a plan decoded: one argparse-style line naming the option,
exit status 2, no traceback (each of these once failed only after the evaluation)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from robot_models import evaluate
from robot_models.checkpoints import default_planner_path
from robot_models.evaluate import main
from tests.robot_models.cli_support import refusal


class WorkStarted(Exception):
    """Raised where the evaluation's work would begin."""


@pytest.fixture(autouse=True)
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the planner or building the data fails the test: the checks come first."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise WorkStarted

    monkeypatch.setattr(evaluate, "ReferencePlanner", refuse)
    monkeypatch.setattr(evaluate, "build_dataset", refuse)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    """A checkpoint folder the checks accept (its weights are never read here)."""
    folder = tmp_path / "planner"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "train_stats.json"):
        shutil.copy(default_planner_path() / name, folder)
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def test_a_missing_checkpoint_is_named_with_its_missing_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(main, ["--checkpoint", str(tmp_path / "nonexistent")], capsys)
    assert f"error: argument --checkpoint: no checkpoint folder {tmp_path / 'nonexistent'}" in line
    (tmp_path / "afile").write_text("x")
    line = refusal(main, ["--checkpoint", str(tmp_path / "afile")], capsys)
    assert "argument --checkpoint: " in line and "is a file, not a checkpoint folder" in line
    (tmp_path / "config.json").write_text("{}")
    line = refusal(main, ["--checkpoint", str(tmp_path)], capsys)
    assert line.endswith("has no tokenizer.json, model.safetensors")


def test_a_checkpoint_trained_on_an_unknown_generator_is_refused(
    checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (checkpoint / "train_stats.json").write_text(json.dumps({"config": {"data": "poems"}}))
    line = refusal(main, ["--checkpoint", str(checkpoint)], capsys)
    assert "argument --checkpoint: " in line and "unknown data generator 'poems'" in line
    (checkpoint / "train_stats.json").write_text("[]")
    line = refusal(main, ["--checkpoint", str(checkpoint)], capsys)
    assert "argument --checkpoint: " in line and "is not a training record" in line
    (checkpoint / "train_stats.json").write_text("{")
    line = refusal(main, ["--checkpoint", str(checkpoint)], capsys)
    assert "train_stats.json is not readable JSON" in line


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_limit_below_one_is_refused(limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    """0 and -1 once meant the full held-out set, silently."""
    line = refusal(main, ["--limit", limit], capsys)
    assert f"error: argument --limit: must be at least 1, got {limit}" in line


@pytest.mark.parametrize("partial", [["--limit", "1"], ["--no-natural"]])
def test_updating_the_card_from_a_partial_evaluation_is_refused(
    partial: list[str], checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(main, ["--checkpoint", str(checkpoint), *partial, "--update-card"], capsys)
    assert "error: argument --update-card: needs the full held-out and natural sets" in line


def test_outputs_and_inputs_are_checked_before_the_evaluation(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--checkpoint", str(checkpoint)]
    line = refusal(main, [*base, "--json", str(tmp_path / "nonexistent_dir" / "o.json")], capsys)
    assert "error: argument --json: cannot write " in line and "no folder" in line
    line = refusal(main, [*base, "--json", str(tmp_path)], capsys)
    assert f"argument --json: {tmp_path} is a folder, not a file" in line
    line = refusal(main, [*base, "--engine-figures", str(tmp_path / "nonexistent.json")], capsys)
    assert f"argument --engine-figures: no file {tmp_path / 'nonexistent.json'}" in line
    (tmp_path / "bad.json").write_text("{")
    line = refusal(main, [*base, "--engine-figures", str(tmp_path / "bad.json")], capsys)
    assert "argument --engine-figures: " in line and "is not readable JSON" in line
    (tmp_path / "other.json").write_text("{}")
    line = refusal(main, [*base, "--engine-figures", str(tmp_path / "other.json")], capsys)
    assert "argument --engine-figures: " in line and "has no 'card' figures" in line


def test_good_options_reach_the_planner(checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "engine.json").write_text(json.dumps({"card": {"valid": 1}}))
    argv = ["--checkpoint", str(checkpoint), "--json", str(tmp_path / "o.json")]
    with pytest.raises(WorkStarted):
        main([*argv, "--engine-figures", str(tmp_path / "engine.json"), "--limit", "1"])
    with pytest.raises(WorkStarted):
        main([*argv, "--update-card"])
