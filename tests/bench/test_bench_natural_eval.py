"""bench/natural_eval.py's sets and scoring: a generated set is scored by plan family
as well as in total, and the frames set is the request grammar's own held-out split
(every family of both robots), outside the default run whose totals go to the model
card."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from natural_eval import DEFAULT_SETS, Case, Plan, cases_of, print_families, score  # noqa: E402


def test_a_generated_set_is_scored_by_plan_family() -> None:
    cases = [
        Case("drone", "", "take off", "tk();", None, "motion"),
        Case("drone", "", "climb 1 m then land", "mu(100);ld();", None, "motion"),
        Case("drone", "visible: cat", "find the cat", "o('cat');a('cat');tp();", None, "find"),
    ]
    plans = [
        Plan("tk();", True),
        Plan("mu(180);", True),  # valid, not exact
        Plan("o('cat');a('ca", False),  # unfinished: not valid
    ]
    figures = score(cases, plans)
    assert (figures["plans"], figures["valid"], figures["exact"]) == (3, 2, 1)
    assert figures["by_family"] == {
        "find": {"plans": 1, "valid": 0, "exact": 0},
        "motion": {"plans": 2, "valid": 2, "exact": 1},
    }
    console = Console(width=160, record=True)
    print_families("frames", {"service_with_grammar": figures, "hf": None}, console)
    rows = [line for line in console.export_text().splitlines() if "(" in line and "│" in line]
    assert "find" in rows[0] and "motion" in rows[1]  # least exact first
    assert "1 (2)" in rows[1]


def test_the_frames_set_is_the_request_grammars_held_out_split() -> None:
    assert "frames" not in DEFAULT_SETS
    sets = cases_of(("frames", "lrtrace"))
    frames = sets["frames"]
    assert len(frames) == 300 and {c.robot for c in frames} == {"drone", "arm"}
    assert all(c.golden and c.family and c.entry is None for c in frames)
    assert len({c.family for c in frames}) > 10
    assert len(sets["lrtrace"]) == 11
