"""`python -m robot_models.train`: reproduce the planner checkpoint from scratch.

Writes to robot_models/checkpoints/planner/ unless --out is given. Deterministic
data, tokenizer and initialisation for a given seed (CPU float32; thread
scheduling can still change the last bits of the result).
"""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

from robot_models.checkpoints import default_planner_path
from robot_models.training.loop import TrainConfig, train
from robot_models.training.tokenizer import NUMBER_FORMATS, WORD_FORMATS


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
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        elif field.name == "numbers":
            parser.add_argument(flag, choices=NUMBER_FORMATS, default=default)
        elif field.name == "words":
            parser.add_argument(flag, choices=WORD_FORMATS, default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default)
    args = parser.parse_args(argv)
    config = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    stats = train(config, args.out, log=lambda line: print(line, flush=True))
    print(
        f"checkpoint written to {args.out} in {stats['train_seconds']:.0f} s "
        f"(final loss {stats['final_loss']:.4f})",
        flush=True,
    )


if __name__ == "__main__":
    main()
