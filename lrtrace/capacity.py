"""Capacity planning: the largest fleet of a mix one engine serves within a target.

For each setting (policy, max batch, KV memory) the planner searches fleet sizes
(`capacity_search`), and judges each size by replaying it on the simulator in
virtual time (the real `PlanningService` on `SimulatedEngine`, costed by a latency
profile) once per seed, with `capacity_target`. Each replay lasts `duration_s`, or
longer at small sizes, so that every task class present expects at least
`min_tasks` tasks per seed: a class with a handful of tasks would pass or fail by
chance. The search starts at the smallest size that needs no such extension, since
idle virtual time costs wall time too (the driver steps it 20 ms at a time).

Ctrl-C during a search raises `SearchInterrupted` with every setting's result so far,
the interrupted one's from the sizes it finished, so the CLI can write them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lrtrace.capacity_search import Boundary, find_boundary
from lrtrace.capacity_target import CapacityTarget, ClassValue, Rule, class_values, meets
from lrtrace.catalog import Catalog
from lrtrace.errors import LrtraceError
from lrtrace.fleet_compose import compose_fleet
from lrtrace.fleet_mix import FleetMix
from lrtrace.profiles import LatencyProfile
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.targets.sim import SimTarget
from lrtrace.results_format import TaskRecord
from lrtrace.trace_format import TraceFile
from timely_core.engine.protocol import OutOfKvMemory

MAX_DURATION_S = 3600.0  # longest replay a small fleet is stretched to (virtual seconds)


class SearchConfig(BaseModel):
    """How hard the planner looks; the CLI's flags, validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seeds: int = Field(default=3, ge=1, le=25)
    first_seed: int = Field(default=0, ge=0, lt=2**32)
    duration_s: float = Field(default=60.0, gt=0, le=MAX_DURATION_S, allow_inf_nan=False)
    min_tasks: int = Field(default=20, ge=1, le=10_000)
    max_robots: int = Field(default=4096, ge=1, le=100_000)
    precision: float = Field(default=0.02, ge=0, lt=1, allow_inf_nan=False)
    rule: Rule = "median"


@dataclass(frozen=True)
class Setting:
    """One configuration of the engine whose capacity is sought."""

    policy: str
    max_batch: int | None = None  # None: the profile's cap (or the service's default)
    kv_tokens: int | None = None  # None: the profile's KV capacity

    @property
    def label(self) -> str:
        return (
            self.policy
            + ("" if self.max_batch is None else f"@{self.max_batch}")
            + ("" if self.kv_tokens is None else f" kv={self.kv_tokens}")
        )


@dataclass(frozen=True)
class SeedRun:
    seed: int
    tasks: int
    engine_busy_share: float  # engine busy / replay duration (virtual)
    classes: dict[str, ClassValue]
    wall_s: float


@dataclass(frozen=True)
class SizePoint:
    """One fleet size tried: its replays and the verdict."""

    robots: int
    counts: dict[str, int]
    duration_s: float
    met: bool
    judged: dict[str, float]  # per class, as the rule judged it
    runs: list[SeedRun]


@dataclass
class SettingResult:
    setting: Setting
    batch_cap: int
    kv_tokens: int
    boundary: Boundary
    points: dict[int, SizePoint] = field(default_factory=dict)
    interrupted: bool = False  # Ctrl-C: the boundary of the sizes finished, not a capacity

    @property
    def capacity(self) -> int:
        return self.boundary.passed


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C during `CapacityPlanner.run`: `results` holds the settings searched and
    the interrupted one (`interrupted` set), whose boundary is that of the sizes it
    finished. A KeyboardInterrupt still, for callers that only want to stop."""

    def __init__(self, results: list[SettingResult]) -> None:
        super().__init__("capacity search interrupted")
        self.results = results


def partial_boundary(points: dict[int, SizePoint]) -> Boundary:
    """What the sizes tried so far say: the largest pass below the smallest fail."""
    failed = min((n for n, p in points.items() if not p.met), default=None)
    passed = max(
        (n for n, p in points.items() if p.met and (failed is None or n < failed)), default=0
    )
    return Boundary(passed, failed, {n: p.met for n, p in points.items()})


def start_size(mix: FleetMix, catalog: Catalog, search: SearchConfig) -> int:
    """The smallest fleet whose every class expects `min_tasks` tasks in
    `duration_s` (from the mix's rates per robot in a large fleet)."""
    big = 1_000_000
    per_robot = {c: r / big for c, r in mix.class_rates(big, catalog).items()}
    need = max(math.ceil(search.min_tasks / (search.duration_s * r)) for r in per_robot.values())
    return max(1, min(need, search.max_robots))


def replay_duration(mix: FleetMix, robots: int, catalog: Catalog, search: SearchConfig) -> float:
    """`duration_s`, stretched (up to MAX_DURATION_S) until every class present in a
    fleet of `robots` expects `min_tasks` tasks."""
    rates = mix.class_rates(robots, catalog).values()
    needed = search.min_tasks / min(rates) if rates else search.duration_s
    return min(MAX_DURATION_S, max(search.duration_s, needed))


class CapacityPlanner:
    """Searches each setting's capacity on simulated replays of the mix."""

    def __init__(
        self,
        mix: FleetMix,
        catalog: Catalog,
        profile: LatencyProfile,
        tokenizer: Any,
        target: CapacityTarget,
        search: SearchConfig,
        network_latency_s: float = 0.008,
        on_point: Callable[[Setting, SizePoint], None] | None = None,
    ) -> None:
        self.mix, self.catalog, self.profile = mix, catalog, profile
        self.target, self.search = target, search
        self._tokenizer = tokenizer
        self._latency = network_latency_s
        self._on_point = on_point
        self._targets: dict[int, SimTarget] = {}

    def sim_target(self, kv_tokens: int | None) -> SimTarget:
        kv = kv_tokens or self.profile.kv_capacity_tokens
        if kv not in self._targets:
            profile = self.profile.model_copy(update={"kv_capacity_tokens": kv})
            self._targets[kv] = SimTarget(
                profile, self._tokenizer, ExecTimeSampler(), self.catalog, self._latency
            )
        return self._targets[kv]

    def check(self, settings: Sequence[Setting]) -> None:
        """Fail before any search if a KV size cannot even hold the robots' prompt
        prefixes (a replay of every robot type with no task registers them all)."""
        every_type = next(
            n for n in range(len(self.mix.robots), 10**6) if all(self.mix.counts(n).values())
        )
        empty = compose_fleet(self.mix, every_type, 1e-9, 0, self.catalog)
        for setting in settings:
            self._run(setting, empty, [])

    def _run(self, setting: Setting, trace: TraceFile, records: list[TaskRecord]) -> float:
        try:
            busy = self.sim_target(setting.kv_tokens).run(
                trace, setting.policy, setting.max_batch, records, _ignore, threading.Event()
            )
        except OutOfKvMemory as err:
            kv = setting.kv_tokens or self.profile.kv_capacity_tokens
            raise LrtraceError(
                f"--kv-tokens {kv}: too little KV memory for the robots' prompt prefixes ({err})"
            ) from None
        return busy or 0.0

    def replay(self, setting: Setting, robots: int, seed: int, duration_s: float) -> SeedRun:
        """One seed of one fleet size, in virtual time."""
        trace = compose_fleet(self.mix, robots, duration_s, seed, self.catalog)
        records: list[TaskRecord] = []
        started = time.perf_counter()
        busy = self._run(setting, trace, records)
        return SeedRun(
            seed=seed,
            tasks=len(trace.tasks),
            engine_busy_share=busy / duration_s,
            classes=class_values(records),
            wall_s=time.perf_counter() - started,
        )

    def evaluate(self, setting: Setting, robots: int) -> SizePoint:
        duration = replay_duration(self.mix, robots, self.catalog, self.search)
        first = self.search.first_seed
        runs = [
            self.replay(setting, robots, seed, duration)
            for seed in range(first, first + self.search.seeds)
        ]
        met, judged = meets(self.target, [r.classes for r in runs], self.search.rule)
        point = SizePoint(robots, self.mix.counts(robots), duration, met, judged, runs)
        if self._on_point is not None:
            self._on_point(setting, point)
        return point

    def capacity(self, setting: Setting) -> SettingResult:
        points: dict[int, SizePoint] = {}

        def passes(robots: int) -> bool:
            points[robots] = self.evaluate(setting, robots)
            return points[robots].met

        start = start_size(self.mix, self.catalog, self.search)
        try:
            boundary = find_boundary(passes, start, self.search.max_robots, self.search.precision)
        except KeyboardInterrupt:
            partial = self._result(setting, partial_boundary(points), points)
            partial.interrupted = True
            raise SearchInterrupted([partial]) from None
        return self._result(setting, boundary, points)

    def _result(
        self, setting: Setting, boundary: Boundary, points: dict[int, SizePoint]
    ) -> SettingResult:
        sim = self.sim_target(setting.kv_tokens)
        return SettingResult(
            setting,
            batch_cap=sim.batch_cap(setting.max_batch),
            kv_tokens=sim.profile_model.kv_capacity_tokens,
            boundary=boundary,
            points=points,
        )

    def run(self, settings: Sequence[Setting]) -> list[SettingResult]:
        """Every setting's capacity; SearchInterrupted on Ctrl-C during a search."""
        self.check(settings)
        results: list[SettingResult] = []
        for setting in settings:
            try:
                results.append(self.capacity(setting))
            except SearchInterrupted as stop:
                raise SearchInterrupted([*results, *stop.results]) from None
        return results


def _ignore(_record: TaskRecord) -> None:
    return None
