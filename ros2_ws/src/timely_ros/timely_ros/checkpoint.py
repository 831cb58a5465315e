"""Where the planner's tokenizer comes from when no checkpoint was trained yet."""

from __future__ import annotations

from pathlib import Path


def planner_checkpoint(tmp: Path) -> Path:
    """The embedded planner checkpoint, or (before one is trained) a directory with a
    tokenizer trained on the planner's data set: all the simulated engine needs."""
    from robot_models.checkpoints import default_planner_path

    path = default_planner_path()
    if (path / "tokenizer.json").is_file():
        return path
    from robot_models.dataset import LRTRACE_TASKS, build_dataset
    from robot_models.language import load_language
    from robot_models.training.tokenizer import save_tokenizer, train_tokenizer

    languages = {t: load_language(t) for t in ("drone", "arm")}
    examples = [t.example() for t in LRTRACE_TASKS] + list(build_dataset().train)
    corpus = [lang.prompt_prefix() for lang in languages.values()] + [
        languages[e.robot_type].format_request(e.scene, e.instruction) + e.plan for e in examples
    ]
    out = tmp / "tokenizer_only"
    save_tokenizer(train_tokenizer(corpus), out)
    return out
