"""Simulated drone and arm: each skill takes the time its execution-time model
draws (`ExecTimeModel.sample`, scaled by `time_scale`), reporting progress while it
runs."""

from __future__ import annotations

import random
import threading
import time

from robot_models.exec_time import ExecTimeModel
from robot_models.plan_ast import BoundCall
from robot_models.skills import Skill, SkillSet, SkillValue
from timely_ros.backends.base import Progress
from timely_ros.config import ExecutorParams


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
        self._model = ExecTimeModel.for_robot(params.robot_type)
        self._rng = random.Random(f"{params.seed}/{params.robot_id}")
        self._scale = params.time_scale
        self._period = params.feedback_period_s

    @property
    def skill_set(self) -> SkillSet:
        return self._model.skill_set

    def sample_duration_s(self, skill: Skill, args: tuple[SkillValue, ...]) -> float:
        """One draw of the call's execution time (seconds of robot time, unscaled)."""
        return self._model.sample(BoundCall(skill.name, skill.short, args), self._rng)

    def run(
        self, skill: Skill, args: tuple[SkillValue, ...], stop: threading.Event, progress: Progress
    ) -> str:
        duration = self.sample_duration_s(skill, args) * self._scale
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
