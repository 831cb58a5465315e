"""The variant training commands refuse bad input in one line before any data is
built or step run (`robot_models/variants/cli.py`, `train.py`, `train_full.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from robot_models.variants import train, train_full
from tests.robot_models.cli_support import refusal

Main = Callable[[list[str] | None], int]


@pytest.fixture(autouse=True)
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any refusal found only after data building would fail here, not train."""

    def started(*_: object, **__: object) -> None:
        raise AssertionError("data building started before the options were checked")

    monkeypatch.setattr(train, "variant_data", started)
    monkeypatch.setattr(train_full, "variant_data", started)


def _commands(tmp_path: Path) -> list[tuple[Main, list[str]]]:
    return [
        (train.main, ["warehouse-drone", "--out-root", str(tmp_path / "out")]),
        (train_full.main, ["warehouse-drone", "--out", str(tmp_path / "out")]),
    ]


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--steps", "0"], "argument --steps: must be at least 1, got 0"),
        (["--batch-size", "0"], "argument --batch-size: must be at least 1, got 0"),
        (["--train-examples", "-3"], "argument --train-examples: must be at least 1, got -3"),
        (["--heldout-examples", "0"], "argument --heldout-examples: must be at least 1"),
        (["--warmup-steps", "-1"], "argument --warmup-steps: must be at least 0, got -1"),
        (["--threads", "0"], "argument --threads: must be at least 1, got 0"),
        (["--lr", "nan"], "argument --lr: must be a finite number above 0, got nan"),
        (["--lr", "0"], "argument --lr: must be a finite number above 0, got 0.0"),
        (["--lr=-inf"], "argument --lr: must be a finite number above 0, got -inf"),
    ],
)
def test_bad_numbers_are_refused_by_flag(
    flags: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for main, argv in _commands(tmp_path):
        assert line in refusal(main, [*argv, *flags], capsys)


def test_prefix_every_of_zero_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["warehouse-drone", "--prefix-every", "0", "--out-root", str(tmp_path)]
    assert "argument --prefix-every: must be at least 1, got 0" in refusal(train.main, argv, capsys)


def test_unknown_variant_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for main in (train.main, train_full.main):
        line = refusal(main, ["ghost", "--no-eval"], capsys)
        assert "error: unknown variant 'ghost'; known: heavy-drone" in line


def test_a_base_that_is_not_a_checkpoint_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "config.json").write_text("{")
    for main, argv in _commands(tmp_path):
        line = refusal(main, [*argv, "--base", str(tmp_path / "nope")], capsys)
        assert f"argument --base: no checkpoint folder {tmp_path / 'nope'}" in line
        line = refusal(main, [*argv, "--base", str(tmp_path / "garbage")], capsys)
        assert "argument --base: checkpoint folder" in line and "has no tokenizer.json" in line


def test_an_output_folder_under_a_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "afile").write_text("x")
    line = refusal(
        train_full.main, ["warehouse-drone", "--out", str(tmp_path / "afile" / "sub")], capsys
    )
    assert f"argument --out: cannot create {tmp_path / 'afile' / 'sub'}" in line
    line = refusal(train.main, ["warehouse-drone", "--out-root", str(tmp_path / "afile")], capsys)
    assert "is a file" in line


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--rank", "0"], "argument --rank: Input should be greater than or equal to 1"),
        (["--targets", "attention"], "argument --targets: 'attention' not a projection"),
        (["--layers", "9"], "argument --layers: adapter layers [9] are not in the base model"),
        (["--layers", "a,b"], "argument --layers: not comma-separated integers: 'a,b'"),
    ],
)
def test_bad_adapter_shapes_are_refused_before_data(
    flags: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["warehouse-drone", "--out-root", str(tmp_path), *flags]
    assert line in refusal(train.main, argv, capsys)


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--layers", "9"], "argument --layers: layers must be 1 to 4"),
        (["--layers=-1"], "argument --layers: layers must be 1 to 4"),
        (["--units", "attn"], "argument --units: units 'attn': give one or more of"),
    ],
)
def test_bad_full_tune_blocks_are_refused_before_data(
    flags: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["warehouse-drone", "--out", str(tmp_path / "out"), *flags]
    assert line in refusal(train_full.main, argv, capsys)
