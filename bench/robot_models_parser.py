"""Streaming plan parser vs the naive baseline, measured in the same run.

The segmenter calls the parser after every decoded token. Baseline: re-parse the
whole text so far from scratch after each token (what a regex/one-shot parser would
do). Ours: feed only the new characters. Reported: total parse time per plan and
time per token; the ratio is what matters (shared, noisy machine).
Writes bench/results/robot_models_parser.json.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

from robot_models.dataset import lrtrace_task
from robot_models.parser import PlanParser
from robot_models.skills import SkillSet

CHARS_PER_TOKEN = 3  # about what the planner's BPE gives on plans
RESULTS = Path(__file__).resolve().parent / "results" / "robot_models_parser.json"


def chunks(text: str) -> list[str]:
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def streaming(skills: SkillSet, parts: list[str]) -> int:
    parser = PlanParser(skills)
    count = sum(len(parser.feed(part)) for part in parts)
    return count + len(parser.close())


def reparse(skills: SkillSet, parts: list[str]) -> int:
    """Baseline: after every token, parse the whole prefix again from scratch."""
    text = ""
    count = 0
    for part in parts:
        text += part
        count = len(PlanParser(skills).feed(text))
    return count


def best_of(fn: Callable[[], int], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    cases = {
        "drone (LRTrace 2)": ("drone", lrtrace_task(2).golden_plan),
        "arm (LRTrace 10)": ("arm", lrtrace_task(10).golden_plan),
        "long arm (10 x LRTrace 10)": ("arm", lrtrace_task(10).golden_plan * 10),
    }
    table = Table(title="Plan parsing after every token: streaming vs re-parse")
    for column in (
        "plan",
        "chars",
        "tokens",
        "re-parse ms",
        "streaming ms",
        "streaming us/token",
        "speed-up",
    ):
        table.add_column(column, justify="right")
    results = []
    for name, (robot_type, plan) in cases.items():
        skills = SkillSet.load(robot_type)
        parts = chunks(plan)
        if streaming(skills, parts) != reparse(skills, parts):
            raise RuntimeError(f"{name}: the two parsers disagree")
        repeats = 20 if len(plan) < 1000 else 5
        base = best_of(partial(reparse, skills, parts), repeats)
        ours = best_of(partial(streaming, skills, parts), repeats)
        results.append(
            {
                "plan": name,
                "chars": len(plan),
                "tokens": len(parts),
                "reparse_s": base,
                "streaming_s": ours,
                "speedup": base / ours,
            }
        )
        table.add_row(
            name,
            str(len(plan)),
            str(len(parts)),
            f"{1e3 * base:.2f}",
            f"{1e3 * ours:.2f}",
            f"{1e6 * ours / len(parts):.1f}",
            f"{base / ours:.1f}x",
        )
    Console(width=130).print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps({"chars_per_token": CHARS_PER_TOKEN, "results": results}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main()
