"""Plans that react, scored (issue #23): after a robot's failure observation, does
the planner write the recovery of `dataset/observations.py`'s policy?

    python -m robot_models.observation_eval [--checkpoint DIR] [--cases 120] [--json F]

The cases are failure variants of the template held-out examples (never trained
on, whatever a checkpoint's `--observations`): the planner gets the request, the
plan up to the failed statement and the observation (each piece encoded on its own,
as the service appends them) and decodes greedily (HF transformers). Scored:
`exact` (the continuation is the policy's, to the end of the plan) and `first` (its
first statement is the policy's: the retry, the detour, the report).
`bench/recovery_eval.py` scores the same cases decoded as the service decodes them
(the torch engine, with the plan grammar and the copy bias).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import DEFAULT_SEED, Example, build_dataset
from robot_models.dataset.observations import plan_language, with_failure
from robot_models.reference_planner import ReferencePlanner


@dataclass(frozen=True)
class RecoveryCase:
    example: Example  # its plan holds the observations (`Example.observed`)
    written: tuple[str, ...]  # the pieces up to and including the last observation
    expected: str  # the policy's continuation after it
    kind: str  # which recovery (`FAILURE_KINDS` name)


def recovery_cases(count: int, seed: int = DEFAULT_SEED) -> list[RecoveryCase]:
    """`count` failure variants of the held-out examples, robot types alternating."""
    rng = random.Random(seed + 7)
    heldout = list(build_dataset(seed).heldout)
    rng.shuffle(heldout)
    cases: list[RecoveryCase] = []
    for example in heldout:
        failed = with_failure(example, rng)
        if failed is None:
            continue
        pieces = failed.pieces()
        last = max(i for i, (_, is_observation) in enumerate(pieces) if is_observation)
        written = tuple(text for text, _ in pieces[: last + 1])
        expected = "".join(text for text, _ in pieces[last + 1 :])
        kind = failed.family.rsplit("+", 1)[-1]
        cases.append(RecoveryCase(failed, written, expected, kind))
        if len(cases) == count:
            break
    return cases


def first_statement(robot_type: str, text: str) -> str:
    """The first complete statement of `text` ('' if none parses)."""
    try:
        statements = plan_language(robot_type).parse(text)
    except ValueError:
        return ""
    return statements[0].text if statements else ""


class ContinuingPlanner(Protocol):
    def plan(
        self, robot_type: str, scene: str, instruction: str, *, written: Sequence[str]
    ) -> tuple[str, bool]: ...


def score(planner: ContinuingPlanner, cases: list[RecoveryCase]) -> dict[str, object]:
    totals: Counter[str] = Counter()
    plans = []
    for case in cases:
        e = case.example
        text, _ = planner.plan(e.robot_type, e.scene, e.instruction, written=case.written)
        exact = text == case.expected
        first = first_statement(e.robot_type, text) == first_statement(e.robot_type, case.expected)
        totals["cases"] += 1
        totals["exact"] += exact
        totals["first"] += first
        totals[f"{case.kind}:cases"] += 1
        totals[f"{case.kind}:first"] += first
        plans.append({"written": "".join(case.written), "expected": case.expected, "got": text})
    return {"totals": dict(totals), "plans": plans}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=default_planner_path())
    parser.add_argument("--cases", type=int, default=120)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error("--cases must be at least 1")
    result = score(ReferencePlanner(args.checkpoint), recovery_cases(args.cases))
    totals = result["totals"]
    assert isinstance(totals, dict)
    for key in sorted(totals):
        print(f"{key:>20}: {totals[key]}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
