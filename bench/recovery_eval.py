"""Recoveries after a robot's failure (issue #23) decoded as the service decodes
them: `robot_models.observation_eval`'s cases (failure variants of the template
held-out examples: the request, the plan up to the failed statement and the
observation, each piece encoded on its own as the service appends it) on the torch
engine, in one batch, three ways:

- `greedy`: no grammar, no copy bias (what `observation_eval` measures with HF);
- `grammar`: the plan grammar from the observation on, as a plan re-admitted after
  its rollback is constrained (`timely_core/serving/failure_recovery.py`);
- `service`: the grammar and the copy bias on the request's names and numbers, as
  `ServiceConfig`'s defaults set them (`with_copy_bias`). Closing is left out: it
  acts only near the segment limit, which no recovery reaches.

Scored as `observation_eval` scores: `exact` (the policy's continuation to the
plan's end), `first` (its first statement), per recovery kind.

    PYTHONPATH=. .venv/bin/python bench/recovery_eval.py [--cases 120]

Writes bench/results/recovery_eval.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import MachineRecord

from robot_models.checkpoints import default_planner_path
from robot_models.language import RobotPlanLanguage, load_language
from robot_models.observation_eval import RecoveryCase, first_statement, recovery_cases
from robot_models.prompts import format_request, prompt_prefix
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.grammar import language_grammar, with_copy_bias
from timely_core.service_config import ServiceConfig

RESULTS = Path(__file__).resolve().parent / "results" / "recovery_eval.json"
MODES = ("greedy", "grammar", "service")
BATCH = 32  # generations per engine step


@cache
def _language(robot_type: str) -> RobotPlanLanguage:
    """One language per robot type: its grammar is built once, as the service's is."""
    return load_language(robot_type)


def sampling(mode: str, case: RecoveryCase, config: ServiceConfig) -> SamplingParams:
    """The sampling of `mode` for `case`, built by the functions the service uses."""
    params = SamplingParams(temperature=0.0, max_tokens=config.max_tokens)
    if mode == "greedy":
        return params
    language = _language(case.example.robot_type)
    params = dataclasses.replace(params, grammar=language_grammar(language, None))
    if mode == "grammar":
        return params
    e = case.example
    return with_copy_bias(params, language, e.scene, e.instruction, config.copy_bias)


def continuations(
    model: Path, cases: list[RecoveryCase], mode: str, config: ServiceConfig
) -> list[str]:
    """Each case's continuation after its observation, decoded on one torch engine."""
    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    engine = TorchEngine(model)
    prefixes: dict[str, list[int]] = {}
    added: set[int] = set()
    for robot_type in sorted({c.example.robot_type for c in cases}):
        prefixes[robot_type] = tokenizer.encode(prompt_prefix(robot_type)).ids
        engine.register_prefix(robot_type, prefixes[robot_type])
    for gen_id, case in enumerate(cases):
        e = case.example
        ids = prefixes[e.robot_type] + tokenizer.encode(format_request(e.scene, e.instruction)).ids
        for piece in case.written:
            ids += tokenizer.encode(piece).ids
        if engine.max_model_len is not None and len(ids) >= engine.max_model_len:
            continue  # no room to continue (a long arm plan): scored as not recovered
        engine.add(gen_id, ids, sampling(mode, case, config), e.robot_type)
        added.add(gen_id)
    out: dict[int, list[int]] = {g: [] for g in range(len(cases))}
    live = set(added)
    while live:
        for step in engine.step(sorted(live)[:BATCH]):
            out[step.gen_id].append(step.token_id)
            if step.finished:
                live.discard(step.gen_id)
    eos = engine.eos_token_id
    texts = []
    for gen_id in range(len(cases)):
        ids = out[gen_id]
        texts.append(tokenizer.decode(ids[: ids.index(eos)] if eos in ids else ids))
    return texts


def tally(cases: list[RecoveryCase], texts: list[str]) -> dict[str, int]:
    """`observation_eval`'s counts: exact, first, and per kind its cases, first, exact."""
    totals: Counter[str] = Counter()
    for case, text in zip(cases, texts, strict=True):
        robot_type = case.example.robot_type
        exact = text == case.expected
        first = first_statement(robot_type, text) == first_statement(robot_type, case.expected)
        totals["cases"] += 1
        totals["exact"] += exact
        totals["first"] += first
        totals[f"{case.kind}:cases"] += 1
        totals[f"{case.kind}:first"] += first
        totals[f"{case.kind}:exact"] += exact
    return dict(totals)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=default_planner_path())
    parser.add_argument("--cases", type=int, default=120)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error("--cases must be at least 1")
    torch.set_num_threads(args.threads)
    machine = MachineRecord()
    started = time.perf_counter()
    config = ServiceConfig()
    cases = recovery_cases(args.cases)
    results: dict[str, Any] = {"bench": "recovery_eval", "model": str(args.model), "modes": {}}
    for mode in MODES:
        texts = continuations(args.model, cases, mode, config)
        results["modes"][mode] = {
            "totals": tally(cases, texts),
            "plans": [
                {"kind": c.kind, "expected": c.expected, "got": t}
                for c, t in zip(cases, texts, strict=True)
            ],
        }
    results["copy_bias"] = config.copy_bias
    results["machine"] = machine.done()
    results["seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print_table(results, Console(width=140))
    return 0


def print_table(results: dict[str, Any], console: Console) -> None:
    modes = results["modes"]
    kinds = sorted({key.split(":")[0] for m in modes.values() for key in m["totals"] if ":" in key})
    table = Table(title="Recoveries after a failure observation (torch engine, greedy)")
    table.add_column("decoding")
    table.add_column("exact", justify="right")
    table.add_column("first", justify="right")
    for kind in kinds:
        table.add_column(f"{kind}: first / exact", justify="right")
    for mode, figures in modes.items():
        t = figures["totals"]
        table.add_row(
            mode,
            f"{t['exact']}/{t['cases']}",
            f"{t['first']}/{t['cases']}",
            *(
                f"{t.get(f'{k}:first', 0)} / {t.get(f'{k}:exact', 0)} of {t[f'{k}:cases']}"
                for k in kinds
            ),
        )
    console.print(table)
    console.print(MachineRecord.line(results["machine"]))


if __name__ == "__main__":
    raise SystemExit(main())
