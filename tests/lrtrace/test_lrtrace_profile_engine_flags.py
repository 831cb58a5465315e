"""`lrtrace profile-engine` refuses every flag it would fail on after minutes of
measuring (a service load out of range, a prefix longer than the model's context)
before it loads the engine, and writes into the current directory by default, never
over a committed profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lrtrace.cli import _parser, main
from lrtrace.engine_profile_cli import checked_flags
from lrtrace.profiles import PROFILE_DIR

SHAPE = {
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "hidden_size": 64,
    "max_position_embeddings": 1024,
    "vocab_size": 256,
}


@pytest.fixture
def checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkpoint's config, and no engine: every check must come before loading one."""
    from timely_core.engine.torch import engine

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the engine was loaded")

    monkeypatch.setattr(engine, "TorchEngine", refuse)
    (tmp_path / "config.json").write_text(json.dumps(SHAPE))
    return tmp_path


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--service-duration", "1e9"], "--service-duration 1e+09: a number of seconds"),
        (["--service-duration", "nan"], "--service-duration nan: a number of seconds"),
        (["--service-duration", "-1"], "--service-duration -1: a number of seconds"),
        (["--service-eps", "nan"], "--service-eps nan: a number of events per second"),
        (["--service-eps", "0"], "--service-eps 0: a number of events per second"),
        (["--service-eps", "5000"], "--service-eps 5000: Input should be less than"),
        (
            ["--service-eps", "1000", "--service-duration", "3600"],
            "--service-eps 1000 with --service-duration 3600: about 16,200,000 tasks",
        ),
        (["--prefix-tokens", "10000000"], "--prefix-tokens 10000000: at most 970 for"),
    ],
)
def test_flags_are_refused_before_the_engine_loads(
    tmp_path: Path,
    checkpoint: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    named: str,
) -> None:
    argv = ["profile-engine", "--model", str(checkpoint), "--prefix-tokens", "16", *flags]
    assert main([*argv, "--out", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"lrtrace: error: {named}"), err


def test_the_longest_prefix_that_fits_passes(checkpoint: Path) -> None:
    base = ["profile-engine", "--model", str(checkpoint), "--out", "p.json"]
    flags = checked_flags(_parser().parse_args([*base, "--prefix-tokens", "970"]))
    assert flags.plan.prefix_tokens == 970 and flags.service is not None
    argv = [*base, "--prefix-tokens", "0", "--service-duration", "0"]
    flags = checked_flags(_parser().parse_args(argv))
    assert flags.service is None  # not measured


def test_the_default_output_is_in_the_current_directory(
    tmp_path: Path, checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["profile-engine", "--model", str(checkpoint), "--prefix-tokens", "16"]
    out = checked_flags(_parser().parse_args(argv)).out
    assert out == Path("measured-torch-planner-cpu.json")
    assert out.resolve().parent == tmp_path and out.resolve().parent != PROFILE_DIR
