"""The natural evaluation set (`data/natural_eval.yaml`): instructions written by hand
in operators' own words, each annotated with what a correct plan must contain.

Never used for training, tokenizer fitting or prompt examples (`data/README.md`);
`evaluate` scores plans against the annotations (`natural_score.py`).

An annotation names skills by short or full name; `a|b` means any one of them (a
skill family). Numbers are in the skill's own unit (cm, degrees, mm, s): whatever
the operator said is converted when the entry is written (`said` records it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from robot_models.skills import DATA_DIR, MAX_STRING_ARG_CHARS, ROBOT_TYPES, SkillSet

NATURAL_PATH = DATA_DIR / "natural_eval.yaml"
MIN_PER_TYPE = 150


def alternatives(choice: str) -> tuple[str, ...]:
    """`"sw|iv"` -> ("sw", "iv"); blanks around each name are dropped."""
    return tuple(part.strip() for part in choice.split("|"))


def _no_empty_alternative(choice: str) -> str:
    if not all(alternatives(choice)):
        raise ValueError(f"{choice!r} has an empty alternative")
    return choice


class NumberRequirement(BaseModel):
    """Some call of `skill` (or one of its alternatives) has `arg` within
    `value` +- `tolerance`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    skill: str = Field(min_length=1)
    arg: str | None = None  # None: the skill's first numeric argument
    value: float
    tolerance: float = Field(default=0.0, ge=0)
    said: str = ""  # what the operator said, before conversion

    _check_skill = field_validator("skill")(_no_empty_alternative)


class NaturalEntry(BaseModel):
    """One instruction and what a sensible plan for it contains."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scene: str  # "" is an empty scene: the robot was told nothing about its surroundings
    instruction: str = Field(min_length=1)
    skills: tuple[str, ...] = ()  # each: at least one call of one of its alternatives
    objects: tuple[str, ...] = ()  # each: a string argument equal to one alternative
    numbers: tuple[NumberRequirement, ...] = ()
    forbid: tuple[str, ...] = ()  # skills a sensible plan never calls
    first: str | None = None  # the plan's first call is one of these (hazards)
    outside: str | None = None  # outside the robot's skills: why, and what is sensible

    @field_validator("skills", "forbid")
    @classmethod
    def _each_has_alternatives(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for choice in value:
            _no_empty_alternative(choice)
        return value

    @field_validator("objects")
    @classmethod
    def _objects_fit_an_argument(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for choice in value:
            for name in alternatives(_no_empty_alternative(choice)):
                if len(name) > MAX_STRING_ARG_CHARS or "'" in name or "\n" in name:
                    raise ValueError(
                        f"object {name!r} cannot be a string argument (at most"
                        f" {MAX_STRING_ARG_CHARS} characters, no quote or line break)"
                    )
        return value

    def check_against(self, skill_set: SkillSet) -> None:
        """ValueError naming the field if a skill or number does not fit `skill_set`."""
        for field, choices in (
            ("skills", self.skills),
            ("forbid", self.forbid),
            ("first", (self.first,) if self.first else ()),
        ):
            for choice in choices:
                for name in alternatives(choice):
                    if skill_set.find(name) is None:
                        raise ValueError(
                            f"{field}: {name!r} is no skill of the {skill_set.robot_type}"
                        )
        for index, number in enumerate(self.numbers):
            for name in alternatives(number.skill):
                _check_number(skill_set, name, number, f"numbers[{index}]")


def _check_number(skill_set: SkillSet, name: str, number: NumberRequirement, where: str) -> None:
    skill = skill_set.find(name)
    if skill is None:
        raise ValueError(f"{where}: {name!r} is no skill of the {skill_set.robot_type}")
    numeric = [a for a in skill.args if a.type in ("int", "float")]
    spec = next((a for a in numeric if a.name == number.arg), None) if number.arg else None
    if number.arg is None and numeric:
        spec = numeric[0]
    if spec is None:
        raise ValueError(f"{where}: {skill.short} has no numeric argument {number.arg!r}")
    low = -float("inf") if spec.min is None else spec.min
    high = float("inf") if spec.max is None else spec.max
    if not low <= number.value <= high:
        raise ValueError(
            f"{where}: {number.value:g} is outside {skill.short}'s {spec.name} ({spec.allowed()})"
        )


def natural_eval(robot_type: str, path: Path = NATURAL_PATH) -> list[NaturalEntry]:
    """The entries of `robot_type`, in file order, each checked against its skill set.
    ValueError naming the robot type, entry number, instruction and field otherwise."""
    if robot_type not in ROBOT_TYPES:
        raise ValueError(
            f"unknown robot type {robot_type!r}; known types: {', '.join(ROBOT_TYPES)}"
        )
    with open(path, encoding="utf-8") as f:
        raw: Any = yaml.safe_load(f)
    if not isinstance(raw, dict) or not isinstance(raw.get(robot_type), list):
        raise ValueError(f"{path}: no list of entries under {robot_type!r}")
    skill_set = SkillSet.load(robot_type)
    entries: list[NaturalEntry] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw[robot_type]):
        label = _label(robot_type, index, item)
        try:
            entry = NaturalEntry.model_validate(item)
            entry.check_against(skill_set)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}"
                for e in error.errors()
            )
            raise ValueError(f"{label}: {problems}") from None
        except ValueError as error:
            raise ValueError(f"{label}: {error}") from None
        key = entry.instruction.strip().lower()
        if key in seen:
            raise ValueError(f"{label}: the same instruction as entry {seen[key]}")
        seen[key] = index
        entries.append(entry)
    return entries


def _label(robot_type: str, index: int, item: Any) -> str:
    said = item.get("instruction") if isinstance(item, dict) else None
    return f"natural set, {robot_type} entry {index}" + (f" ({said!r})" if said else "")
