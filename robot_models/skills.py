"""Skill sets: what each robot type can do, loaded from `robot_models/data/<type>.yaml`.

The YAML file is the single source of truth for a robot type: skills, argument
ranges, and the execution-time model of every skill (see `exec_time.py`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_models.errors import SkillValidationError

DATA_DIR = Path(__file__).resolve().parent / "data"
ROBOT_TYPES: tuple[str, ...] = ("drone", "arm")
MAX_STRING_ARG_CHARS = 64
KNOWN_NAME_PATTERN = r"[^\W_]+( [^\W_]+)*"
MAX_ELEMENTS = 32  # the most elements a streamed skill may declare

SkillValue = bool | int | float | str | None
"""What a skill call takes as argument or returns."""


class ArgSpec(BaseModel):
    """One typed argument; numeric arguments carry an inclusive range."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    type: Literal["int", "float", "str", "bool", "any"]
    min: float | None = None
    max: float | None = None
    unit: str = ""
    # names this robot type knows for a str argument without being told (the arm's
    # bins and places): a grounded plan may use them besides the request's
    # (`grounding.py`)
    known_names: tuple[str, ...] = ()
    # a str argument that never names what the name before it names: `object` (the
    # skill's first argument, this being its second: nothing is stacked on itself)
    # or `<skill>.<arg>` (that skill's first argument in the call right before this
    # one, this being the first: a held object is not placed on itself)
    distinct_from: str | None = Field(
        default=None, pattern=r"^([a-z][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$"
    )

    @model_validator(mode="after")
    def _range_only_for_numbers(self) -> ArgSpec:
        if (self.min is not None or self.max is not None) and self.type not in ("int", "float"):
            raise ValueError(f"argument '{self.name}': a range needs type int or float")
        if self.known_names and self.type != "str":
            raise ValueError(f"argument '{self.name}': known_names need type str")
        if self.distinct_from is not None and self.type != "str":
            raise ValueError(f"argument '{self.name}': distinct_from needs type str")
        for name in self.known_names:
            if not re.fullmatch(KNOWN_NAME_PATTERN, name):
                raise ValueError(
                    f"argument '{self.name}': known name {name!r} is not words of letters"
                    " and digits separated by single spaces"
                )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"argument '{self.name}': min {self.min} > max {self.max}")
        return self

    def in_range(self, number: float) -> bool:
        """Whether `number` is inside the argument's range (no bound: unbounded)."""
        return (self.min is None or number >= self.min) and (self.max is None or number <= self.max)

    def allowed(self) -> str:
        """Human-readable description of the accepted values."""
        if self.type in ("int", "float"):
            lo = "-inf" if self.min is None else _fmt(self.min, self.type)
            hi = "inf" if self.max is None else _fmt(self.max, self.type)
            unit = f" {self.unit}" if self.unit else ""
            return f"{self.type} in [{lo}, {hi}]{unit}"
        if self.type == "str":
            return f"a quoted string of 1 to {MAX_STRING_ARG_CHARS} characters"
        if self.type == "bool":
            return "True or False"
        return "any value"


def _fmt(value: float, kind: str) -> str:
    return str(int(value)) if kind == "int" else f"{value:g}"


class LinearTime(BaseModel):
    """Time grows linearly with one argument: overhead_s + |arg| / rate."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["linear"]
    arg: str
    overhead_s: float = Field(ge=0)
    rate: float = Field(gt=0)
    noise_cv: float = Field(ge=0, le=1)


class ConstantTime(BaseModel):
    """Time that does not depend on the arguments."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["constant"]
    mean_s: float = Field(ge=0)
    noise_cv: float = Field(ge=0, le=1)


class EmpiricalTime(BaseModel):
    """Variable skills (search, sweep): a profile of measured durations."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["empirical"]
    samples_s: list[float] = Field(min_length=1)

    @model_validator(mode="after")
    def _non_negative(self) -> EmpiricalTime:
        if any(s < 0 or not math.isfinite(s) for s in self.samples_s):
            raise ValueError("samples_s must be finite and >= 0")
        return self


class PathTime(BaseModel):
    """A streamed path (one relative leg per element): each element costs
    overhead_s + its leg's length / rate."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["path"]
    overhead_s: float = Field(ge=0)
    rate: float = Field(gt=0)
    noise_cv: float = Field(ge=0, le=1)


ExecTimeSpec = Annotated[
    LinearTime | ConstantTime | EmpiricalTime | PathTime, Field(discriminator="kind")
]


class Skill(BaseModel):
    """One robot skill: called in plans by its short form (or its full name)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    short: str = Field(pattern=r"^[a-z][a-z0-9]*$")
    description: str
    args: list[ArgSpec] = Field(default_factory=list)
    returns: Literal["none", "bool", "int", "float", "str"] = "none"
    exec_time: ExecTimeSpec
    # A streamed skill: its arguments are `args` (one element, e.g. a waypoint's x, y,
    # z) repeated for 1 to max_elements elements; the robot may start each element as
    # soon as it is decoded (docs/service-api.md, "Tool plugins").
    max_elements: int | None = Field(default=None, ge=1, le=MAX_ELEMENTS)

    @model_validator(mode="after")
    def _linear_arg_exists(self) -> Skill:
        if isinstance(self.exec_time, LinearTime) and self.exec_time.arg not in {
            a.name for a in self.args
        }:
            raise ValueError(
                f"skill '{self.name}': exec_time.arg '{self.exec_time.arg}' is not an argument"
            )
        if (self.max_elements is not None) != isinstance(self.exec_time, PathTime):
            raise ValueError(f"skill '{self.name}': max_elements goes with exec_time kind path")
        if self.max_elements is not None and not self.args:
            raise ValueError(f"skill '{self.name}': a streamed skill needs element arguments")
        return self

    @property
    def streamed(self) -> bool:
        return self.max_elements is not None

    def max_args(self) -> int:
        return len(self.args) * (self.max_elements or 1)

    def arg_spec(self, index: int) -> ArgSpec:
        """The spec of argument `index` (a streamed skill's repeat per element)."""
        return self.args[index % len(self.args)] if self.streamed else self.args[index]

    def arity_problem(self, count: int) -> str:
        """Why `count` arguments are wrong for this skill ("" when they are right)."""
        if not self.streamed:
            if count == len(self.args):
                return ""
            return f"takes {len(self.args)} argument(s), got {count}"
        width = len(self.args)
        if count % width == 0 and 1 <= count // width <= (self.max_elements or 1):
            return ""
        return (
            f"takes 1 to {self.max_elements} elements of {width} argument(s) each, got {count} "
            "argument(s)"
        )

    def elements(self, args: Sequence[SkillValue]) -> list[tuple[SkillValue, ...]]:
        """A streamed call's arguments cut into its elements (complete ones only)."""
        width = len(self.args)
        return [tuple(args[i : i + width]) for i in range(0, len(args) - width + 1, width)]

    def signature(self) -> str:
        """`short(arg:type)` as shown to the model in the prompt (a streamed skill's
        element, then `...`: more elements follow)."""
        shown = ", ".join(f"{a.name}:{a.type}" for a in self.args)
        return f"{self.short}({shown}{', ...' if self.streamed else ''})"


class SkillSet(BaseModel):
    """All skills of one robot type, addressable by full name or short form."""

    model_config = ConfigDict(extra="forbid")

    robot_type: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    skills: list[Skill] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> SkillSet:
        seen: set[str] = set()
        for skill in self.skills:
            for key in {skill.name, skill.short}:
                if key in seen:
                    raise ValueError(f"skill name or short form '{key}' is used twice")
                seen.add(key)
        return self

    @model_validator(mode="after")
    def _distinct_names_exist(self) -> SkillSet:
        for skill in self.skills:
            for position, arg in enumerate(skill.args):
                if arg.distinct_from is not None:
                    self._check_distinct(skill, position, arg.distinct_from)
        return self

    def _check_distinct(self, skill: Skill, position: int, ref: str) -> None:
        """`distinct_from` names the name right before the argument: its own call's
        first argument when it is the second, else the first argument of a skill
        whose call may come right before, when it is the first."""
        where = f"skill '{skill.name}' argument '{skill.args[position].name}': distinct_from"
        if skill.streamed:
            raise ValueError(f"{where} is not for a streamed skill")
        owner_name, _, arg_name = ref.rpartition(".")
        owner = self.find(owner_name) if owner_name else skill
        if owner is None:
            raise ValueError(f"{where} names an unknown skill '{owner_name}'")
        if owner.streamed or not owner.args or owner.args[0].name != arg_name:
            raise ValueError(f"{where} '{ref}' must be a skill's first argument")
        if owner.args[0].type != "str":
            raise ValueError(f"{where} '{ref}' must be a str argument")
        if owner_name and position != 0:
            raise ValueError(f"{where} '{ref}' (another call's) needs the first argument")
        if not owner_name and position != 1:
            raise ValueError(f"{where} '{ref}' (its own call's) needs the second argument")

    def distinct_names(self) -> tuple[tuple[str, str], ...]:
        """(after, opener) pairs for the engine's copy bias: a name opened right
        after `opener` never names what the name opened right after `after` does,
        with only unquoted text between (`("pk(", "pl(")`, `("st(", ",")`); every
        spelling of the skills (short form and full name)."""
        pairs: set[tuple[str, str]] = set()
        for skill in self.skills:
            for position, arg in enumerate(skill.args):
                if arg.distinct_from is None:
                    continue
                owner_name, _, _ = arg.distinct_from.rpartition(".")
                owner = self.get(owner_name) if owner_name else skill
                afters = (f"{owner.short}(", f"{owner.name}(")
                openers = (f"{skill.short}(", f"{skill.name}(") if position == 0 else (",",)
                pairs.update((after, opener) for after in afters for opener in openers)
        return tuple(sorted(pairs))

    @staticmethod
    def load(robot_type: str, streamed: bool = False) -> SkillSet:
        """The packaged skill set of `robot_type` ("drone" or "arm"). `streamed` adds
        its streamed skills (`data/<type>_streamed.yaml`): opt-in, so the prompt, the
        grammar and the planner checkpoint of robots without them stay as they were."""
        base = _load_packaged(robot_type).model_copy(deep=True)
        if streamed:
            base.skills.extend(s.model_copy(deep=True) for s in _load_streamed(robot_type))
            base = SkillSet.model_validate(base.model_dump())  # names unique across both
        return base

    @staticmethod
    def load_file(path: Path | str) -> SkillSet:
        """Load and validate a skill-set YAML file."""
        with open(path, encoding="utf-8") as f:
            raw = yaml.safe_load(f)
        return SkillSet.model_validate(raw)

    def save_file(self, path: Path | str) -> None:
        """Write this skill set (including execution-time models) as YAML."""
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(self.model_dump(mode="json", exclude_defaults=False), f, sort_keys=False)

    def perception(self) -> tuple[Skill, ...]:
        """The skills that answer a question about one object (`lk('cup')`,
        `ox('cat')`): a bool or float of one argument, what a perception tool
        answers and a plan may be shown the answer of."""
        return tuple(s for s in self.skills if s.returns in ("bool", "float") and len(s.args) == 1)

    def find(self, name: str) -> Skill | None:
        """The skill called `name` (full name or short form), or None."""
        for skill in self.skills:
            if name in (skill.short, skill.name):
                return skill
        return None

    def get(self, name: str) -> Skill:
        """The skill called `name`; `SkillValidationError` listing the known ones if none."""
        skill = self.find(name)
        if skill is None:
            known = ", ".join(s.short for s in self.skills)
            raise SkillValidationError(
                name,
                "",
                f"skills of the {self.robot_type}: {known}",
                f"unknown skill for a {self.robot_type}",
            )
        return skill

    def validate_call(self, name: str, args: Sequence[SkillValue]) -> Skill:
        """Check a complete call: skill exists, argument count, types and ranges."""
        skill = self.get(name)
        problem = skill.arity_problem(len(args))
        if problem:
            raise SkillValidationError(skill.name, "", skill.signature(), problem)
        for i, value in enumerate(args):
            self.validate_arg(skill, skill.arg_spec(i), value)
        return skill

    def validate_arg(self, skill: Skill, spec: ArgSpec, value: SkillValue) -> None:
        """Check one argument value against its spec (type, then range)."""
        if spec.type == "any":
            return
        problem = _type_problem(spec, value)
        if problem:
            raise SkillValidationError(skill.name, spec.name, spec.allowed(), problem)
        numeric = spec.type in ("int", "float")
        if numeric and not spec.in_range(float(value)):  # type: ignore[arg-type]
            raise SkillValidationError(
                skill.name, spec.name, spec.allowed(), f"{value!r} is out of range"
            )


def _type_problem(spec: ArgSpec, value: SkillValue) -> str:
    ok: bool
    if spec.type == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif spec.type == "float":
        ok = (
            isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        )
    elif spec.type == "bool":
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, str) and 1 <= len(value) <= MAX_STRING_ARG_CHARS
    return "" if ok else f"{value!r} is not {spec.allowed()}"


def check_robot_type(robot_type: str) -> str:
    """Return `robot_type` if known, else raise a ValueError listing the known types."""
    if robot_type not in ROBOT_TYPES:
        raise ValueError(
            f"unknown robot type {robot_type!r}; known types: {', '.join(ROBOT_TYPES)}"
        )
    return robot_type


@cache
def _load_streamed(robot_type: str) -> tuple[Skill, ...]:
    check_robot_type(robot_type)
    path = DATA_DIR / f"{robot_type}_streamed.yaml"
    return tuple(SkillSet.load_file(path).skills) if path.is_file() else ()


@cache
def _load_packaged(robot_type: str) -> SkillSet:
    check_robot_type(robot_type)
    skill_set = SkillSet.load_file(DATA_DIR / f"{robot_type}.yaml")
    if skill_set.robot_type != robot_type:
        raise ValueError(f"{robot_type}.yaml declares robot_type {skill_set.robot_type!r}")
    return skill_set
