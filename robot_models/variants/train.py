"""`python -m robot_models.variants.train [NAME ...]`: train fleet variants' LoRA
adapters from the base planner and score each, base vs adapter, on its own held-out
examples.

Each adapter has its variant's `adapter` shape in fleet.yaml (rank, alpha, targets,
layers) unless a flag (--rank, --alpha, --targets, --layers) sets another, and trains
with its `training` settings there (steps, batch size, lr, prefix_every; else the
defaults) unless a flag sets them.

Writes peft adapters to robot_models/checkpoints/variants/<name>/ (unless --out-root
is given), with train_stats.json and eval.json beside them.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from robot_models.checkpoints import default_planner_path
from robot_models.variants.cli import (
    add_config_flags,
    checked_run,
    compare_with_base,
    config_from,
    parse_config_args,
    refused_by,
)
from robot_models.variants.data import variant_data
from robot_models.variants.lora import LoraTrainConfig, check_shape, train_adapter
from robot_models.variants.spec import (
    VARIANTS_DIR,
    TrainingOverrides,
    VariantSpec,
    load_fleet,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="variants to train (default: all)")
    parser.add_argument("--base", type=Path, default=default_planner_path())
    parser.add_argument("--out-root", type=Path, default=VARIANTS_DIR)
    parser.add_argument("--no-eval", action="store_true", help="skip base-vs-adapter scoring")
    add_config_flags(parser, LoraTrainConfig)
    args, given = parse_config_args(parser, argv, LoraTrainConfig)
    config = config_from(args, LoraTrainConfig)
    flagged = given & {"rank", "alpha", "targets", "layers", *TrainingOverrides.model_fields}
    names = args.names or list(load_fleet())
    outs = [args.out_root / n for n in names]
    specs, base_layers = checked_run(parser, args, config, names, outs)
    run_configs = {s.name: variant_config(s, config, flagged) for s in specs}
    refused_by(parser, lambda: check_shapes(run_configs.values(), base_layers))
    for spec in specs:
        out = args.out_root / spec.name
        run_config = run_configs[spec.name]
        print(f"== {spec.name} ({spec.robot_type}) -> {out}", flush=True)
        data = variant_data(spec, config.train_examples, config.heldout_examples, config.seed)
        stats = train_adapter(
            args.base, spec.robot_type, data, out, run_config, log=lambda s: print(s, flush=True)
        )
        print(f"trained in {stats['train_seconds']:.0f} s, loss {stats['final_loss']:.4f}")
        if args.no_eval:
            continue
        compare_with_base(spec.name, args.base, data.heldout, out, out, "adapter", "adapter")
    return 0


def check_shapes(configs: Iterable[LoraTrainConfig], base_layers: int) -> None:
    """Every variant's adapter shape (fleet.yaml's, or the flags') checked against the
    base before the first variant's data is built, so a bad one cannot wait behind
    minutes of another variant's training."""
    for config in configs:
        check_shape(config, base_layers)


def variant_config(
    spec: VariantSpec, config: LoraTrainConfig, flagged: set[str]
) -> LoraTrainConfig:
    """`config` with the variant's adapter shape and training settings from
    fleet.yaml, except those the command line set (`flagged`)."""
    settings = {**spec.adapter.flags(), **spec.training.settings()}
    kept = {k: v for k, v in settings.items() if k not in flagged}
    return replace(config, **kept)  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main())
