"""The model card's natural-set section: the hand-written instructions of
`data/natural_eval.yaml` scored with HF greedy (`evaluate`), and, when
`bench/natural_eval.py` figures are given, on the service with and without the
plan grammar, beside the template sets."""

from __future__ import annotations

from typing import Any

CRITERIA = ("valid", "right_skills", "grounded", "sensible")
GOALS = {"valid": "100%*", "right_skills": "100%*", "grounded": ">= 90%", "sensible": ">= 85%"}
SET_NAMES = {"heldout": "template held-out", "lrtrace": "LRTrace tasks", "natural": "natural"}


def _share(count: int, total: int) -> str:
    return f"{count}/{total} ({100 * count / max(1, total):.1f}%)"


def natural_section(evaluation: dict[str, Any]) -> str:
    """Markdown for the card, or "" when the evaluation has no natural set."""
    natural: dict[str, dict[str, int]] = evaluation.get("natural") or {}
    if not natural:
        return ""
    rows = list(natural.items())
    total = {k: sum(t[k] for _, t in rows) for k in ("plans", *CRITERIA)}
    rows.append(("both", total))
    lines = [
        "",
        "",
        "### Natural set (hand-written, `robot_models/data/natural_eval.yaml`)",
        "Operators' own phrasing, never trained on: questions, wishes, hazards described,",
        "several steps in one sentence, objects the training data never names, typos,",
        "empty scenes, requests outside the robot's skills. Grounded: every named object",
        "is an argument; sensible: the annotated skills, numbers, forbidden skills and",
        "first call as well (`robot_models/natural_score.py`). HF greedy, no grammar:",
        "",
        "| robot | plans | valid | right-robot skills | grounded | sensible |",
        "|---|---|---|---|---|---|",
    ]
    for robot, t in rows:
        cells = " | ".join(_share(t[c], t["plans"]) for c in CRITERIA)
        lines.append(f"| {robot} | {t['plans']} | {cells} |")
    goals = " | ".join(GOALS[c] for c in CRITERIA)
    lines.append(f"| goal | | {goals} |")
    lines.append("")
    lines.append("\\* with the plan grammar (the service's default).")
    engine = evaluation.get("natural_engine")
    if engine:
        lines += _engine_table(engine)
    return "\n".join(lines) + "\n"


def _engine_table(engine: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "On the service (`PlanningService`, torch engine, greedy; `bench/natural_eval.py`):",
        "",
        "| set | grammar | plans | valid | right-robot skills | grounded | sensible | exact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, sides in engine.items():
        for side, label in (
            ("service_without_grammar", "no"),
            ("service_grammar_no_copy", "yes, no copy bias"),
            ("service_with_grammar", "yes (default)"),
            ("service_grounded_names", "yes, grounded names"),
        ):
            f = sides.get(side)
            if f is None:  # figures from before grounded names or the copy bias
                continue
            natural = name == "natural"
            cells = [
                _share(f[c], f["plans"]) if natural or c in ("valid", "right_skills") else "-"
                for c in CRITERIA
            ]
            exact = "-" if natural else _share(f["exact"], f["plans"])
            lines.append(
                f"| {SET_NAMES.get(name, name)} | {label} | {f['plans']} | "
                + " | ".join(cells)
                + f" | {exact} |"
            )
    return lines
