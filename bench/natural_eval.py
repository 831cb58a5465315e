"""The planner checkpoint on the service, with and without the plan grammar, on the
three sets side by side: template held-out, the 11 LRTrace tasks and the hand-written
natural set (`robot_models/data/natural_eval.yaml`, scored valid, right-robot skills,
grounded and sensible by `robot_models.natural_score`); with `--sets frames`, the
open-lexicon request grammar's held-out split, scored by plan family too. In the same run, HF greedy
(`robot_models.evaluate`, the reference) plans the same requests, and the service's
plans without the grammar are compared with HF's token text: identical, or (for a
plan HF writes invalid) the service stopped at the statement it rejected.

The service is `timely_core.PlanningService` on the torch engine, greedy, many robots
at once, each robot's tasks one after another, segments marked done as they come.

    PYTHONPATH=. .venv/bin/python bench/natural_eval.py [--threads 2] [--robots 12]
    PYTHONPATH=. .venv/bin/python bench/natural_eval.py --sets frames \
        --out bench/results/natural_eval_frames.json

Writes bench/results/natural_eval.json (with os.getloadavg(): the machine is shared);
its "card" entry is what `python -m robot_models.evaluate --update-card
--engine-figures bench/results/natural_eval.json` puts in the model card.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import DatasetSplit, build_dataset
from robot_models.dataset.build import Generator
from robot_models.evaluate import FamilyTally, greedy_plans, natural_examples
from robot_models.language import load_language
from robot_models.natural_eval import NaturalEntry
from robot_models.natural_score import NaturalTally, score_plan
from robot_models.plan_check import check_plan
from robot_models.reference_planner import ReferencePlanner
from timely_core.clock import MonotonicClock
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

RESULTS = Path(__file__).resolve().parent / "results" / "natural_eval.json"
ROBOTS = ("drone", "arm")
MAX_TOKENS = 256  # as HF's DEFAULT_MAX_NEW_TOKENS in robot_models.evaluate
CRITERIA = ("valid", "right_skills", "grounded", "sensible")
SETS = ("heldout", "lrtrace", "natural", "frames")
DEFAULT_SETS = ("heldout", "lrtrace", "natural")  # the model card's
DECODERS = {
    "hf": "HF greedy",
    "service_without_grammar": "service, no grammar",
    "service_grammar_no_closing": "service, grammar, no closing, no copy bias",
    "service_grammar_no_copy": "service, grammar, no copy bias",
    "service_not_distinct": "service, grammar, closing, copy bias without distinct names",
    "service_with_grammar": "service, grammar (default: closing, copy bias)",
    "service_grounded_names": "service, grammar, grounded names",
}


@dataclass(frozen=True)
class Case:
    robot: str
    scene: str
    instruction: str
    golden: str | None  # template, frames and LRTrace sets
    entry: NaturalEntry | None  # natural set
    family: str = ""  # the generated example's plan family (`Example.family`)


@dataclass(frozen=True)
class Plan:
    text: str
    ended: bool  # a complete plan: EOS (HF) or a successful task (service)
    error: str = ""


def cases_of(names: tuple[str, ...] = DEFAULT_SETS) -> dict[str, list[Case]]:
    """The sets called `names`: "heldout" (the templates' held-out split), "lrtrace",
    "natural", and "frames" (the open-lexicon request grammar's held-out split:
    phrasings and objects the planner has not seen)."""
    sets: dict[str, list[Case]] = {}
    built: dict[str, DatasetSplit] = {}
    for name in names:
        if name == "natural":
            sets[name] = [
                Case(e.robot_type, e.scene, e.instruction, None, entry)
                for e, entry in natural_examples()
            ]
            continue
        generator: Generator = "frames" if name == "frames" else "templates"
        if generator not in built:
            built[generator] = build_dataset(generator=generator)
        data = built[generator]
        examples = data.lrtrace if name == "lrtrace" else data.heldout
        sets[name] = [
            Case(e.robot_type, e.scene, e.instruction, e.plan, None, e.family) for e in examples
        ]
    return sets


def serve(
    path: Path,
    cases: list[Case],
    grammar: bool,
    robots: int,
    threads: int,
    close_within: int,
    grounded_names: bool = False,
    copy_bias: float = ServiceConfig().copy_bias,
    plan_candidates: int = 0,
    coverage_weight: float = ServiceConfig().candidate_coverage_weight,
    distinct_names: bool = True,
) -> list[Plan]:
    """Each case planned by the service; `robots` robots of each type at once;
    `close_within`: `ServiceConfig.grammar_close_within` (0: no closing);
    `grounded_names`, `copy_bias`, `plan_candidates`, `coverage_weight`
    (`candidate_coverage_weight`), `distinct_names`: as `ServiceConfig`'s."""
    engine = TorchEngine(path, EngineConfig(num_threads=threads))
    languages: dict[str, PlanLanguage] = {r: load_language(r) for r in ROBOTS}
    service = PlanningService(
        engine,
        Tokenizer.from_file(str(path / "tokenizer.json")),
        policy="timely",
        clock=MonotonicClock(),
        config=ServiceConfig(
            max_tokens=MAX_TOKENS,
            grammar=grammar,
            grammar_close_within=close_within,
            grounded_names=grounded_names,
            copy_bias=copy_bias,
            plan_candidates=plan_candidates,
            candidate_coverage_weight=coverage_weight,
            distinct_names=distinct_names,
        ),
        languages=languages,
    )
    queues: dict[str, list[int]] = {}
    for robot in ROBOTS:
        mine = [i for i, c in enumerate(cases) if c.robot == robot]
        for k in range(robots):
            robot_id = f"{robot}{k}"
            service.register_robot(robot_id, robot_type=robot)
            queues[robot_id] = mine[k::robots]
    plans: dict[int, Plan] = {}

    def run(robot_id: str) -> None:
        for i in queues[robot_id]:
            case = cases[i]
            handle = service.submit(
                TaskRequest(robot_id=robot_id, scene=case.scene, instruction=case.instruction)
            )
            for segment in handle.segments(timeout_s=600):
                handle.segment_done(segment.index)
            result = handle.result(timeout_s=600)
            plans[i] = Plan(result.plan_text, result.success, result.error)

    service.start()
    try:
        with ThreadPoolExecutor(max_workers=len(queues)) as pool:
            for future in [pool.submit(run, robot_id) for robot_id in queues]:
                future.result()
    finally:
        service.stop()
    return [plans[i] for i in range(len(cases))]


def reference(path: Path, cases: list[Case]) -> list[Plan]:
    """HF greedy (robot_models.evaluate's batches), no grammar."""
    from robot_models.dataset import Example

    examples = [Example(c.robot, c.scene, c.instruction, c.golden or "", "") for c in cases]
    return [Plan(t, e) for t, e in greedy_plans(ReferencePlanner(path), examples)]


def score(cases: list[Case], plans: list[Plan]) -> dict[str, Any]:
    tallies: dict[str, NaturalTally] = {r: NaturalTally() for r in ROBOTS}
    exact = 0
    families: dict[str, FamilyTally] = {}
    for case, plan in zip(cases, plans, strict=True):
        if case.entry is not None:
            tallies[case.robot].add(score_plan(case.robot, case.entry, plan.text, plan.ended))
            continue
        check = check_plan(case.robot, plan.text, plan.ended)
        tallies[case.robot].plans += 1
        tallies[case.robot].valid += check.valid
        tallies[case.robot].right_skills += check.right_skills
        hit = plan.ended and plan.text == case.golden
        exact += hit
        if case.family:
            families.setdefault(case.family, FamilyTally()).add(check.valid, hit)
    total = tallies["drone"].merged(tallies["arm"])
    figures: dict[str, Any] = {c: getattr(total, c) for c in ("plans", *CRITERIA)}
    figures["exact"] = exact
    figures["by_robot"] = {r: vars(t) for r, t in tallies.items()}
    if families:
        figures["by_family"] = {name: vars(t) for name, t in sorted(families.items())}
    return figures


def kept(cases: list[Case], without: list[Plan], with_: list[Plan]) -> dict[str, Any]:
    """The grammar's promise: a plan valid without it is the same plan with it."""
    valid = [
        i
        for i, (c, p) in enumerate(zip(cases, without, strict=True))
        if check_plan(c.robot, p.text, p.ended).valid
    ]
    changed = [
        i for i in valid if (without[i].text, without[i].ended) != (with_[i].text, with_[i].ended)
    ]
    return {"valid_without": len(valid), "unchanged": len(valid) - len(changed), "changed": changed}


def compare(cases: list[Case], hf: list[Plan], served: list[Plan]) -> dict[str, Any]:
    """HF's plans against the service's without the grammar: a valid HF plan must be
    the service's plan; an invalid one must start with the service's text, which ends
    where the service rejected a statement (or at the token limit)."""
    identical = stopped = 0
    differ = []
    for i, (case, a, b) in enumerate(zip(cases, hf, served, strict=True)):
        if a.text == b.text and a.ended == b.ended:
            identical += 1
        elif not check_plan(case.robot, a.text, a.ended).valid and a.text.startswith(b.text):
            stopped += 1
        else:
            differ.append({"index": i, "hf": a.text, "service": b.text, "error": b.error})
    return {"identical": identical, "stopped_at_rejection": stopped, "differ": differ}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=default_planner_path())
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--robots", type=int, default=12, help="robots per type at once")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--limit", type=int, default=0, help="first N of each set (smoke runs)")
    parser.add_argument(
        "--sets",
        nargs="+",
        choices=SETS,
        default=list(DEFAULT_SETS),
        help="frames: the request grammar's held-out split, scored by plan family too "
        "(not in the default run, whose totals go to the model card)",
    )
    parser.add_argument("--skip-hf", action="store_true", help="no HF reference (its column: -)")
    parser.add_argument("--close-within", type=int, default=ServiceConfig().grammar_close_within)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    console = Console(width=160)
    loadavg_before = os.getloadavg()
    started = time.perf_counter()
    sets = cases_of(tuple(args.sets))
    if args.limit:
        sets = {name: cases[: args.limit] for name, cases in sets.items()}
    results: dict[str, Any] = {"sets": {}}
    for name, cases in sets.items():
        console.print(f"{name}: HF greedy, service without and with the grammar, copy, grounded")
        t0 = time.perf_counter()
        hf = None if args.skip_hf else reference(args.model, cases)
        t1 = time.perf_counter()
        without = serve(args.model, cases, False, args.robots, args.threads, 0)
        t2 = time.perf_counter()
        unclosed = serve(args.model, cases, True, args.robots, args.threads, 0, copy_bias=0.0)
        t3 = time.perf_counter()
        uncopied = serve(
            args.model, cases, True, args.robots, args.threads, args.close_within, copy_bias=0.0
        )
        t3b = time.perf_counter()
        alike = serve(
            args.model,
            cases,
            True,
            args.robots,
            args.threads,
            args.close_within,
            distinct_names=False,
        )
        t3c = time.perf_counter()
        with_ = serve(args.model, cases, True, args.robots, args.threads, args.close_within)
        t4 = time.perf_counter()
        grounded = serve(
            args.model, cases, True, args.robots, args.threads, args.close_within, True
        )
        t5 = time.perf_counter()
        hf_texts = [p.text for p in hf] if hf is not None else [""] * len(cases)
        results["sets"][name] = {
            "hf": score(cases, hf) if hf is not None else None,
            "service_without_grammar": score(cases, without),
            "service_grammar_no_closing": score(cases, unclosed),
            "service_grammar_no_copy": score(cases, uncopied),
            "service_not_distinct": score(cases, alike),
            "service_with_grammar": score(cases, with_),
            "service_grounded_names": score(cases, grounded),
            "hf_vs_service_without_grammar": compare(cases, hf, without) if hf else None,
            # the mask alone: the copy bias changes plans on purpose
            "grammar_keeps_valid_plans": kept(cases, without, uncopied),
            "seconds": {
                "hf": t1 - t0,
                "without": t2 - t1,
                "no_closing": t3 - t2,
                "no_copy": t3b - t3,
                "not_distinct": t3c - t3b,
                "with": t4 - t3c,
                "grounded": t5 - t4,
            },
            "plans": [  # every natural plan; of the others those that are not all the same
                {
                    "instruction": c.instruction,
                    "hf": a,
                    "without": b.text,
                    "no_closing": u.text,
                    "no_copy": y.text,
                    "not_distinct": d.text,
                    "with": g.text,
                    "with_ended": g.ended,
                    "grounded": n.text,
                }
                for c, a, b, u, y, d, g, n in zip(
                    cases,
                    hf_texts,
                    without,
                    unclosed,
                    uncopied,
                    alike,
                    with_,
                    grounded,
                    strict=True,
                )
                if name == "natural"
                or not (hf is None or a == b.text)
                or b.text != y.text
                or y.text != g.text
                or d.text != g.text
                or g.text != n.text
            ],
        }
    results["card"] = {  # totals only, for the model card
        name: {
            side: {k: v for k, v in results["sets"][name][side].items() if k != "by_robot"}
            for side in (
                "service_without_grammar",
                "service_grammar_no_copy",
                "service_with_grammar",
                "service_grounded_names",
            )
        }
        | {"grammar_keeps_valid_plans": results["sets"][name]["grammar_keeps_valid_plans"]}
        for name in sets
    }
    results["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    results["settings"] = {
        "threads": args.threads,
        "robots": args.robots,
        "limit": args.limit,
        "skip_hf": args.skip_hf,
        "max_tokens": MAX_TOKENS,
        "grammar_close_within": args.close_within,
        "copy_bias": ServiceConfig().copy_bias,
        "model": str(args.model),
    }
    results["loadavg_before"] = loadavg_before
    results["loadavg_after"] = os.getloadavg()
    results["seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print_table(results, console)
    return 0


def print_table(results: dict[str, Any], console: Console) -> None:
    table = Table(
        title="Sets side by side (greedy): HF, service without / with the grammar, grounded names"
    )
    for column in ("set", "decoder", "plans", *CRITERIA, "exact", "same as HF", "valid kept"):
        table.add_column(column, justify="right")
    for name, figures in results["sets"].items():
        for decoder, label in DECODERS.items():
            f = figures.get(decoder)
            if f is None:
                continue
            same = kept = ""
            c = figures["hf_vs_service_without_grammar"]
            if decoder == "service_without_grammar" and c is not None:
                same = f"{c['identical']} (+{c['stopped_at_rejection']} stopped)"
            if decoder == "service_grammar_no_copy":
                k = figures["grammar_keeps_valid_plans"]
                kept = f"{k['unchanged']}/{k['valid_without']}"
            cells = [
                "-" if name != "natural" and k in ("grounded", "sensible") else f"{f[k]}"
                for k in CRITERIA
            ]
            exact = "-" if name == "natural" else str(f["exact"])
            table.add_row(name, label, str(f["plans"]), *cells, exact, same, kept)
    console.print(table)
    for name, figures in results["sets"].items():
        print_families(name, figures, console)
    console.print(f"load average: {results['loadavg_before']} -> {results['loadavg_after']}")


def print_families(name: str, figures: dict[str, Any], console: Console) -> None:
    """A generated set by plan family, HF greedy beside the service's default."""
    served = figures["service_with_grammar"].get("by_family")
    if not served:
        return
    hf = (figures.get("hf") or {}).get("by_family", {})
    table = Table(title=f"{name} by plan family: exact (valid), HF greedy and the service")
    for column in ("family", "plans", "HF greedy", "service (default)"):
        table.add_column(column, justify="right")
    for family, f in sorted(
        served.items(), key=lambda kv: (kv[1]["exact"] / kv[1]["plans"], kv[0])
    ):
        h = hf.get(family)
        table.add_row(
            family,
            str(f["plans"]),
            f"{h['exact']} ({h['valid']})" if h else "-",
            f"{f['exact']} ({f['valid']})",
        )
    console.print(table)


if __name__ == "__main__":
    raise SystemExit(main())
