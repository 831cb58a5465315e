"""The scripted planners' recovery after a failure observation: the failed
segment again, then the rest of the plan."""

from __future__ import annotations

from robot_models.language import load_language
from robot_models.recovery import retry_after_failure

PLAN = "mu(150);tc(180);mf(200);"


def _observation(segment: str, error: str) -> str:
    return "\n" + load_language("drone").failure_observation(segment, error) + "\n"


def test_a_failed_segment_is_retried_then_the_plan_goes_on() -> None:
    written = "mu(150);tc(180);" + _observation("tc(180);", "motor stalled")
    assert _observation("tc(180);", "motor stalled") == "\ntc(180);->failed('motor stalled')\n"
    assert retry_after_failure(PLAN, written) == "tc(180);mf(200);"


def test_a_retry_that_fails_again_is_retried_again() -> None:
    obs = _observation("tc(180);", "motor stalled")
    assert retry_after_failure(PLAN, "mu(150);tc(180);" + obs + "tc(180);" + obs) == (
        "tc(180);mf(200);"
    )
    later = "mu(150);tc(180);" + obs + "tc(180);mf(200);" + _observation("mf(200);", "wall")
    assert retry_after_failure(PLAN, later) == "mf(200);"


def test_no_recovery_without_a_failure_or_for_another_plan() -> None:
    assert retry_after_failure(PLAN, "mu(150);tc(180);") is None
    assert retry_after_failure(PLAN, "mu(150);tc(180);\n") is None
    assert retry_after_failure(PLAN, "md(20);" + _observation("md(20);", "x")) is None
