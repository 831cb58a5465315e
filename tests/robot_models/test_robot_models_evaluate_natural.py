"""`evaluate` on the natural set with a planner whose plans are given: each plan is
scored against its own annotation and tallied per robot type, the records keep the
plan and its problems, and the side-by-side table prints every set."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console

from robot_models.dataset import Example
from robot_models.evaluate import (
    FamilyTally,
    evaluate,
    natural_examples,
    natural_total,
    print_families,
    print_sets,
    trained_generator,
)


class GivenPlans:
    """Answers each instruction with the plan given for it."""

    def __init__(self, plans: dict[str, tuple[str, bool]]) -> None:
        self.plans = plans
        self.batches: list[tuple[str, int]] = []

    def plan_batch(
        self, robot_type: str, requests: Sequence[tuple[str, str]]
    ) -> list[tuple[str, bool]]:
        self.batches.append((robot_type, len(requests)))
        return [self.plans.get(instruction, ("", True)) for _, instruction in requests]


def test_natural_plans_are_scored_against_their_annotations() -> None:
    natural = natural_examples()
    by_text = {e.instruction: (e, entry) for e, entry in natural}
    find, _ = by_text["search the room for a yellow rubber duck"]
    hand, _ = by_text["forceps please"]
    planner = GivenPlans(
        {
            find.instruction: ("?sw('yellow rubber duck')==True{tp();}", True),  # sensible
            hand.instruction: ("hm();?lk('scalpel')==True{pk('scalpel');og();}", True),
        }
    )
    heldout = [Example("drone", "visible: sofa", "Take off", "tk();", "takeoff_land")]
    report = evaluate(planner, heldout, [], natural)
    drone, arm = report.natural["drone"], report.natural["arm"]
    assert (drone.plans, arm.plans) == (174, 178)
    assert (drone.valid, drone.grounded, drone.sensible) == (1, 1, 1)
    assert (arm.valid, arm.grounded, arm.sensible) == (1, 0, 0)  # the wrong tool
    assert natural_total(report).plans == 352
    record = next(r for r in report.natural_plans if r["instruction"] == "forceps please")
    assert record["problems"] == ["no object argument 'forceps'"]
    assert report.heldout_total == 1 and report.heldout_valid == 0  # "" is no plan
    assert all(size <= 16 for _, size in planner.batches)  # batches of one robot type
    console = Console(width=200, record=True)
    print_sets(report, console)
    text = console.export_text()
    for row in ("template held-out", "LRTrace tasks", "natural, drone", "natural, both"):
        assert row in text
    assert "1/174 (0.6%)" in text


def test_the_heldout_split_scored_is_the_one_the_checkpoint_trained_on(tmp_path: Path) -> None:
    assert trained_generator(tmp_path) == "templates"  # no statistics: the shipped recipe
    (tmp_path / "train_stats.json").write_text(json.dumps({"config": {"data": "frames"}}))
    assert trained_generator(tmp_path) == "frames"
    (tmp_path / "train_stats.json").write_text(json.dumps({"config": {"data": "poems"}}))
    with pytest.raises(ValueError, match="unknown data generator 'poems'"):
        trained_generator(tmp_path)


def test_heldout_plans_are_tallied_by_family_least_exact_first() -> None:
    heldout = [
        Example("drone", "", "Take off", "tk();", "motion"),
        Example("drone", "", "Climb 1 m then land", "mu(100);ld();", "motion"),
        Example("drone", "visible: cat", "Find the cat", "o('cat');a('cat');tp();", "find"),
    ]
    planner = GivenPlans(
        {
            "Take off": ("tk();", True),  # exact
            "Climb 1 m then land": ("mu(180);", True),  # valid, not exact
            "Find the cat": ("o('cat');a('cat');tp();", True),
        }
    )
    report = evaluate(planner, heldout, [])
    assert report.families == {"motion": FamilyTally(2, 2, 1), "find": FamilyTally(1, 1, 1)}
    console = Console(width=200, record=True)
    print_families(report, console)
    lines = [line for line in console.export_text().splitlines() if "/" in line]
    assert "motion" in lines[0] and "1/2 (50.0%)" in lines[0]  # least exact first
    assert "find" in lines[1]
