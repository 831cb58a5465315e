"""Fleet mixes: what a fleet is made of, for capacity planning.

A mix says, per robot type, how large a share of the fleet it is, which LRTrace
tasks its robots ask for, how often (events per second *per robot*) and in what
bursts (1..`max_tasks_per_event` robots of the type at once, as in Table 3). The
mix is scale-free, so `lrtrace capacity` can grow one fleet proportionally and ask
at which size the engine stops meeting its target. Validated with pydantic against
the task catalog, so a typo fails with one line naming the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from lrtrace.catalog import Catalog
from lrtrace.errors import LrtraceError
from lrtrace.trace_format import one_line
from lrtrace.workload import trace_id_list

MIX_DIR = Path(__file__).resolve().parent / "mixes"


class RobotGroup(BaseModel):
    """The robots of one type in a mix."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    share: float = Field(default=1.0, gt=0, le=1e6, allow_inf_nan=False)
    """Relative weight of this type in the fleet (3 and 1: three drones per arm)."""
    trace_ids: tuple[int, ...] = Field(min_length=1, description="default: all of the type's")
    events_per_s: float = Field(gt=0, le=10, allow_inf_nan=False)
    """Events per second per robot of this type: the type's events are one Poisson
    stream at (robots of the type) x events_per_s."""
    max_tasks_per_event: int = Field(default=1, ge=1, le=10_000)
    """Each event starts 1..this many tasks (uniform) on distinct robots of the type;
    capped at the type's robot count in small fleets."""

    @field_validator("trace_ids", mode="before")
    @classmethod
    def _parse_ids(cls, value: object) -> object:
        return trace_id_list(value)

    @field_validator("trace_ids")
    @classmethod
    def _distinct(cls, ids: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(ids)) != len(ids):
            raise ValueError("trace ids must be distinct")
        return ids

    def tasks_per_event(self, robots: int) -> float:
        """Mean tasks per event when the type has `robots` robots."""
        return (min(self.max_tasks_per_event, robots) + 1) / 2


class FleetMix(BaseModel):
    """Robot types by name (a robot type of the catalog) -> their group."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="custom", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")
    robots: dict[str, RobotGroup] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _default_trace_ids(cls, data: Any, info: ValidationInfo) -> Any:
        """A type without `trace_ids` asks for all of its tasks in the catalog."""
        by_type = _ids_by_type(info)
        if not (isinstance(data, dict) and isinstance(data.get("robots"), dict)):
            return data
        robots = {}
        for rtype, group in data["robots"].items():
            if rtype not in by_type:
                raise ValueError(
                    f"robots.{rtype}: unknown robot type {rtype!r}; "
                    f"known: {', '.join(sorted(by_type))}"
                )
            if isinstance(group, dict) and "trace_ids" not in group and rtype in by_type:
                group = {**group, "trace_ids": by_type[rtype]}
            robots[rtype] = group
        return {**data, "robots": robots}

    @model_validator(mode="after")
    def _against_catalog(self, info: ValidationInfo) -> FleetMix:
        """Every trace id one of its robot type's tasks (types: `_default_trace_ids`)."""
        by_type = _ids_by_type(info)
        catalog: Catalog = (info.context or {})["catalog"]
        for rtype, group in self.robots.items():
            for trace_id in group.trace_ids:
                if trace_id not in catalog:
                    raise ValueError(
                        f"robots.{rtype}.trace_ids: unknown trace id {trace_id}; "
                        f"known ids: {', '.join(map(str, catalog.ids()))}"
                    )
                if catalog[trace_id].robot_type != rtype:
                    raise ValueError(
                        f"robots.{rtype}.trace_ids: trace {trace_id} is a task of robot "
                        f"type {catalog[trace_id].robot_type!r}; {rtype} tasks are "
                        f"{', '.join(map(str, by_type[rtype]))}"
                    )
        return self

    def counts(self, robots: int) -> dict[str, int]:
        """Robots per type in a fleet of `robots`: proportional to the shares, rounded
        by largest remainder (ties to the type listed first), so they sum to `robots`."""
        total = sum(g.share for g in self.robots.values())
        exact = {t: robots * g.share / total for t, g in self.robots.items()}
        counts = {t: math.floor(x) for t, x in exact.items()}
        order = sorted(self.robots, key=lambda t: -(exact[t] - counts[t]))
        for rtype in order[: robots - sum(counts.values())]:
            counts[rtype] += 1
        return counts

    def class_rates(self, robots: int, catalog: Catalog) -> dict[str, float]:
        """Expected tasks per second of each task class (`urgency-robot_type`, as the
        report groups them) in a fleet of `robots`; absent classes are left out."""
        rates: dict[str, float] = {}
        for rtype, n in self.counts(robots).items():
            if n == 0:
                continue
            group = self.robots[rtype]
            per_task = n * group.events_per_s * group.tasks_per_event(n) / len(group.trace_ids)
            for trace_id in group.trace_ids:
                cls = catalog[trace_id].task_class
                rates[cls] = rates.get(cls, 0.0) + per_task
        return rates


def _ids_by_type(info: ValidationInfo) -> dict[str, list[int]]:
    """Trace ids per robot type of the catalog given as validation context."""
    catalog = (info.context or {}).get("catalog")
    if not isinstance(catalog, Catalog):
        raise ValueError("a fleet mix is validated against the task catalog (context)")
    by_type: dict[str, list[int]] = {}
    for task in catalog.tasks():
        by_type.setdefault(task.robot_type, []).append(task.trace_id)
    return by_type


def parse_mix(data: object, source: str, catalog: Catalog) -> FleetMix:
    """Validate a mapping into a mix, or raise one line naming the field."""
    if not isinstance(data, dict):
        raise LrtraceError(f"{source}: a fleet mix must be a mapping with a 'robots' field")
    try:
        return FleetMix.model_validate(data, context={"catalog": catalog})
    except ValidationError as err:
        raise LrtraceError(f"{source}: invalid fleet mix: {_clean(one_line(err))}") from None


def _clean(line: str) -> str:
    """Our own model checks name their field in the message: drop pydantic's prefix."""
    where, _, msg = line.partition(": ")
    msg = msg.removeprefix("Value error, ")
    return msg if msg.startswith("robots.") else f"{where}: {msg}"


def builtin_mixes() -> list[str]:
    return sorted(p.stem for p in MIX_DIR.glob("*.yaml"))


def mix_path(spec: str) -> Path | None:
    """The file `load_mix` reads for `spec`: a built-in mix's, or `spec` as a path;
    None for inline YAML."""
    builtin = MIX_DIR / f"{spec}.yaml"
    if "/" not in spec and builtin.is_file():
        return builtin
    return None if spec.lstrip().startswith("{") else Path(spec)


def load_mix(spec: str, catalog: Catalog) -> FleetMix:
    """A mix by built-in name (lrtrace/mixes/), YAML file path, or inline YAML
    (`'{robots: {drone: {events_per_s: 0.01}}}'`)."""
    if not spec.strip():
        raise LrtraceError(
            f"--mix is empty: give a built-in mix ({', '.join(builtin_mixes())}), a YAML "
            "file or inline YAML"
        )
    text: str
    source = spec
    path = mix_path(spec)
    if path is None:
        text, source = spec, "--mix"
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise LrtraceError(
                f"unknown fleet mix {spec!r}; built in: {', '.join(builtin_mixes())}, "
                "or give a YAML file or inline YAML"
            ) from None
        except OSError as err:
            raise LrtraceError(f"cannot read fleet mix {path}: {err.strerror}") from None
        except UnicodeDecodeError:
            raise LrtraceError(f"{path}: not a fleet mix YAML file (not UTF-8 text)") from None
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise LrtraceError(f"{source}: not valid YAML: {str(err).splitlines()[0]}") from None
    return parse_mix(data, source, catalog)
