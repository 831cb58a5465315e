"""The planner config's fleet variants: each adapter folder found and loaded into the
engine (torch, or vLLM's multi-LoRA in process or on its servers), what does not fit
named as a configuration error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from timely_ros.config import ConfigError, PlannerParams, RobotSpec


def resolve_adapter(name: str, path: str) -> Path:
    """An adapter folder; relative paths are taken from the repository root when they
    do not exist relative to the working directory (as model_path)."""
    folder = Path(path)
    if not folder.is_absolute() and not folder.exists():
        from robot_models.checkpoints import CHECKPOINT_DIR

        folder = CHECKPOINT_DIR.parents[1] / folder
    if not folder.is_dir():
        raise ConfigError(f"adapters.{name}: no adapter folder at {path!r} (looked in {folder})")
    return folder


def load_adapters(engine: Any, params: PlannerParams, base: Path) -> None:
    """Load every configured adapter into `engine` (any engine with `load_adapter`; the
    torch engine also takes a full fine-tune's checkpoint folder). A folder that is not
    a variant of this base model (`base`, the planner's checkpoint), or one a vLLM
    server was not started with, is a ConfigError naming the adapter and what does not
    fit."""
    from timely_core.engine.protocol import AdapterError

    check_robot_types(params)
    for name, path in params.adapters.items():
        folder = resolve_adapter(name, path)
        try:
            engine.load_adapter(name, folder)
        except AdapterError as err:
            raise ConfigError(f"adapters.{name}: {err}{widening_hint(base, folder)}") from None


def load_zoo_variants(engine: Any, params: PlannerParams) -> None:
    """Load every variant the robots name from the engine's block zoo (`zoo`); one the
    zoo lacks, of another base, or of the wrong robot type is a ConfigError naming the
    robot and the variant."""
    from timely_core.engine.protocol import AdapterError

    for robot in params.robots:
        if not robot.variant or robot.variant in engine.block_variants | engine.adapters:
            continue
        try:
            engine.load_zoo_variant(robot.variant)
        except AdapterError as err:
            raise ConfigError(f"robot {robot.id!r}: variant {robot.variant!r}: {err}") from None
    from timely_core.engine.torch.zoo_model import ZooModel

    for robot in params.robots:
        if robot.variant:
            variant = ZooModel.of(engine.zoo_model.zoo, robot.variant, ConfigError)
            _check_robot_type(robot, variant.file("eval.json"), variant.label)


def check_robot_types(params: PlannerParams) -> None:
    """A robot given a variant trained for another robot type (an arm on a drone's
    adapter) would plan in the wrong skills: a ConfigError naming both. Adapters of
    unknown origin (no eval.json naming a variant of robot_models' fleet) pass."""
    for robot in params.robots:
        if not robot.variant:
            continue
        folder = resolve_adapter(robot.variant, params.adapters[robot.variant])
        _check_robot_type(robot, folder / "eval.json", str(folder))


def _check_robot_type(robot: RobotSpec, eval_file: Path | None, where: str) -> None:
    trained_for = variant_robot_type(eval_file)
    if trained_for is not None and trained_for != robot.type:
        raise ConfigError(
            f"robot {robot.id!r} is a {robot.type}, but its variant {robot.variant!r} "
            f"({where}) was trained for the {trained_for}: give it a {robot.type}'s "
            "variant or none"
        )


def variant_robot_type(eval_file: Path | None) -> str | None:
    """The robot type a variant was trained for: its eval.json names a variant of the
    fleet (robot_models/variants/fleet.yaml), which says; None if unknown."""
    from robot_models.variants.spec import variant_spec

    if eval_file is None:
        return None
    try:
        name = json.loads(eval_file.read_text())["variant"]
        return variant_spec(str(name)).robot_type
    except (OSError, ValueError, KeyError, TypeError):
        return None


def widening_hint(base: Path, adapter: Path) -> str:
    """What to do where the planner's heads were widened (widen_heads) and the adapter's
    were not: widen it too; empty otherwise."""
    from robot_models.checkpoints.widen_heads import WIDENED_FROM

    note_path = base / WIDENED_FROM
    if not note_path.is_file() or (adapter / WIDENED_FROM).is_file():
        return ""
    try:
        note = json.loads(note_path.read_text())
        source, width = note["source"], note["widened_to"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return (
        f"; the planner at {base} has its attention heads widened to {width}, this adapter's "
        f"are not: widen it too (python -m robot_models.checkpoints.widen_heads {adapter} "
        f"DST --head-dim {width} --base {source}) and configure DST"
    )


def lora_rank(params: PlannerParams) -> int:
    """The largest rank `r` among the configured adapters (1 when none says): vLLM
    preallocates its LoRA slots at a rank at least this large."""
    ranks = [1]
    for name, path in params.adapters.items():
        config = resolve_adapter(name, path) / "adapter_config.json"
        try:
            rank = json.loads(config.read_text()).get("r")
        except (OSError, ValueError):
            continue  # loading the adapter names what is wrong with it
        if isinstance(rank, int) and rank > 0:
            ranks.append(rank)
    return max(ranks)
