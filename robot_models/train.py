"""`python -m robot_models.train`: reproduce the planner checkpoint from scratch.

With no training option it runs the shipped recipe (training/recipe.py: from
scratch on the template data, then the open-lexicon and observation data, then
two settling stages), writing robot_models/checkpoints/planner/ unless --out is given.
Any training option (--steps, --data, --init-from, ...) runs one stage with those
options over the defaults instead. Deterministic data, tokenizer and initialisation
for a given seed (CPU float32; thread scheduling can still change the last bits of
the result). Every option is checked before any data is built: a bad one is refused
in one line naming it.
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from robot_models.checkpoints import default_planner_path
from robot_models.dataset.build import GENERATORS
from robot_models.training.loop import TrainConfig, train
from robot_models.training.options import OptionError
from robot_models.training.recipe import train_recipe
from robot_models.training.tokenizer import NUMBER_FORMATS, WORD_FORMATS

# Options that say how to run, not what to train: the recipe takes them too.
RUN_OPTIONS = ("threads",)
# Fields whose values are a fixed set, offered as argparse choices.
CHOICES = {"numbers": NUMBER_FORMATS, "words": WORD_FORMATS, "data": GENERATORS}


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig)}
    given = {name: value for name, value in given.items() if value is not None}
    try:  # every option is checked before data building starts (`check_run`)
        config = TrainConfig(**given)
        if set(given) - set(RUN_OPTIONS):
            stats = train(config, args.out, log=_log)
        else:
            stats = train_recipe(args.out, threads=given.get("threads"), log=_log)
    except OptionError as error:
        parser.error(error.cli_message())
    print(
        f"checkpoint written to {args.out} in {stats['train_seconds']:.0f} s "
        f"(final loss {stats['final_loss']:.4f})",
        flush=True,
    )


def _parser() -> argparse.ArgumentParser:
    """`--out` and a flag per `TrainConfig` field (unset: the field's default)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", type=Path, default=default_planner_path(), help="checkpoint directory"
    )
    defaults = TrainConfig()
    for field in fields(TrainConfig):
        flag, default = f"--{field.name.replace('_', '-')}", getattr(defaults, field.name)
        what = f"(default {default!r})"
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, help=what)
        elif field.name in CHOICES:
            parser.add_argument(flag, choices=CHOICES[field.name], help=what)
        else:
            parser.add_argument(flag, type=type(default), help=what)
    return parser


def _log(line: str) -> None:
    print(line, flush=True)


if __name__ == "__main__":
    main()
