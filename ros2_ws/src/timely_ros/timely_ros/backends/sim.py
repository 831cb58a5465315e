"""Simulated drone and arm: each skill takes the time its execution-time model
draws (`ExecTimeModel.sample`, scaled by `time_scale`), reporting progress while it
runs. Failures can be injected (`fail_rate`, `fail_skills`): the call then raises
`SkillFailed` half way through its time, as a robot that gives up would."""

from __future__ import annotations

import random
import threading
import time

from robot_models.exec_time import ExecTimeModel
from robot_models.plan_ast import BoundCall
from robot_models.skills import Skill, SkillSet, SkillValue
from timely_ros.backends.base import Progress, SkillFailed
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
        # streamed skills too: a planner's robot with `streamed_skills` sends fp legs
        self._model = ExecTimeModel.for_robot(params.robot_type, streamed=True)
        self._rng = random.Random(f"{params.seed}/{params.robot_id}")
        self._scale = params.time_scale
        self._period = params.feedback_period_s
        self._fail_rng = random.Random(f"{params.seed}/{params.robot_id}/failures")
        self._fail_rate = params.fail_rate
        self._fail_left = dict.fromkeys(params.fail_skills, params.fail_times)
        unknown = [n for n in self._fail_left if n not in self._names()]
        if unknown:
            raise ValueError(
                f"fail_skills names skills the {params.robot_type} does not have: {unknown}"
            )
        self._fail_lock = threading.Lock()

    @property
    def skill_set(self) -> SkillSet:
        return self._model.skill_set

    def _names(self) -> set[str]:
        return {n for s in self.skill_set.skills for n in (s.name, s.short)}

    def _injected_failure(self, skill: Skill) -> str:
        """Why this call fails ('' when it does not): `fail_skills`, then `fail_rate`."""
        with self._fail_lock:
            for name in (skill.name, skill.short):
                if self._fail_left.get(name, 0) > 0:
                    self._fail_left[name] -= 1
                    return f"injected failure of {skill.short} (fail_skills)"
            if self._fail_rate and self._fail_rng.random() < self._fail_rate:
                return f"injected failure of {skill.short} (fail_rate={self._fail_rate:g})"
        return ""

    def sample_duration_s(self, skill: Skill, args: tuple[SkillValue, ...]) -> float:
        """One draw of the call's execution time (seconds of robot time, unscaled)."""
        return self._model.sample(BoundCall(skill.name, skill.short, args), self._rng)

    def run(
        self, skill: Skill, args: tuple[SkillValue, ...], stop: threading.Event, progress: Progress
    ) -> str:
        duration = self.sample_duration_s(skill, args) * self._scale
        failure = self._injected_failure(skill)
        if failure:
            duration /= 2
        start = time.monotonic()
        end = start + duration
        while not stop.is_set():
            now = time.monotonic()
            if now >= end:
                break
            progress((now - start) / duration if duration > 0 else 1.0, skill.name)
            stop.wait(min(self._period, end - now))
        if failure and not stop.is_set():
            raise SkillFailed(failure)
        return simulated_return(skill, self._rng)

    def halt(self) -> None:
        """Nothing moves in a simulation: setting `stop` already ends `run`."""

    def close(self) -> None:
        return None
