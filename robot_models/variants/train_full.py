"""`python -m robot_models.variants.train_full NAME [--layers K] [--no-lm-head]`: a full
fine-tune of the base planner's last K layers on a fleet variant's data (the
variant's definition in fleet.yaml, the LoRA variants' examples and held-out set),
scored base vs fine-tune on the held-out examples.

Writes an HF Llama checkpoint to robot_models/checkpoints/variants/<NAME>-full/
(or --out), with train_stats.json and eval.json beside it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from robot_models.checkpoints import default_planner_path
from robot_models.training.options import OptionError
from robot_models.variants.cli import (
    add_config_flags,
    checked_run,
    compare_with_base,
    config_from,
    refused_by,
)
from robot_models.variants.data import variant_data
from robot_models.variants.full_tune import FullTuneConfig, check_layers, check_units, full_tune
from robot_models.variants.spec import VARIANTS_DIR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("name", help="the fleet variant whose data it trains on")
    parser.add_argument("--base", type=Path, default=default_planner_path())
    parser.add_argument("--out", type=Path, help="default: checkpoints/variants/<name>-full")
    parser.add_argument("--no-eval", action="store_true", help="skip base-vs-fine-tune scoring")
    add_config_flags(parser, FullTuneConfig)
    args = parser.parse_args(argv)
    config = config_from(args, FullTuneConfig)
    out: Path = args.out or VARIANTS_DIR / f"{args.name}-full"
    (spec,), base_layers = checked_run(parser, args, config, [args.name], [out])
    refused_by(parser, lambda: check_tuned_blocks(config, base_layers))
    print(f"== {spec.name} ({spec.robot_type}), last {config.layers} layers -> {out}", flush=True)
    data = variant_data(spec, config.train_examples, config.heldout_examples, config.seed)
    stats = full_tune(args.base, spec.robot_type, data, out, config, lambda s: print(s, flush=True))
    print(f"trained in {stats['train_seconds']:.0f} s, loss {stats['final_loss']:.4f}")
    if args.no_eval:
        return 0
    compare_with_base(spec.name, args.base, data.heldout, out, None, "full_tune", "fine-tune")
    return 0


def check_tuned_blocks(config: FullTuneConfig, base_layers: int) -> None:
    """OptionError for `--layers` or `--units` the base cannot train, before data."""
    try:
        check_layers(config, base_layers)
    except ValueError as error:
        raise OptionError("layers", str(error)) from None
    try:
        check_units(config)
    except ValueError as error:
        raise OptionError("units", str(error)) from None


if __name__ == "__main__":
    raise SystemExit(main())
