"""The hand-written instructions of `data/ordinary_instructions.yaml`: people's own
phrasing, for benchmarks only (never training data; see `data/README.md`)."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from robot_models.skills import DATA_DIR, check_robot_type

ORDINARY_PATH = DATA_DIR / "ordinary_instructions.yaml"


class OrdinaryInstruction(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    scene: str = Field(min_length=1)
    instruction: str = Field(min_length=1)


def ordinary_instructions(robot_type: str, path: Path = ORDINARY_PATH) -> list[OrdinaryInstruction]:
    """The instructions written for `robot_type`, in file order."""
    check_robot_type(robot_type)
    with open(path, encoding="utf-8") as f:
        raw = yaml.safe_load(f)
    return [OrdinaryInstruction.model_validate(entry) for entry in raw.get(robot_type, [])]
