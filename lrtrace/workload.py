"""Workload specifications: the paper's WID 1-3 (Table 3) and custom ones.

A workload is a Poisson stream of *events* (rate `eps`); each event starts 1..`max_tpe`
tasks at once on distinct agents. Specs come from presets, CLI flags or YAML, and are
validated with pydantic so a bad file fails naming every wrong field. A preset with
fields changed is named so (`WID1+eps,duration_s`, see `derived`). Numbers are
strict (YAML's `agents: true` is not 1 agent), and a workload is bounded by the tasks
it is expected to compose (`MAX_EXPECTED_TASKS`), which a trace holds in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)

from lrtrace.errors import LrtraceError
from lrtrace.int_lists import parse_int_list
from lrtrace.problems import listing, validation_problems

_NAME_MAX = 64
_CHANGED = "+overrides"
_SAME_WORKLOAD = frozenset({"name", "seed"})  # changing these keeps the workload
# WID 2 composes 822 tasks; half a million take about 1 GB and hours of replay
MAX_EXPECTED_TASKS: Final = 500_000


def trace_id_list(value: object) -> object:
    """`"1-8"`, `"1-3,9"` or a single int as well as a list, as the CLI accepts them."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if not isinstance(value, str):
        return value
    return parse_int_list(value, "trace ids")


class WorkloadSpec(BaseModel):
    """What `compose` needs to build a trace; deterministic given `seed`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="custom", min_length=1, max_length=_NAME_MAX)
    eps: float = Field(gt=0, le=1000, allow_inf_nan=False, description="events per second")
    max_tpe: StrictInt = Field(ge=1, le=10_000, description="maximum tasks per event")
    trace_ids: tuple[StrictInt, ...] = Field(min_length=1)
    agents: StrictInt = Field(ge=1, le=100_000, description="agents per robot type")
    duration_s: float = Field(gt=0, le=7 * 24 * 3600, allow_inf_nan=False)
    seed: StrictInt = Field(default=0, ge=0, lt=2**63)

    @field_validator("eps", "duration_s", mode="before")
    @classmethod
    def _not_a_bool(cls, value: object) -> object:
        """A float field takes 1 or 1.5, but not `true` (pydantic would read 1.0)."""
        if isinstance(value, bool):
            raise ValueError(f"a number, not {str(value).lower()}")
        return value

    @field_validator("trace_ids", mode="before")
    @classmethod
    def _parse_ids(cls, value: object) -> object:
        return trace_id_list(value)

    @field_validator("trace_ids")
    @classmethod
    def _distinct_positive(cls, ids: tuple[int, ...]) -> tuple[int, ...]:
        if any(i < 1 for i in ids):
            raise ValueError("trace ids start at 1")
        if len(set(ids)) != len(ids):
            raise ValueError("trace ids must be distinct")
        return ids

    @model_validator(mode="after")
    def _composable(self) -> WorkloadSpec:
        """Refuse a workload whose trace would not fit in memory (`MAX_EXPECTED_TASKS`),
        before composing it grows until memory runs out."""
        expected = self.expected_tasks()
        if expected > MAX_EXPECTED_TASKS:
            raise ValueError(
                f"about {expected:,.0f} tasks expected (eps x duration_s x mean tasks per "
                f"event); at most {MAX_EXPECTED_TASKS:,}"
            )
        return self

    def expected_tasks(self) -> float:
        """Mean number of tasks `compose` draws: events, each 1..max_tpe tasks."""
        return self.eps * self.duration_s * (self.max_tpe + 1) / 2


def _table3(
    name: str, eps: float, max_tpe: int, ids: range, agents: int, dur: float
) -> WorkloadSpec:
    return WorkloadSpec(
        name=name, eps=eps, max_tpe=max_tpe, trace_ids=tuple(ids), agents=agents, duration_s=dur
    )


PRESETS: dict[int, WorkloadSpec] = {
    1: _table3("WID1", 0.25, 8, range(1, 9), 25, 260.0),
    2: _table3("WID2", 0.25, 16, range(1, 9), 42, 300.0),
    3: _table3("WID3", 0.1, 8, range(9, 12), 40, 900.0),
}
"""Table 3 of the TimelyLLM paper: mixed TUF, parallel degree, different robot."""


def preset(wid: int) -> WorkloadSpec:
    if wid not in PRESETS:
        raise LrtraceError(f"unknown workload id {wid}; the paper's are {sorted(PRESETS)}")
    return PRESETS[wid]


def parse_spec(data: object, source: str) -> WorkloadSpec:
    """Validate a mapping (from YAML or flags) into a spec, or raise every problem,
    one per line, each naming its field."""
    if not isinstance(data, dict):
        raise LrtraceError(f"{source}: a workload must be a mapping of fields")
    try:
        return WorkloadSpec.model_validate(data)
    except ValidationError as err:
        problems = listing(validation_problems(err, data, root="workload"))
        raise LrtraceError(f"{source}: invalid workload: {problems}") from None


def derived(base: WorkloadSpec, changes: Mapping[str, object], source: str) -> WorkloadSpec:
    """`base` (a preset, a YAML file's workload) with `changes`. Unless the changes
    name it, a changed workload is called `<base>+<changed fields>` (`WID1+eps`), so
    its trace, results and figures never pass it off as the original; a new `seed`
    draws the same workload again and keeps the name."""
    spec = parse_spec({**base.model_dump(), **changes}, source)
    if "name" in changes:
        return spec
    changed = [
        field
        for field in WorkloadSpec.model_fields
        if field not in _SAME_WORKLOAD and getattr(spec, field) != getattr(base, field)
    ]
    if not changed:
        return spec
    name = f"{base.name}+{','.join(changed)}"
    if len(name) > _NAME_MAX:  # a long custom name: say that it changed, not how
        name = f"{base.name[: _NAME_MAX - len(_CHANGED)]}{_CHANGED}"
    return spec.model_copy(update={"name": name})


def load_yaml(path: Path) -> WorkloadSpec:
    """A custom workload from YAML; `wid: N` starts from a preset and overrides fields
    (named as `derived` says)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise LrtraceError(f"cannot read workload {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise LrtraceError(f"{path}: not a workload YAML file (not UTF-8 text)") from None
    except yaml.YAMLError as err:
        raise LrtraceError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
    if isinstance(data, dict) and "wid" in data:
        wid = data.pop("wid")
        if not isinstance(wid, int) or isinstance(wid, bool):
            raise LrtraceError(f"{path}: wid must be 1, 2 or 3, got {wid!r}")
        return derived(preset(wid), data, str(path))
    return parse_spec(data, str(path))
