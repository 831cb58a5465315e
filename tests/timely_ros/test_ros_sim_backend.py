"""The simulated robots draw each skill's duration from the execution-time model
(`ExecTimeModel.sample`), the same draws lrtrace's simulator makes."""

from __future__ import annotations

import random
import threading

from timely_ros.backends.sim import SimBackend
from timely_ros.config import ExecutorParams

from robot_models.exec_time import ExecTimeModel
from robot_models.plan_ast import BoundCall


def test_durations_are_the_models_samples() -> None:
    params = ExecutorParams(robot_id="drone1", backend="sim-drone", seed=7)
    backend = SimBackend(params)
    model = ExecTimeModel.for_robot("drone")
    rng = random.Random("7/drone1")
    calls = [("move_forward", (120,)), ("turn_cw", (90,)), ("takeoff", ()), ("move_up", (30,))]
    for name, args in calls:
        skill = backend.skill_set.get(name)
        expected = model.sample(BoundCall(skill.name, skill.short, args), rng)
        low, _ = model.estimate(BoundCall(skill.name, skill.short, args))
        drawn = backend.sample_duration_s(skill, args)
        assert drawn == expected and drawn >= low


def test_run_reports_progress_and_ends() -> None:
    backend = SimBackend(
        ExecutorParams(robot_id="arm1", backend="sim-arm", time_scale=0.001, feedback_period_s=0.01)
    )
    skill = backend.skill_set.get("home")
    progress: list[float] = []
    assert backend.run(skill, (), threading.Event(), lambda f, _: progress.append(f)) == ""
    assert all(0 <= f <= 1 for f in progress)
