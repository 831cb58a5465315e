"""What the two variant training commands share: a flag per field of the training
config, and the held-out comparison with the base written to eval.json."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from robot_models.dataset import Example
from robot_models.variants.score import score

Config = TypeVar("Config")


def add_config_flags(parser: argparse.ArgumentParser, config_type: type[Any]) -> None:
    """`--field-name` for each field of the config dataclass, its default as default."""
    defaults = config_type()
    for field in fields(config_type):
        default = getattr(defaults, field.name)
        flag = f"--{field.name.replace('_', '-')}"
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default)


def config_from(args: argparse.Namespace, config_type: type[Config]) -> Config:
    return config_type(**{f.name: getattr(args, f.name) for f in fields(config_type)})  # type: ignore[arg-type]


def compare_with_base(
    name: str,
    base: Path,
    heldout: Sequence[Example],
    out: Path,
    adapter: Path | None,
    key: str,
    label: str,
) -> None:
    """Score the base and the variant (an adapter on the base, or the checkpoint in
    `out` when `adapter` is None) on `heldout`; eval.json in `out` (the variant's
    figures under `key`), a line printed (naming it `label`)."""
    base_score = score(base, None, heldout)
    variant = score(base, adapter, heldout) if adapter is not None else score(out, None, heldout)
    record = {
        "variant": name,
        "heldout_examples": len(heldout),
        "base": {"exact": base_score.exact, "valid": base_score.valid},
        key: {"exact": variant.exact, "valid": variant.valid},
    }
    (out / "eval.json").write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"{name}: held-out exact plans base {base_score.exact}/{base_score.total}, "
        f"{label} {variant.exact}/{variant.total} (valid {base_score.valid} -> {variant.valid})",
        flush=True,
    )
