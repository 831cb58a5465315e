"""The shipped planner's recipe: the training stages `python -m robot_models.train`
runs when no training option is given, each continuing from the one before.

Stage 1 learns the plan language and the robots' skills from the template data
from scratch; stage 2 adds the open-lexicon request grammar (`data="mixed"`) and
the observation examples of plans that react (issue #23); stage 3 settles stage 2
at a lower learning rate; stage 4, short and lower still, on the template data
alone, brings back the exact copying of numbers that the mixed data loosened;
stage 5 adds plans shown a perception tool's answers (`answers`), so that a plan
goes on unchanged after `lk('cup')->True` is appended to it, and stage 6 settles it
as stage 4 settled stage 3 (robot_models/README.md has what each stage measured).
Each stage's checkpoint is kept in a folder beside the output until the recipe
ends, so an interrupted run resumes at the first stage without a finished
checkpoint.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from robot_models.training.loop import TrainConfig, drop_stale_evaluation, train
from robot_models.training.options import check_output_dir

SHIPPED_STAGES: tuple[TrainConfig, ...] = (
    TrainConfig(),
    TrainConfig(
        data="mixed",
        observations=0.3,
        steps=2400,
        tail_steps=1600,
        lr=1e-3,
        full_lr=5e-4,
    ),
    TrainConfig(
        data="mixed",
        observations=0.3,
        steps=900,
        tail_steps=600,
        lr=3e-4,
        full_lr=1.5e-4,
        warmup_steps=10,
    ),
    TrainConfig(
        observations=0.3,
        steps=300,
        tail_steps=200,
        lr=1.5e-4,
        full_lr=7.5e-5,
        warmup_steps=10,
    ),
    TrainConfig(
        data="mixed",
        observations=0.3,
        answers=0.6,
        steps=2400,
        tail_steps=1600,
        lr=5e-4,
        full_lr=2.5e-4,
        warmup_steps=10,
    ),
    TrainConfig(
        observations=0.3,
        answers=0.6,
        steps=300,
        tail_steps=200,
        lr=1.5e-4,
        full_lr=7.5e-5,
        warmup_steps=10,
    ),
)


def stages_dir(out_dir: Path) -> Path:
    """Where the recipe keeps its finished stages while it runs."""
    return out_dir.with_name(out_dir.name + ".stages")


def train_recipe(
    out_dir: Path,
    stages: tuple[TrainConfig, ...] = SHIPPED_STAGES,
    threads: int | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, float]:
    """Run `stages` in order into `out_dir`; returns the last stage's statistics, with
    `train_seconds` the recipe's in all. OptionError before any work if `out_dir`
    cannot be written (each stage's own options are checked as it starts)."""
    if not stages:
        raise ValueError("a recipe needs at least one stage")
    keep = stages_dir(out_dir)
    for folder in (out_dir, keep):  # not found only when the last stage is copied
        check_output_dir(folder, "out")
    previous = ""
    stats: dict[str, float] = {}
    seconds = 0.0
    for number, stage in enumerate(stages, start=1):
        config = replace(stage, init_from=previous)
        if threads is not None:
            config = replace(config, threads=threads)
        stage_dir = keep / f"stage{number}"
        done = _finished(stage_dir, config)
        if done is not None:
            log(f"stage {number}/{len(stages)}: already trained in {stage_dir}, kept")
            stats = done
        else:
            log(f"stage {number}/{len(stages)}: {_describe(config)}")
            stats = train(config, stage_dir, log=_tagged(log, number))
        previous = str(stage_dir)
        seconds += stats["train_seconds"]
    out_dir.mkdir(parents=True, exist_ok=True)
    # the last stage's folder holds no eval.json, so copying it would keep the old one
    drop_stale_evaluation(out_dir, log)
    for item in Path(previous).iterdir():
        shutil.copy2(item, out_dir / item.name)
    shutil.rmtree(keep)
    return {**stats, "train_seconds": seconds}


def _tagged(log: Callable[[str], None], stage: int) -> Callable[[str], None]:
    """`log` with each line marked by its stage."""
    return lambda line: log(f"[{stage}] {line}")


def _finished(stage_dir: Path, config: TrainConfig) -> dict[str, float] | None:
    """The statistics of a stage already trained with exactly `config`, else None."""
    path = stage_dir / "train_stats.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    if record.get("config") != json.loads(json.dumps(asdict(config))):
        return None
    if record.get("steps_done") != float(config.steps):
        return None
    return {k: v for k, v in record.items() if isinstance(v, float)}


def _describe(config: TrainConfig) -> str:
    changed = {
        k: v
        for k, v in asdict(config).items()
        if v != getattr(TrainConfig(), k) and k not in ("init_from", "threads")
    }
    start = f"from {config.init_from}" if config.init_from else "from scratch"
    return f"{start}, {changed or 'defaults'}"
