"""The simulated robots' injected failures (ExecutorParams `fail_skills`,
`fail_rate`), which exercise plans that react (docs/closed-loop.md)."""

from __future__ import annotations

import threading

import pytest
from pydantic import ValidationError
from timely_ros.backends.base import SkillFailed
from timely_ros.backends.sim import SimBackend
from timely_ros.config import ExecutorParams


def _backend(**params: object) -> SimBackend:
    return SimBackend(
        ExecutorParams.model_validate(
            {"robot_id": "drone1", "backend": "sim-drone", "time_scale": 0.001, **params}
        )
    )


def _outcomes(backend: SimBackend, name: str, args: tuple[object, ...], n: int) -> list[str]:
    skill = backend.skill_set.get(name)
    outcomes = []
    for _ in range(n):
        try:
            backend.run(skill, args, threading.Event(), lambda _f, _s: None)
            outcomes.append("ok")
        except SkillFailed as err:
            outcomes.append(str(err))
    return outcomes


def test_listed_skills_fail_their_first_calls_then_succeed() -> None:
    backend = _backend(fail_skills=["tc"], fail_times=2)
    failed = "injected failure of tc (fail_skills)"
    assert _outcomes(backend, "turn_cw", (90,), 3) == [failed, failed, "ok"]
    assert _outcomes(backend, "move_up", (30,), 2) == ["ok", "ok"]  # not listed


def test_the_failure_rate_is_drawn_from_the_seed() -> None:
    draws = [_outcomes(_backend(fail_rate=0.5, seed=s), "mu", (30,), 40) for s in (3, 3, 4)]
    assert draws[0] == draws[1] != draws[2]  # same seed, same failures
    assert 5 < draws[0].count("ok") < 35
    assert _outcomes(_backend(), "mu", (30,), 20) == ["ok"] * 20  # off by default


def test_bad_failure_settings_are_refused_clearly() -> None:
    with pytest.raises(
        ValueError, match=r"fail_skills names skills the drone does not have: \['fly'\]"
    ):
        _backend(fail_skills=["fly"])
    with pytest.raises(ValidationError, match="fail_rate"):
        _backend(fail_rate=1.5)
