"""The natural-set scorer on hand-made plans: each criterion (valid, right skills,
grounded, sensible: skills, numbers, forbidden skills, first call) passes for a
plan that meets it and fails for one that misses it."""

from __future__ import annotations

from typing import Any

import pytest

from robot_models.natural_eval import NaturalEntry, NumberRequirement
from robot_models.natural_score import NaturalTally, score_plan

FIND = NaturalEntry(
    scene="visible: sofa",
    instruction="where did my reading glasses go? take a pic when you find them",
    skills=("sw|iv", "tp"),
    objects=("reading glasses|glasses",),
)
DANGER = NaturalEntry(
    scene="visible: dog",
    instruction="the husky is jumping at you from the front, get up and back 1 m",
    skills=("mu", "mb"),
    numbers=(NumberRequirement(skill="mb", value=100, tolerance=10),),
    forbid=("mf|md",),
    first="mb|mu",
)
ARM_MOVE = NaturalEntry(
    scene="",
    instruction="gripper to x 45 cm, y -20 cm, z 30 cm",
    skills=("mt",),
    numbers=(
        NumberRequirement(skill="mt", arg="x", value=450),
        NumberRequirement(skill="mt", arg="y", value=-200),
        NumberRequirement(skill="move_to", arg="z", value=300),
    ),
)


def _score(robot: str, entry: NaturalEntry, plan: str, ended: bool = True) -> dict[str, Any]:
    s = score_plan(robot, entry, plan, ended)
    return {
        "valid": s.valid,
        "right": s.right_skills,
        "grounded": s.grounded,
        "sensible": s.sensible,
        "problems": s.problems,
    }


def test_a_plan_meeting_every_requirement_is_sensible() -> None:
    plan = "?sw('reading glasses')==True{o('reading glasses');a('reading glasses');tp();}"
    assert _score("drone", FIND, plan) == {
        "valid": True,
        "right": True,
        "grounded": True,
        "sensible": True,
        "problems": (),
    }
    # another spelling the annotation allows, matched case-insensitively; full names count
    assert _score("drone", FIND, "_1=is_visible('Glasses');take_picture();")["sensible"]


@pytest.mark.parametrize(
    ("plan", "ended", "expected", "problem"),
    [
        ("?sw('reading glasses')==True{tp();", True, (False, True, False, False), "invalid"),
        ("?sw('reading glasses')==True{tp();}", False, (False, True, False, False), "EOS"),
        ("pk('reading glasses');tp();", True, (False, False, False, False), "invalid"),
        ("", True, (False, True, False, False), "empty plan"),
        ("mf(600);", True, (False, True, False, False), "out of range"),
    ],
)
def test_an_invalid_plan_is_neither_grounded_nor_sensible(
    plan: str, ended: bool, expected: tuple[bool, ...], problem: str
) -> None:
    got = _score("drone", FIND, plan, ended)
    assert (got["valid"], got["right"], got["grounded"], got["sensible"]) == expected
    assert problem in got["problems"][0]


def test_grounded_needs_the_named_object_as_an_object_argument() -> None:
    # a training-set object instead of the named one
    got = _score("drone", FIND, "?sw('toy')==True{o('toy');a('toy');tp();}")
    assert (got["valid"], got["grounded"], got["sensible"]) == (True, False, False)
    assert got["problems"] == ("no object argument 'reading glasses|glasses'",)
    # a log message naming the object is no object argument
    assert not _score("drone", FIND, "lg('reading glasses');_1=sw('x');tp();")["grounded"]
    # part of the name is not the name
    assert not _score("drone", FIND, "_1=sw('reading');tp();")["grounded"]


def test_sensible_needs_each_skill_family() -> None:
    got = _score("drone", FIND, "o('glasses');a('glasses');")
    assert (got["grounded"], got["sensible"]) == (True, False)
    assert got["problems"] == ("no call of sw|iv", "no call of tp")


def test_numbers_are_matched_within_tolerance_on_the_right_skill() -> None:
    assert _score("drone", DANGER, "mb(100);mu(50);")["sensible"]
    assert _score("drone", DANGER, "mu(50);mb(91);")["sensible"]
    for plan in ("mb(80);mu(50);", "mb(111);mu(50);", "mu(100);mb(50);"):
        got = _score("drone", DANGER, plan)
        assert got["problems"] == ("no mb with its number 100 +- 10",), plan


def test_forbidden_skills_and_the_first_call() -> None:
    got = _score("drone", DANGER, "mb(100);mu(50);mf(100);")
    assert got["problems"] == ("calls forbidden mf",)
    got = _score("drone", DANGER, "tp();mb(100);mu(50);")
    assert got["problems"] == ("first call is tp, not one of mb|mu",)
    # a plan that only assigns a variable calls no skill: not sensible, and no crash
    got = _score("drone", DANGER, "_1=1;")
    assert got["problems"][-1] == "no call at all, the first must be one of mb|mu"
    # a call inside a block still counts as called
    got = _score("drone", DANGER, "mb(100);mu(50);?iv('dog')==True{md(20);}")
    assert got["problems"] == ("calls forbidden md",)


def test_arm_positions_are_checked_per_named_argument() -> None:
    assert _score("arm", ARM_MOVE, "mt(450,-200,300);")["sensible"]
    got = _score("arm", ARM_MOVE, "mt(450,200,300);")  # y's sign lost
    assert got["problems"] == ("no mt with y -200 +- 0",)
    got = _score("arm", ARM_MOVE, "mt(300,-200,450);")  # x and z swapped
    assert got["problems"] == ("no mt with x 450 +- 0", "no move_to with z 300 +- 0")


def test_an_arm_plan_with_drone_skills_is_the_wrong_robot() -> None:
    got = _score("arm", ARM_MOVE, "tk();mf(100);")
    assert (got["valid"], got["right"]) == (False, False)


def test_tally_counts_and_rates() -> None:
    tally = NaturalTally()
    tally.add(score_plan("drone", FIND, "_1=sw('glasses');tp();"))
    tally.add(score_plan("drone", FIND, "_1=sw('toy');tp();"))
    tally.add(score_plan("drone", FIND, "sw("))
    both = tally.merged(tally)
    assert (both.plans, both.valid, both.right_skills, both.grounded, both.sensible) == (
        6,
        4,
        6,
        2,
        2,
    )
    assert tally.rate("grounded") == pytest.approx(1 / 3)
