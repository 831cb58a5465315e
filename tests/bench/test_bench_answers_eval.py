"""bench/answers_eval.py: its cases ask a perception skill, each is planned with
and without the perception tool's answers on the service, and it scores the pair."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from answers_eval import cases, evaluate, table_row  # noqa: E402

from robot_models.checkpoints import default_planner_path  # noqa: E402
from robot_models.dataset import build_dataset  # noqa: E402
from robot_models.dataset.answers import asks  # noqa: E402


def test_cases_ask_and_alternate_robot_types_then_the_lrtrace_tasks() -> None:
    chosen = cases(6)
    heldout = [c for c in chosen if c.source == "heldout"]
    assert [c.robot_type for c in heldout] == ["drone", "arm"] * 3
    lrtrace = [c for c in chosen if c.source == "lrtrace"]
    assert len(lrtrace) == sum(asks(e) for e in build_dataset().lrtrace) == 8
    assert all("lk('" in c.golden or "sw('" in c.golden or "iv('" in c.golden for c in chosen)


def test_each_case_is_planned_with_and_without_answers_and_scored() -> None:
    chosen = [c for c in cases(2) if c.source == "heldout"]
    result = evaluate(default_planner_path(), chosen, seed=0)
    totals = result["totals"]
    assert totals["heldout:cases"] == 2 and totals["heldout:answers_shown"] >= 2
    for row in result["plans"]:
        assert row["error"] == "" and "->" not in row["with_answers"]
        assert row["answers_shown"] >= 1
    unchanged = sum(r["with_answers"] == r["without_answers"] for r in result["plans"])
    assert totals["heldout:unchanged"] == unchanged
    assert table_row(totals, "heldout")[0] == "2" and table_row(totals, "lrtrace") == []


def test_the_shipped_planner_writes_the_lrtrace_drone_plans_unchanged_by_answers() -> None:
    """Before the answers stage the planner lost every LRTrace plan that asks once the
    answers were appended (`?sw('keys')` five times, `lg('cat');`); now each drone
    plan is the golden one with the answers shown, and the arm plans stay valid."""
    chosen = [c for c in cases(0) if c.source == "lrtrace"]
    result = evaluate(default_planner_path(), chosen, seed=0)
    by_instruction = {c.instruction: c for c in chosen}
    for row in result["plans"]:
        case = by_instruction[row["instruction"]]
        assert row["error"] == "" and row["answers_shown"] >= 1, row
        if case.robot_type == "drone":
            assert row["with_answers"] == case.golden, row
    assert result["totals"]["lrtrace:valid"] == len(chosen)
