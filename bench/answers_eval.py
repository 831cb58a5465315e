"""Plans shown a perception tool's answers (issue #23), on the service: does the
plan go on as it would have without them?

Each case is planned twice on `timely_core.PlanningService` (torch engine, greedy,
the service's defaults: plan grammar and copy bias on): once as is, and once with
the shipped perception tool (`robot_models.tools.perception:ScenePerception`, a real
plugin process) registered with `append_observations`, so each answer to an
`lk('cup')` or `sw('cat')` is appended to the generation after its statement and
the planner goes on from there. The robot reports each segment done as it comes.

Cases: the template held-out examples whose plans ask a perception skill about a
named object, and the 11 LRTrace tasks (those that ask). Scored per checkpoint:
valid (the answered plan parses, right-robot skills), `unchanged` (the answered plan
equals the plan without answers: the answers are read by the plan's own conditions
when the robot runs it, so nothing should change), `exact` (the answered plan equals
the golden plan) and the golden rate without answers beside it.

    PYTHONPATH=. .venv/bin/python bench/answers_eval.py [--cases 80] \
        [--checkpoint LABEL=DIR ...]

With no `--checkpoint`, the shipped planner alone; several compare checkpoints in
one run (a baseline and a candidate). Writes bench/results/answers_eval.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import build_dataset
from robot_models.dataset.answers import asks
from robot_models.language import load_language
from robot_models.plan_check import check_plan
from timely_core.clock import VirtualClock
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.request import TaskRequest
from timely_core.service import PlanningService

RESULTS = Path(__file__).resolve().parent / "results" / "answers_eval.json"
PERCEPTION = "robot_models.tools.perception:ScenePerception"
ROBOTS = ("drone", "arm")


@dataclass(frozen=True)
class Case:
    source: str  # "heldout" or "lrtrace"
    robot_type: str
    scene: str
    instruction: str
    golden: str


def cases(count: int) -> list[Case]:
    """`count` held-out cases that ask a perception skill (robot types alternating),
    then the LRTrace tasks that do."""
    data = build_dataset()
    by_type = {t: [e for e in data.heldout if e.robot_type == t and asks(e)] for t in ROBOTS}
    picked = [e for pair in zip(by_type["drone"], by_type["arm"], strict=False) for e in pair]
    chosen = [Case("heldout", e.robot_type, e.scene, e.instruction, e.plan) for e in picked]
    chosen = chosen[:count]
    chosen += [
        Case("lrtrace", e.robot_type, e.scene, e.instruction, e.plan)
        for e in data.lrtrace
        if asks(e)
    ]
    return chosen


@contextmanager
def planner(checkpoint: Path, answered: bool, seed: int) -> Iterator[PlanningService]:
    engine = TorchEngine(checkpoint, EngineConfig())
    service = PlanningService(
        engine,
        Tokenizer.from_file(str(checkpoint / "tokenizer.json")),
        "timely",
        clock=VirtualClock(),
        languages={t: load_language(t) for t in ROBOTS},
    )
    for robot_type in ROBOTS:
        service.register_robot(robot_type, robot_type=robot_type)
        if answered:
            service.register_tool(
                robot_type,
                {
                    "name": "look",
                    "plugin": PERCEPTION,
                    "append_observations": True,
                    "options": {"robot_type": robot_type, "validates": True, "seed": seed},
                },
            )
    try:
        yield service
    finally:
        service.close_tools()


def plan(service: PlanningService, case: Case) -> tuple[str, str, int]:
    """(plan text, error, answers shown) of one task, its robot reporting each
    segment done as soon as it is dispatched."""
    handle = service.submit(
        TaskRequest(robot_id=case.robot_type, instruction=case.instruction, scene=case.scene)
    )
    delivered: list[int] = []
    handle.on_segment(lambda segment: delivered.append(segment.index))
    while not handle.done():
        service.run_until_idle()
        while delivered:
            index = delivered.pop(0)
            if not handle.done():
                handle.segment_done(index)
    result = handle.result(timeout_s=0)
    shown = sum(o.kind == "observation" for o in service.tool_outcomes(handle.task_id))
    return result.plan_text, result.error or "", shown


def evaluate(checkpoint: Path, chosen: list[Case], seed: int) -> dict[str, Any]:
    plans: dict[bool, list[tuple[str, str, int]]] = {}
    for answered in (False, True):
        with planner(checkpoint, answered, seed) as service:
            plans[answered] = [plan(service, case) for case in chosen]
    totals: Counter[str] = Counter()
    rows = []
    for case, (bare, _, _), (text, error, shown) in zip(
        chosen, plans[False], plans[True], strict=True
    ):
        check = check_plan(case.robot_type, text)
        valid = not error and check.valid and check.right_skills
        key = case.source
        totals[f"{key}:cases"] += 1
        totals[f"{key}:answers_shown"] += shown
        totals[f"{key}:valid"] += valid
        totals[f"{key}:unchanged"] += text == bare
        totals[f"{key}:exact"] += text == case.golden
        totals[f"{key}:exact_without_answers"] += bare == case.golden
        rows.append(
            {
                "source": key,
                "instruction": case.instruction,
                "golden": case.golden,
                "without_answers": bare,
                "with_answers": text,
                "error": error,
                "answers_shown": shown,
            }
        )
    return {"totals": dict(totals), "plans": rows}


def table_row(totals: dict[str, int], source: str) -> list[str]:
    """The table's figures of one set ([] when it had no case)."""
    n = totals.get(f"{source}:cases", 0)
    if not n:
        return []
    shares = ("valid", "unchanged", "exact", "exact_without_answers")
    return [
        str(n),
        str(totals.get(f"{source}:answers_shown", 0)),
        *(f"{totals.get(f'{source}:{name}', 0)}/{n}" for name in shares),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=80, help="held-out cases (LRTrace added)")
    parser.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="a checkpoint to score (repeat to compare); default: the shipped planner",
    )
    parser.add_argument("--seed", type=int, default=0, help="the perception tool's seed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error("--cases must be at least 1")
    checkpoints: dict[str, Path] = {}
    for item in args.checkpoint or [f"shipped={default_planner_path()}"]:
        label, sep, path = item.partition("=")
        if not sep or not label or not Path(path, "model.safetensors").is_file():
            parser.error(f"--checkpoint {item!r}: expected LABEL=DIR holding model.safetensors")
        checkpoints[label] = Path(path)
    torch.set_num_threads(args.threads)
    machine = MachineRecord()
    chosen = cases(args.cases)
    console = Console()
    console.print(f"{len(chosen)} cases; checkpoints: {', '.join(checkpoints)}")
    results: dict[str, Any] = {}
    started = time.perf_counter()
    for label, path in checkpoints.items():
        t0 = time.perf_counter()
        results[label] = {"checkpoint": str(path), **evaluate(path, chosen, args.seed)}
        results[label]["seconds"] = time.perf_counter() - t0
        console.print(f"{label}: {results[label]['seconds']:.0f} s")
    table = Table(title="plans shown a perception tool's answers (service, torch, greedy)")
    for column in ("checkpoint", "set", "cases", "answers", "valid", "unchanged", "exact"):
        table.add_column(column)
    table.add_column("exact without answers")
    for label, result in results.items():
        for source in ("heldout", "lrtrace"):
            row = table_row(result["totals"], source)
            if row:
                table.add_row(label, source, *row)
    console.print(table)
    record = {
        "cases": len(chosen),
        "seed": args.seed,
        "seconds": time.perf_counter() - started,
        "machine": machine.done(),
        "results": results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    console.print(MachineRecord.line(record["machine"]))
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
