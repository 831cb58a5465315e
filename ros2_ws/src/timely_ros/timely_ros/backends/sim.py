"""Simulated drone and arm: each skill takes the time its execution-time model
draws (scaled by `time_scale`), reporting progress while it runs."""

from __future__ import annotations

import random
import threading
import time

from robot_models.skills import ConstantTime, EmpiricalTime, LinearTime, Skill, SkillSet, SkillValue
from timely_ros.backends.base import Progress
from timely_ros.config import ExecutorParams


def sample_duration_s(skill: Skill, args: tuple[SkillValue, ...], rng: random.Random) -> float:
    """Draw one execution time from the skill's model (seconds of robot time)."""
    spec = skill.exec_time
    if isinstance(spec, LinearTime):
        names = [a.name for a in skill.args]
        value = args[names.index(spec.arg)]
        amount = abs(float(value)) if isinstance(value, (int, float)) else 0.0
        mean = spec.overhead_s + amount / spec.rate
        return max(0.0, mean * (1.0 + spec.noise_cv * rng.gauss(0.0, 1.0)))
    if isinstance(spec, ConstantTime):
        return max(0.0, spec.mean_s * (1.0 + spec.noise_cv * rng.gauss(0.0, 1.0)))
    if isinstance(spec, EmpiricalTime):
        return rng.choice(spec.samples_s)
    raise TypeError(f"unknown execution-time model {spec!r}")


def simulated_return(skill: Skill, rng: random.Random) -> str:
    """A plausible value for skills that return one (perception)."""
    if skill.returns == "bool":
        return str(rng.random() < 0.5)
    if skill.returns == "float":
        return f"{rng.uniform(0.1, 0.9):.3f}"
    if skill.returns == "int":
        return str(rng.randint(0, 10))
    if skill.returns == "str":
        return "ok"
    return ""


class SimBackend:
    def __init__(self, params: ExecutorParams) -> None:
        self._skills = SkillSet.load(params.robot_type)
        self._rng = random.Random(f"{params.seed}/{params.robot_id}")
        self._scale = params.time_scale
        self._period = params.feedback_period_s

    @property
    def skill_set(self) -> SkillSet:
        return self._skills

    def run(
        self, skill: Skill, args: tuple[SkillValue, ...], stop: threading.Event, progress: Progress
    ) -> str:
        duration = sample_duration_s(skill, args, self._rng) * self._scale
        start = time.monotonic()
        end = start + duration
        while not stop.is_set():
            now = time.monotonic()
            if now >= end:
                break
            progress((now - start) / duration if duration > 0 else 1.0, skill.name)
            stop.wait(min(self._period, end - now))
        return simulated_return(skill, self._rng)

    def halt(self) -> None:
        """Nothing moves in a simulation: setting `stop` already ends `run`."""

    def close(self) -> None:
        return None
