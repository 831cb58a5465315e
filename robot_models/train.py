"""`python -m robot_models.train`: reproduce the planner checkpoint from scratch.

With no training option it runs the shipped recipe (training/recipe.py: from
scratch on the template data, then the open-lexicon and observation data, then
two settling stages), writing robot_models/checkpoints/planner/ unless --out is given.
Any training option (--steps, --data, --init-from, ...) runs one stage with those
options over the defaults instead. Deterministic data, tokenizer and initialisation
for a given seed (CPU float32; thread scheduling can still change the last bits of
the result).
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from robot_models.checkpoints import default_planner_path
from robot_models.training.loop import TrainConfig, train
from robot_models.training.recipe import train_recipe
from robot_models.training.tokenizer import NUMBER_FORMATS, WORD_FORMATS

# Options that say how to run, not what to train: the recipe takes them too.
RUN_OPTIONS = ("threads",)


def main(argv: list[str] | None = None) -> None:
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
        elif field.name == "numbers":
            parser.add_argument(flag, choices=NUMBER_FORMATS, help=what)
        elif field.name == "words":
            parser.add_argument(flag, choices=WORD_FORMATS, help=what)
        else:
            parser.add_argument(flag, type=type(default), help=what)
    args = parser.parse_args(argv)
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig)}
    given = {name: value for name, value in given.items() if value is not None}
    if set(given) - set(RUN_OPTIONS):
        stats = train(TrainConfig(**given), args.out, log=lambda line: print(line, flush=True))
    else:
        stats = train_recipe(
            args.out, threads=given.get("threads"), log=lambda line: print(line, flush=True)
        )
    print(
        f"checkpoint written to {args.out} in {stats['train_seconds']:.0f} s "
        f"(final loss {stats['final_loss']:.4f})",
        flush=True,
    )


if __name__ == "__main__":
    main()
