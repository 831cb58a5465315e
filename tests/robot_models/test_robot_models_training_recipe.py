"""The recipe behind `python -m robot_models.train`: stages in order, each from the
one before, an interrupted run resumed at its first unfinished stage."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from robot_models.train import main
from robot_models.training.hf_format import load_checkpoint
from robot_models.training.loop import TrainConfig
from robot_models.training.options import OptionError
from robot_models.training.recipe import SHIPPED_STAGES, stages_dir, train_recipe
from tests.robot_models.training_support import tiny_config

TINY = tiny_config(examples=30, steps=2, tail_steps=1)
STAGES = (TINY, replace(TINY, steps=3, lr=1e-4))


def test_each_stage_continues_the_one_before(tmp_path: Path) -> None:
    out = tmp_path / "planner"
    lines: list[str] = []
    stats = train_recipe(out, STAGES, log=lines.append)
    record = json.loads((out / "train_stats.json").read_text())
    assert record["config"]["steps"] == 3 and record["config"]["lr"] == 1e-4
    assert [s["config"]["steps"] for s in record["earlier_stages"]] == [2]
    assert record["config"]["init_from"].endswith("stage1")
    assert stats["train_seconds"] >= record["train_seconds"]  # both stages counted
    assert load_checkpoint(out).shape.hidden_size == 32
    assert not stages_dir(out).exists()  # the stages' folders go once the recipe ends
    assert any(line.startswith("stage 2/2: from ") for line in lines)
    assert any(line.startswith("[1] step") for line in lines)


def test_a_recipe_over_an_evaluated_checkpoint_removes_its_stale_evaluation(
    tmp_path: Path,
) -> None:
    """The recipe copies its last stage over `out`, which has no eval.json of its own:
    the one measured on the earlier weights must not stay beside the new ones."""
    out = tmp_path / "planner"
    out.mkdir()
    (out / "eval.json").write_text('{"heldout_valid": 999}\n')
    lines: list[str] = []
    train_recipe(out, STAGES, log=lines.append)
    assert not (out / "eval.json").exists()
    assert any(line.startswith("removed ") and "eval.json" in line for line in lines)
    assert "Not evaluated yet" in (out / "MODEL_CARD.md").read_text()


def test_an_interrupted_recipe_resumes_at_its_first_unfinished_stage(tmp_path: Path) -> None:
    out = tmp_path / "planner"
    with pytest.raises(ValueError, match="shape"):  # stage 2 cannot continue stage 1
        train_recipe(out, (TINY, replace(TINY, hidden_size=64)), log=lambda _: None)
    assert (stages_dir(out) / "stage1" / "train_stats.json").is_file()
    lines: list[str] = []
    train_recipe(out, STAGES, log=lines.append)
    assert any("stage 1/2: already trained" in line for line in lines)
    assert not any(line.startswith("[1] ") for line in lines)  # stage 1 was not rerun


def test_a_stage_trained_otherwise_is_trained_again(tmp_path: Path) -> None:
    out = tmp_path / "planner"
    with pytest.raises(ValueError):
        train_recipe(
            out, (replace(TINY, seed=7), replace(TINY, hidden_size=64)), log=lambda _: None
        )
    lines: list[str] = []
    train_recipe(out, STAGES, log=lines.append)
    assert not any("already trained" in line for line in lines)


def test_an_empty_recipe_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one stage"):
        train_recipe(tmp_path / "planner", ())


def test_a_recipe_whose_output_is_a_file_is_refused_before_its_first_stage(
    tmp_path: Path,
) -> None:
    """The output is written only once every stage is trained: checked first."""
    afile = tmp_path / "planner"
    afile.write_text("x")
    with pytest.raises(OptionError, match=r"out: .*planner exists and is not a folder"):
        train_recipe(afile, STAGES, log=lambda _: None)
    assert not stages_dir(afile).exists()
    out = tmp_path / "other"
    stages_dir(out).write_text("x")
    with pytest.raises(OptionError, match=r"other\.stages exists and is not a folder"):
        train_recipe(out, STAGES, log=lambda _: None)


def test_the_shipped_recipe_starts_from_scratch_and_learns_observations() -> None:
    assert SHIPPED_STAGES[0] == TrainConfig()
    assert all(stage.observations > 0 for stage in SHIPPED_STAGES[1:])
    assert SHIPPED_STAGES[-1].answers > 0  # the last stage keeps plans steady under answers
    assert all(not stage.init_from for stage in SHIPPED_STAGES)  # the recipe chains them


def test_a_training_option_runs_one_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "one"
    options = {k: v for k, v in vars(TINY).items() if v != getattr(TrainConfig(), k)}
    argv = ["--out", str(out)]
    for name, value in options.items():
        argv += [f"--{name.replace('_', '-')}", str(value)]
    main(argv)
    record = json.loads((out / "train_stats.json").read_text())
    assert record["config"]["steps"] == 2 and record["earlier_stages"] == []
    assert "checkpoint written to" in capsys.readouterr().out


def test_the_shipped_checkpoint_was_trained_by_the_shipped_recipe() -> None:
    """Each stage the committed checkpoint records is the recipe's stage (the options
    that say how to run, and the stage it continued, aside)."""
    from robot_models.checkpoints import default_planner_path

    record = json.loads((default_planner_path() / "train_stats.json").read_text())
    recorded = [*record["earlier_stages"], record]
    assert len(recorded) == len(SHIPPED_STAGES)
    for stage, (done, recipe) in enumerate(zip(recorded, SHIPPED_STAGES, strict=True), 1):
        wanted = asdict(recipe)
        for name, value in done["config"].items():
            if name not in ("init_from", "threads", "device", "save_every"):
                assert value == wanted[name], (stage, name)
        assert done["steps_done"] == recipe.steps
