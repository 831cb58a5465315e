"""`python -m robot_models.train` refuses every option it cannot run with before any
data is built: one argparse-style line naming the option, exit status 2, no
traceback (each of these once trained for minutes, or crashed after data building)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from robot_models.checkpoints import default_planner_path
from robot_models.train import main
from robot_models.training import loop
from robot_models.training.loop import TrainConfig
from tests.robot_models.cli_support import refusal


@pytest.fixture(autouse=True)
def no_data_building(monkeypatch: pytest.MonkeyPatch) -> None:
    """Data building is the first work of a run: reaching it fails the test."""

    def refuse(config: TrainConfig) -> None:
        raise AssertionError("data building started")

    monkeypatch.setattr(loop, "training_data", refuse)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--steps", "0"], "argument --steps: must be at least 1, got 0"),
        (["--steps", "-1"], "argument --steps: must be at least 1, got -1"),
        (["--threads", "0"], "argument --threads: must be at least 1, got 0"),  # the recipe
        (["--batch-size", "0"], "argument --batch-size: must be at least 1, got 0"),
        (["--batch-size", "-1"], "argument --batch-size: must be at least 1, got -1"),
        (["--examples", "0"], "argument --examples: must be at least 1, got 0"),
        (["--save-every", "-1"], "argument --save-every: must be at least 0, got -1"),
        (["--tail-tokens", "0"], "argument --tail-tokens: must be at least 1, got 0"),
        (["--vocab-size", "0"], "argument --vocab-size: must be at least 258, got 0"),
        (["--lr", "-1"], "argument --lr: must be a number above 0, got -1.0"),
        (["--full-lr", "nan"], "argument --full-lr: must be a number above 0, got nan"),
        (["--weight-decay", "-0.1"], "argument --weight-decay: must be 0 or more, got -0.1"),
        (["--observations", "2.0"], "argument --observations: must be a fraction in [0, 1]"),
        (["--steps", "100"], "argument --tail-steps: must be at most steps (100), got 1800"),
        (["--data", "bogus"], "argument --data: invalid choice: 'bogus'"),
        (["--device", "gpu0"], "argument --device: 'gpu0' is not a torch device"),
        (
            ["--num-attention-heads", "7"],
            "argument --num-attention-heads: 7 heads must split hidden_size 192",
        ),
        (
            ["--num-key-value-heads", "4"],
            "argument --num-key-value-heads: 4 must divide num_attention_heads 6",
        ),
        (
            ["--max-positions", "10"],
            "argument --max-positions: 10 positions cannot hold the drone prompt prefix (at least ",
        ),
        (["--words", "spaced"], "argument --max-positions: 2048 positions cannot hold"),
    ],
)
def test_a_bad_value_is_refused_before_data_building(
    options: list[str], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(main, ["--out", str(tmp_path / "out"), *options], capsys)
    assert f": error: {error}" in line


def test_an_accelerator_the_machine_lacks_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    line = refusal(main, ["--out", str(tmp_path), "--device", "cuda"], capsys)
    assert "argument --device: no cuda device is available on this machine" in line


@pytest.mark.parametrize("mode", [["--steps", "2", "--tail-steps", "1"], []], ids=["one", "recipe"])
def test_an_output_that_is_a_file_is_refused_before_data_building(
    mode: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "hostname"
    afile.write_text("x")
    line = refusal(main, ["--out", str(afile), *mode], capsys)
    assert f"argument --out: {afile} exists and is not a folder" in line
    line = refusal(main, ["--out", str(afile / "planner"), *mode], capsys)
    assert f"argument --out: cannot create {afile / 'planner'}: {afile} is a file" in line


def test_a_missing_init_from_checkpoint_is_named_with_its_missing_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["--out", str(tmp_path / "out")]
    line = refusal(main, [*out, "--init-from", str(tmp_path / "nonexistent")], capsys)
    assert f"argument --init-from: no checkpoint folder {tmp_path / 'nonexistent'}" in line
    (tmp_path / "afile").write_text("x")
    line = refusal(main, [*out, "--init-from", str(tmp_path / "afile")], capsys)
    assert "is a file, not a checkpoint folder" in line
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copy(default_planner_path() / "config.json", partial)
    line = refusal(main, [*out, "--init-from", str(partial)], capsys)
    assert line.endswith(
        f"argument --init-from: checkpoint folder {partial} has no tokenizer.json, "
        "model.safetensors, train_stats.json"
    )


def test_an_init_from_checkpoint_without_a_training_record_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(default_planner_path() / name, tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"")  # not read by the checks
    (tmp_path / "train_stats.json").write_text("[]")
    line = refusal(main, ["--out", str(tmp_path / "out"), "--init-from", str(tmp_path)], capsys)
    assert "argument --init-from: " in line and "train_stats.json is not a JSON object" in line


def test_an_init_from_checkpoint_of_another_shape_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--out", str(tmp_path), "--init-from", str(default_planner_path())]
    line = refusal(main, [*argv, "--hidden-size", "96"], capsys)
    assert "has shape hidden_size=192; the options ask hidden_size=96" in line
    line = refusal(main, [*argv, "--tie-embeddings"], capsys)
    assert "argument --tie-embeddings: " in line and "untied output layer" in line


def test_good_options_reach_data_building(tmp_path: Path) -> None:
    """The checks let a sound run through (the fixture stops it at its data)."""
    argv = ["--out", str(tmp_path / "out"), "--steps", "2", "--tail-steps", "2"]
    with pytest.raises(AssertionError, match="data building started"):
        main(argv)
    with pytest.raises(AssertionError, match="data building started"):
        main([*argv, "--init-from", str(default_planner_path())])
