"""How validation problems are listed: all of them, one per line, each with its place."""

from __future__ import annotations

from lrtrace.problems import MAX_SHOWN, a_or_an, listing, where


def test_one_problem_is_one_line() -> None:
    assert listing(["eps: too small"]) == "eps: too small"


def test_several_are_counted_and_listed() -> None:
    assert listing(["a: x", "b: y"]) == "2 problems:\n  a: x\n  b: y"


def test_a_long_list_is_capped() -> None:
    lines = listing([f"p{i}: bad" for i in range(MAX_SHOWN + 3)]).splitlines()
    assert lines[0] == f"{MAX_SHOWN + 3} problems:"
    assert lines[1:-1] == [f"  p{i}: bad" for i in range(MAX_SHOWN)]
    assert lines[-1] == "  (+3 more)"


def test_a_place_names_the_item_of_the_document() -> None:
    doc = {"tasks": [{"task_id": "t0"}, {"task_id": "t1"}], "agents": [{"agent_id": "arm1"}]}
    assert where(("tasks", 1, "urgency"), doc) == "tasks.1.urgency (t1)"
    assert where(("agents", 0, "robot_type"), doc) == "agents.0.robot_type (arm1)"
    assert where(("tasks", 7, "urgency"), doc) == "tasks.7.urgency"  # not in the document
    assert where(("eps",), None) == "eps"


def test_articles() -> None:
    assert (a_or_an("arm"), a_or_an("drone")) == ("an arm", "a drone")
