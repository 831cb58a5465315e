"""`python -m robot_models.variants.train [NAME ...]`: train fleet variants' LoRA
adapters from the base planner and score each, base vs adapter, on its own held-out
examples.

Writes peft adapters to robot_models/checkpoints/variants/<name>/ (unless --out-root
is given), with train_stats.json and eval.json beside them.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path

from robot_models.checkpoints import default_planner_path
from robot_models.variants.data import variant_data
from robot_models.variants.lora import LoraTrainConfig, train_adapter
from robot_models.variants.score import score
from robot_models.variants.spec import VARIANTS_DIR, load_fleet, variant_spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="variants to train (default: all)")
    parser.add_argument("--base", type=Path, default=default_planner_path())
    parser.add_argument("--out-root", type=Path, default=VARIANTS_DIR)
    parser.add_argument("--no-eval", action="store_true", help="skip base-vs-adapter scoring")
    defaults = LoraTrainConfig()
    for field in fields(LoraTrainConfig):
        default = getattr(defaults, field.name)
        parser.add_argument(
            f"--{field.name.replace('_', '-')}", type=type(default), default=default
        )
    args = parser.parse_args(argv)
    config = LoraTrainConfig(**{f.name: getattr(args, f.name) for f in fields(LoraTrainConfig)})
    specs = [variant_spec(n) for n in args.names] or list(load_fleet().values())
    for spec in specs:
        out = args.out_root / spec.name
        print(f"== {spec.name} ({spec.robot_type}) -> {out}", flush=True)
        data = variant_data(spec, config.train_examples, config.heldout_examples, config.seed)
        stats = train_adapter(
            args.base, spec.robot_type, data, out, config, log=lambda s: print(s, flush=True)
        )
        print(f"trained in {stats['train_seconds']:.0f} s, loss {stats['final_loss']:.4f}")
        if args.no_eval:
            continue
        base_score = score(args.base, None, data.heldout)
        variant_score = score(args.base, out, data.heldout)
        record = {
            "variant": spec.name,
            "heldout_examples": len(data.heldout),
            "base": {"exact": base_score.exact, "valid": base_score.valid},
            "adapter": {"exact": variant_score.exact, "valid": variant_score.valid},
        }
        (out / "eval.json").write_text(json.dumps(record, indent=2) + "\n")
        print(
            f"{spec.name}: held-out exact plans base {base_score.exact}/{base_score.total}, "
            f"adapter {variant_score.exact}/{variant_score.total} "
            f"(valid {base_score.valid} -> {variant_score.valid})",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
