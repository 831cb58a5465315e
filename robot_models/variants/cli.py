"""What the two variant training commands share: a flag per field of the training
config, and the held-out comparison with the base written to eval.json."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from robot_models.dataset import Example
from robot_models.training.options import OptionError, at_least, check_output_dir, read_checkpoint
from robot_models.variants.score import score
from robot_models.variants.spec import VariantSpec, variant_spec

# Config fields that count something a run needs at least one of, or may have none of.
AT_LEAST_ONE = (
    "steps",
    "batch_size",
    "prefix_every",
    "train_examples",
    "heldout_examples",
    "threads",
)
AT_LEAST_ZERO = ("warmup_steps",)

Config = TypeVar("Config")
Checked = TypeVar("Checked")


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


def parse_config_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, config_type: type[Any]
) -> tuple[argparse.Namespace, set[str]]:
    """The parsed arguments, and the config fields given on the command line: a flag
    given with its default's value counts too (`--rank 8` must win over fleet.yaml's
    rank 4 although 8 is the default)."""
    unset = object()
    names = [f.name for f in fields(config_type)]
    # argparse sets a default only where the namespace lacks the attribute
    args = parser.parse_args(argv, namespace=argparse.Namespace(**dict.fromkeys(names, unset)))
    defaults = config_type()
    given = set()
    for name in names:
        if getattr(args, name) is unset:
            setattr(args, name, getattr(defaults, name))
        else:
            given.add(name)
    return args, given


def config_from(args: argparse.Namespace, config_type: type[Config]) -> Config:
    return config_type(**{f.name: getattr(args, f.name) for f in fields(config_type)})  # type: ignore[arg-type]


def check_config(config: object) -> None:
    """OptionError for a count or rate the training loop would crash on (batch size 0,
    lr nan) or silently do nothing with (0 steps), before minutes of data building."""
    for name in AT_LEAST_ONE:
        if hasattr(config, name):
            at_least(name, getattr(config, name), 1)
    for name in AT_LEAST_ZERO:
        if hasattr(config, name):
            at_least(name, getattr(config, name), 0)
    lr = getattr(config, "lr", 1.0)
    if not (math.isfinite(lr) and lr > 0):
        raise OptionError("lr", f"must be a finite number above 0, got {lr}")


def checked_run(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    config: object,
    names: Sequence[str],
    outs: Sequence[Path],
) -> tuple[list[VariantSpec], int]:
    """The named variants' specs and the base's layer count, after refusing (one
    argparse error line, status 2) an unknown variant, a base that is not a checkpoint,
    an output folder that cannot be made, or a bad count: all found before any data is
    built or step run."""
    try:
        specs = [variant_spec(name) for name in names]
    except KeyError as error:
        parser.error(str(error.args[0]))
    layers = refused_by(parser, lambda: _check_run(args.base, config, outs))
    return specs, layers


def _check_run(base: Path, config: object, outs: Sequence[Path]) -> int:
    """The base's layer count, after the checks of `checked_run`."""
    check_config(config)
    base_config, _ = read_checkpoint(base, "base")
    layers = base_config.get("num_hidden_layers")
    if not isinstance(layers, int):
        raise OptionError("base", f"{base / 'config.json'} has no num_hidden_layers")
    for out in outs:
        check_output_dir(out, "out")
    return layers


def refused_by(parser: argparse.ArgumentParser, check: Callable[[], Checked]) -> Checked:
    """`check()`'s result; an OptionError it raises exits as argparse's error line."""
    try:
        return check()
    except OptionError as error:
        parser.error(error.cli_message())


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
