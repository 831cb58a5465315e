"""The limit checker: commanded moves tracked statement by statement against a
robot's safety limits, and the rule for effects only known at run time."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from robot_models.language import load_language
from robot_models.limit_checker import LimitChecker, LimitVerdict, checker_factory
from robot_models.safety_limits import Box, SafetyLimits

FENCE = Box(x_min=-100, x_max=300, y_min=-200, y_max=200, z_min=0, z_max=250)


def verdicts(plan: str, limits: SafetyLimits, robot: str = "drone") -> list[LimitVerdict]:
    language = load_language(robot)
    checker = LimitChecker(limits, language.skill_set)
    return [checker.check(statement) for statement in language.parse(plan)]


def statuses(plan: str, limits: SafetyLimits, robot: str = "drone") -> list[str]:
    return [v.status for v in verdicts(plan, limits, robot)]


def test_geofence_crossed_mid_plan_names_limit_statement_and_value() -> None:
    found = verdicts("tk();mf(200);mf(150);ld();", SafetyLimits(geofence_cm=FENCE))
    assert [v.status for v in found[:3]] == ["ok", "ok", "violation"]
    broken = found[2]
    assert broken.limit == "geofence_cm.x_max"
    assert broken.statement == "mf(150);"
    assert "350" in broken.value and "300" in broken.value
    assert "geofence_cm.x_max" in broken.message and "mf(150);" in broken.message


def test_turn_then_forward_changes_the_direction() -> None:
    limits = SafetyLimits(geofence_cm=FENCE)
    # facing backward after 180 degrees: 200 cm forward is x -200, past x_min -100
    assert statuses("tk();tc(180);mf(200);", limits) == ["ok", "ok", "violation"]
    assert verdicts("tk();tc(180);mf(200);", limits)[2].limit == "geofence_cm.x_min"
    # clockwise 90 faces right (-y): 250 cm right is y -250, past y_min -200
    assert verdicts("tk();tc(90);mf(250);", limits)[2].limit == "geofence_cm.y_min"
    # counter-clockwise 90 faces left (+y)
    assert verdicts("tk();tu(90);mf(250);", limits)[2].limit == "geofence_cm.y_max"
    # without the turn the same move stays inside
    assert statuses("tk();mf(250);", limits) == ["ok", "ok"]


def test_max_altitude() -> None:
    limits = SafetyLimits(max_altitude_cm=200)
    found = verdicts("tk();mu(80);mu(50);", limits)
    assert [v.status for v in found] == ["ok", "ok", "violation"]
    assert found[2].limit == "max_altitude_cm" and "230" in found[2].value
    # landing brings it back to the ground: climbing again is fine
    assert statuses("tk();mu(80);ld();tk();mu(80);", limits) == ["ok"] * 5


def test_max_distance_per_statement_counts_loops() -> None:
    limits = SafetyLimits(max_distance_cm=300)
    assert statuses("mf(300);mf(300);", limits) == ["ok", "ok"]
    found = verdicts("mf(100);3{mf(100);mr(50);}", limits)
    assert [v.status for v in found] == ["ok", "violation"]
    assert found[1].limit == "max_distance_cm" and "400 cm" in found[1].value


def test_forbidden_skill_anywhere_in_the_statement() -> None:
    limits = SafetyLimits(forbidden_skills=("approach",))
    found = verdicts("tk();?iv('cat')==True{a('cat');}", limits)
    assert [v.status for v in found] == ["ok", "violation"]
    assert found[1].limit == "forbidden_skills" and "a is forbidden" in found[1].value


def test_approval_needed_skill() -> None:
    limits = SafetyLimits(approval_skills=("take_picture",))
    found = verdicts("tk();?iv('cat')==True{tp();}ld();", limits)
    assert [v.status for v in found] == ["ok", "approval", "ok"]
    assert found[1].limit == "approval_skills" and "tp" in found[1].message


def test_a_violation_outranks_an_approval() -> None:
    limits = SafetyLimits(geofence_cm=FENCE, approval_skills=("tp",))
    assert statuses("tk();mf(200);tp();mf(200);", limits) == ["ok", "ok", "approval", "violation"]


def test_conditional_block_may_or_may_not_run() -> None:
    limits = SafetyLimits(geofence_cm=FENCE)
    # the block (x +200) may run: the next 150 cm could reach 350
    found = verdicts("tk();?iv('cat')==True{mf(200);}mf(150);", limits)
    assert [v.status for v in found] == ["ok", "ok", "violation"]
    assert "could reach 350" in found[2].value
    # and may not: backing off 150 cm from either 0 or 200 could reach -150
    assert statuses("tk();?iv('cat')==True{mf(200);}mb(150);", limits)[2] == "violation"


def test_literal_loops_are_unrolled() -> None:
    limits = SafetyLimits(geofence_cm=FENCE)
    assert statuses("tk();4{mf(100);tc(90);}", limits) == ["ok", "ok"]  # a square
    found = verdicts("tk();4{mf(100);}", limits)
    assert found[1].status == "violation" and "400" in found[1].value


def test_unknown_turn_makes_every_horizontal_direction_possible() -> None:
    limits = SafetyLimits(geofence_cm=FENCE)
    # after sweep the heading is unknown: 150 cm could go backward, past x_min -100
    found = verdicts("tk();_1=sw('cat');mf(150);", limits)
    assert [v.status for v in found] == ["ok", "ok", "violation"]
    assert found[2].limit == "geofence_cm.x_min" and "could" in found[2].value
    assert statuses("tk();_1=sw('cat');mf(90);", limits) == ["ok", "ok", "ok"]


def test_unknowable_moves_are_violations_only_with_a_position_limit() -> None:
    plan = "tk();_1=ox('cat');mf(_1);"
    found = verdicts(plan, SafetyLimits(geofence_cm=FENCE))
    assert found[2].status == "violation" and found[2].limit == "geofence_cm"
    assert "only known when it runs" in found[2].value
    assert verdicts("tk();a('cat');", SafetyLimits(max_altitude_cm=300))[1].status == "violation"
    # without a position limit there is nothing to break
    free = SafetyLimits(approval_skills=("tp",))
    assert statuses(plan, free) == ["ok", "ok", "ok"]
    assert statuses("tk();a('cat');", free) == ["ok", "ok"]


def test_arm_workspace_limits_move_to_targets() -> None:
    box = Box(x_min=200, x_max=600, y_min=-300, y_max=300, z_min=50, z_max=500)
    limits = SafetyLimits(workspace_mm=box, approval_skills=("sort",))
    found = verdicts("hm();mt(300,0,100);mt(700,0,100);", limits, "arm")
    assert [v.status for v in found] == ["ok", "ok", "violation"]
    assert found[2].limit == "workspace_mm.x_max" and "700" in found[2].value
    assert statuses("so('apple','fruit bin');", limits, "arm") == ["approval"]


def test_limits_are_checked_against_the_robot_type() -> None:
    drone = load_language("drone").skill_set
    arm = load_language("arm").skill_set
    with pytest.raises(ValueError, match="forbidden_skills: 'mt' is not a skill of the drone"):
        checker_factory(SafetyLimits(forbidden_skills=("mt",)), drone)
    with pytest.raises(ValueError, match="geofence_cm: not a limit of the arm"):
        checker_factory(SafetyLimits(geofence_cm=FENCE), arm)
    with pytest.raises(ValueError, match="approval_skills: approach also forbidden"):
        checker_factory(SafetyLimits(forbidden_skills=("a",), approval_skills=("approach",)), drone)
    with pytest.raises(ValidationError, match=r"x_min .* must be below x_max"):
        Box(x_min=5, x_max=5, y_min=0, y_max=1, z_min=0, z_max=1)


def test_each_task_gets_its_own_checker() -> None:
    language = load_language("drone")
    make = checker_factory(SafetyLimits(geofence_cm=FENCE), language.skill_set)
    first, second = make(), make()
    for statement in language.parse("tk();mf(250);"):
        assert first.check(statement).status == "ok"
    assert second.pose.x.hi == 0 and first.pose.x.hi == 250
