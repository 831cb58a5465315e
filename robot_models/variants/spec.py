"""The declarative spec of a fleet variant (`fleet.yaml`), validated with pydantic."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from robot_models.checkpoints import CHECKPOINT_DIR
from robot_models.skills import ROBOT_TYPES
from robot_models.variants.adapter_shape import AdapterShape

FLEET_FILE = Path(__file__).resolve().parent / "fleet.yaml"
VARIANTS_DIR = CHECKPOINT_DIR / "variants"


class TrainingOverrides(BaseModel):
    """How a variant's adapter was trained where it differs from the training
    command's defaults (`LoraTrainConfig`), so the command reproduces it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: int | None = Field(default=None, ge=1, le=100_000)
    batch_size: int | None = Field(default=None, ge=1, le=1024)
    lr: float | None = Field(default=None, gt=0, le=1)
    prefix_every: int | None = Field(default=None, ge=1, le=10_000)

    def settings(self) -> dict[str, int | float]:
        """The settings it gives, by `LoraTrainConfig` field."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class VariantSpec(BaseModel):
    """How a variant's examples differ from the base dataset's.

    Rewrites apply in this order: keep `families` (all if empty), `rename` words in
    scene, instruction and plan, `instruction_rename` words in the instruction only,
    `plan_rename` literal text in the plan, clamp move distances to
    `max_distance_cm`, wrap plans of a family in `plan_wrap` (before, after).
    `adapter` sizes its LoRA adapter (rank, alpha, projections, layers);
    `training` holds the training settings it was trained with where they differ
    from the command's defaults (a variant whose plans differ most from the base's
    needs more steps).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,40}$")
    robot_type: str
    description: str
    families: tuple[str, ...] = ()
    rename: dict[str, str] = Field(default_factory=dict)
    instruction_rename: dict[str, str] = Field(default_factory=dict)
    plan_rename: dict[str, str] = Field(default_factory=dict)
    max_distance_cm: int | None = Field(default=None, ge=20, le=500)
    plan_wrap: dict[str, tuple[str, str]] = Field(default_factory=dict)
    adapter: AdapterShape = AdapterShape()
    training: TrainingOverrides = TrainingOverrides()

    def model_post_init(self, _context: object) -> None:
        if self.robot_type not in ROBOT_TYPES:
            raise ValueError(
                f"variant {self.name!r}: robot_type {self.robot_type!r} is not one of "
                f"{', '.join(ROBOT_TYPES)}"
            )

    @property
    def adapter_dir(self) -> Path:
        """Where the shipped adapter lives (peft format)."""
        return VARIANTS_DIR / self.name


class Fleet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    variants: tuple[VariantSpec, ...]


@cache
def load_fleet(path: Path = FLEET_FILE) -> dict[str, VariantSpec]:
    """The variants of `path` by name (names must be distinct)."""
    fleet = Fleet.model_validate(yaml.safe_load(path.read_text()))
    names = [v.name for v in fleet.variants]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{path}: variant names repeated: {', '.join(duplicates)}")
    return {v.name: v for v in fleet.variants}


def variant_spec(name: str) -> VariantSpec:
    fleet = load_fleet()
    if name not in fleet:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(sorted(fleet))}")
    return fleet[name]
