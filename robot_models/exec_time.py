"""Execution-time models of skills: (min, mean) for scheduling, samples for
simulation, refitting from recorded executions (all at once, or online as robots
report them: `OnlineRefit`, `split_duration`), and saving back to the data file.

Model kinds (parameters live in `data/<robot>.yaml`, see the comments there):
- linear: mean = overhead_s + |arg| / rate (moves by distance, turns by angle);
- constant: mean = mean_s;
- empirical: a profile of measured durations (search-like skills);
- path: a streamed skill's elements are straight legs, each overhead_s + length / rate.
For linear and constant skills the minimum is mean * (1 - 2 * noise_cv) and a
sample is Normal(mean, noise_cv * mean) clipped to [minimum, mean * (1 + 3 cv)].
For empirical skills the minimum is the smallest recorded duration and a sample is
drawn uniformly from the recorded durations (as TimelyLLM's simulator does).
"""

from __future__ import annotations

import math
import random
import statistics
import threading
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from robot_models.plan_ast import (
    Assign,
    BoundCall,
    CallStmt,
    If,
    Loop,
    Return,
    SkillCall,
    Stmt,
    calls_in,
)
from robot_models.skills import (
    ConstantTime,
    EmpiricalTime,
    LinearTime,
    PathTime,
    Skill,
    SkillSet,
)

MAX_EMPIRICAL_SAMPLES = 500
ONLINE_WINDOW = 50  # newest reported executions per skill an online refit uses
ONLINE_MIN_RECORDS = 3  # reported executions of a skill before it is refit online
IF_BODY_MEAN_WEIGHT = 0.5  # a branch with an unknown outcome counts half in the mean


@dataclass(frozen=True)
class ExecutionRecord:
    """One measured execution of a skill call on a robot (or in a replay)."""

    call: BoundCall
    duration_s: float


class ExecTimeModel:
    """Execution-time models of all skills of one robot type."""

    def __init__(self, skill_set: SkillSet) -> None:
        self._skills = skill_set.model_copy(deep=True)

    @staticmethod
    def for_robot(robot_type: str, streamed: bool = False) -> ExecTimeModel:
        """The packaged model of `robot_type` (`streamed`: its streamed skills too)."""
        return ExecTimeModel(SkillSet.load(robot_type, streamed=streamed))

    @staticmethod
    def load(path: Path | str) -> ExecTimeModel:
        """Load from a skill-set data file (the format of `data/<robot>.yaml`)."""
        return ExecTimeModel(SkillSet.load_file(path))

    def save(self, path: Path | str) -> None:
        """Write the skill set with the current model parameters (same format)."""
        self._skills.save_file(path)

    @property
    def skill_set(self) -> SkillSet:
        return self._skills

    # --- single calls ---------------------------------------------------------------------

    def estimate(self, call: SkillCall | BoundCall) -> tuple[float, float]:
        """(min_s, mean_s) of one call. An argument not known before execution (a
        variable) is taken at the smallest allowed value for the minimum and at the
        middle of its range for the mean."""
        skill = self._skills.get(call.name)
        model = skill.exec_time
        if isinstance(model, EmpiricalTime):
            return min(model.samples_s), statistics.fmean(model.samples_s)
        if isinstance(model, ConstantTime):
            mean = model.mean_s
            return _lower(mean, model.noise_cv), mean
        if isinstance(model, PathTime):
            low_cm, mean_cm = _path_lengths(skill, call)
            legs = max(1, len(call.args) // len(skill.args))
            low_path = legs * model.overhead_s + low_cm / model.rate
            return _lower(low_path, model.noise_cv), legs * model.overhead_s + mean_cm / model.rate
        assert isinstance(model, LinearTime)
        low_arg, mean_arg = self._linear_arg(skill, model, call)
        low_mean = model.overhead_s + low_arg / model.rate
        mean = model.overhead_s + mean_arg / model.rate
        return _lower(low_mean, model.noise_cv), mean

    def sample(self, call: SkillCall | BoundCall, rng: random.Random) -> float:
        """One simulated duration of `call`."""
        skill = self._skills.get(call.name)
        model = skill.exec_time
        if isinstance(model, EmpiricalTime):
            return rng.choice(model.samples_s)
        low, mean = self.estimate(call)
        cv = model.noise_cv
        return min(max(rng.gauss(mean, cv * mean), low), mean * (1 + 3 * cv))

    @staticmethod
    def _linear_arg(
        skill: Skill, model: LinearTime, call: SkillCall | BoundCall
    ) -> tuple[float, float]:
        index = next(i for i, a in enumerate(skill.args) if a.name == model.arg)
        spec = skill.args[index]
        value: object = None
        if isinstance(call, BoundCall):
            value = call.args[index] if index < len(call.args) else None
        else:
            literal = call.literal_args()
            value = literal[index] if literal is not None and index < len(literal) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return abs(float(value)), abs(float(value))
        lo = spec.min if spec.min is not None else 0.0
        hi = spec.max if spec.max is not None else lo
        return abs(lo), abs((lo + hi) / 2)

    # --- statements -----------------------------------------------------------------------

    def estimate_statement(self, node: Stmt) -> tuple[float, float]:
        """(min_s, mean_s) of a parsed statement. A conditional's block counts 0 in the
        minimum (it may not run) and half in the mean; a loop counts its block `count`
        times, but only once in the minimum if the block can return early."""
        if isinstance(node, CallStmt):
            return self._sum(calls_in(node))
        if isinstance(node, (Assign, Return)):
            return self._sum(calls_in(node.value))
        if isinstance(node, If):
            low, mean = self._sum(calls_in(node.cond))
            body_mean = sum(self.estimate_statement(s)[1] for s in node.body)
            return low, mean + IF_BODY_MEAN_WEIGHT * body_mean
        if isinstance(node, Loop):
            body = [self.estimate_statement(s) for s in node.body]
            body_low, body_mean = sum(b[0] for b in body), sum(b[1] for b in body)
            low_times = 1 if _can_return(node.body) else node.count
            return body_low * low_times, body_mean * node.count
        raise TypeError(f"not a plan statement: {node!r}")

    def estimate_statements(self, nodes: Iterable[Stmt]) -> tuple[float, float]:
        low = mean = 0.0
        for node in nodes:
            a, b = self.estimate_statement(node)
            low, mean = low + a, mean + b
        return low, mean

    def _sum(self, calls: Iterable[SkillCall]) -> tuple[float, float]:
        low = mean = 0.0
        for call in calls:
            a, b = self.estimate(call)
            low, mean = low + a, mean + b
        return low, mean

    # --- refitting ------------------------------------------------------------------------

    def refit(self, records: Iterable[ExecutionRecord]) -> dict[str, int]:
        """Update the models in place from measured executions; returns how many
        records each skill used. Linear: least squares of duration on |arg| (needs two
        distinct argument values, else only the overhead moves); constant: mean and
        spread; empirical: the records join the profile (the newest
        MAX_EMPIRICAL_SAMPLES are kept)."""
        by_skill: dict[str, list[ExecutionRecord]] = defaultdict(list)
        for record in records:
            if not record.duration_s >= 0:
                raise ValueError(
                    f"duration_s of {record.call} must be >= 0, got {record.duration_s}"
                )
            by_skill[self._skills.get(record.call.name).name].append(record)
        for name, group in by_skill.items():
            skill = self._skills.get(name)
            skill.exec_time = _refit_one(skill, group)
        return {name: len(group) for name, group in by_skill.items()}


class OnlineRefit:
    """Refines an `ExecTimeModel` from executions reported one at a time (a robot's
    measured segment durations). The newest `window` records of each linear or
    constant skill are kept, and the skill is refit from them once it has
    `min_records` (so one odd execution does not swing it); an empirical skill's
    profile takes each record as it comes. Thread-safe."""

    def __init__(
        self,
        model: ExecTimeModel,
        window: int = ONLINE_WINDOW,
        min_records: int = ONLINE_MIN_RECORDS,
    ) -> None:
        if not 1 <= min_records <= window:
            raise ValueError(f"need 1 <= min_records <= window, got {min_records}, {window}")
        self._model = model
        self._window = window
        self._min_records = min_records
        self._recent: dict[str, deque[ExecutionRecord]] = {}
        self._lock = threading.Lock()

    def add(self, records: Iterable[ExecutionRecord]) -> list[str]:
        """Take new records; returns the skills refit now."""
        refit: list[str] = []
        touched: list[str] = []
        with self._lock:
            for record in records:
                skill = self._model.skill_set.get(record.call.name)
                if isinstance(skill.exec_time, EmpiricalTime):
                    self._model.refit([record])
                    refit.append(skill.name)
                    continue
                recent = self._recent.setdefault(skill.name, deque(maxlen=self._window))
                recent.append(record)
                if skill.name not in touched:
                    touched.append(skill.name)
            for name in touched:
                if len(self._recent[name]) >= self._min_records:
                    self._model.refit(self._recent[name])
                    refit.append(name)
        return refit


def split_duration(
    model: ExecTimeModel, nodes: Sequence[Stmt], duration_s: float
) -> list[ExecutionRecord]:
    """Records of the calls of straight-line statements that ran in `duration_s`
    together, the time shared in proportion to each call's mean estimate. Empty
    when what ran is not known: a conditional or a loop, or an argument that is
    not a literal."""
    calls: list[BoundCall] = []
    for node in nodes:
        if isinstance(node, (If, Loop)):
            return []
        for call in calls_in(node):
            args = call.literal_args()
            if args is None:
                return []
            calls.append(BoundCall(call.name, call.short, args))
    if not calls:
        return []
    means = [model.estimate(call)[1] for call in calls]
    total = sum(means)
    shares = [m / total for m in means] if total > 0 else [1 / len(calls)] * len(calls)
    return [
        ExecutionRecord(call, duration_s * share) for call, share in zip(calls, shares, strict=True)
    ]


def _path_lengths(skill: Skill, call: SkillCall | BoundCall) -> tuple[float, float]:
    """(shortest, mean) total length of a path call's legs; a leg with an argument
    not known before it runs counts 0 in the shortest and half its range's longest."""
    if isinstance(call, BoundCall):
        values: tuple[object, ...] | None = call.args
    else:
        values = call.literal_args()
    width = len(skill.args)
    count = len(call.args)
    low = mean = 0.0
    for start in range(0, count - width + 1, width):
        leg = None if values is None else values[start : start + width]
        if leg is not None and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in leg
        ):
            length = math.hypot(*(float(v) for v in leg))  # type: ignore[arg-type]
            low, mean = low + length, mean + length
        else:
            longest = math.hypot(*(max(abs(a.min or 0), abs(a.max or 0)) for a in skill.args))
            mean += longest / 2
    return low, mean


def _lower(mean: float, cv: float) -> float:
    return mean * max(0.0, 1 - 2 * cv)


def _can_return(body: Sequence[Stmt]) -> bool:
    for node in body:
        if isinstance(node, Return) or (isinstance(node, (If, Loop)) and _can_return(node.body)):
            return True
    return False


def _refit_one(
    skill: Skill, records: list[ExecutionRecord]
) -> LinearTime | ConstantTime | EmpiricalTime | PathTime:
    durations = [r.duration_s for r in records]
    model = skill.exec_time
    if isinstance(model, PathTime):  # the cruise rate stays; the per-leg overhead moves
        lengths = [_path_lengths(skill, r.call)[0] for r in records]
        legs = [max(1, len(r.call.args) // len(skill.args)) for r in records]
        overhead = max(
            0.0,
            statistics.fmean(
                (y - x / model.rate) / n for x, y, n in zip(lengths, durations, legs, strict=True)
            ),
        )
        predicted = [n * overhead + x / model.rate for x, n in zip(lengths, legs, strict=True)]
        cv = _cv(durations, predicted, model.noise_cv)
        return PathTime(kind="path", overhead_s=overhead, rate=model.rate, noise_cv=cv)
    if isinstance(model, EmpiricalTime):
        samples = [*model.samples_s, *durations][-MAX_EMPIRICAL_SAMPLES:]
        return EmpiricalTime(kind="empirical", samples_s=samples)
    if isinstance(model, ConstantTime):
        mean = statistics.fmean(durations)
        cv = _cv(durations, [mean] * len(durations), model.noise_cv)
        return ConstantTime(kind="constant", mean_s=mean, noise_cv=cv)
    index = next(i for i, a in enumerate(skill.args) if a.name == model.arg)
    xs = [abs(float(r.call.args[index])) for r in records]  # type: ignore[arg-type]
    overhead, rate = model.overhead_s, model.rate
    if len(set(xs)) >= 2:
        mx, my = statistics.fmean(xs), statistics.fmean(durations)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, durations, strict=True)) / sxx
        intercept = my - slope * mx
        if slope > 0 and intercept >= 0:
            overhead, rate = intercept, 1 / slope
        else:
            overhead = max(
                0.0, statistics.fmean(y - x / rate for x, y in zip(xs, durations, strict=True))
            )
    else:
        overhead = max(
            0.0, statistics.fmean(y - x / rate for x, y in zip(xs, durations, strict=True))
        )
    predicted = [overhead + x / rate for x in xs]
    cv = _cv(durations, predicted, model.noise_cv)
    return LinearTime(kind="linear", arg=model.arg, overhead_s=overhead, rate=rate, noise_cv=cv)


def _cv(observed: list[float], predicted: list[float], previous: float) -> float:
    """Relative spread of observations around the prediction (kept if < 2 records)."""
    if len(observed) < 2:
        return previous
    ratios = [o / p - 1 for o, p in zip(observed, predicted, strict=True) if p > 0]
    if len(ratios) < 2:
        return previous
    return min(1.0, statistics.pstdev(ratios))
