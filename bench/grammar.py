"""Grammar-constrained decoding (issue #21) on the planner checkpoint, each figure
against the same engine without the grammar, measured in the same run:

- valid-plan rate and right-robot-skill rate, greedy, with and without the robots'
  grammars, on the held-out set `robot_models.evaluate` uses, the 11 LRTrace tasks
  and the hand-written instructions of `robot_models/data/ordinary_instructions.yaml`
  (people's phrasing, never trained on); plans valid without the grammar must be
  token for token the same with it;
- the grammar's cost per decoded token at batch 1 and batch 32, as a share of the
  decode step (goal <= 5%): the time the sampler spends on grammar work (checks of
  the unmasked choice, masks, advancing matchers), and the step-time ratio; greedy
  and sampled, with the default unmasked-first shortcut and with the mask computed
  every token; and greedy with the service's copy bias (its time counted with the
  grammar's);
- compile time per robot type (vocabulary once per tokenizer, each grammar once);
- time to first token with and without the grammar (warm, and with the compile).

    PYTHONPATH=. .venv/bin/python bench/grammar.py [--threads 1] [--rounds 5]

Writes bench/results/grammar.json (with os.getloadavg(): the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.dataset import build_dataset
from robot_models.language import RobotPlanLanguage, load_language
from robot_models.ordinary_instructions import ordinary_instructions
from robot_models.plan_check import check_plan
from timely_core.engine.protocol import SamplingParams, UnknownGeneration
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.grammar import GrammarCompiler
from timely_core.language.grammar import with_copy_bias
from timely_core.service_config import ServiceConfig

RESULTS = Path(__file__).resolve().parent / "results" / "grammar.json"
ROBOTS = ("drone", "arm")
MAX_TOKENS = 256
BATCH = 16  # generations per batch in the quality runs (as evaluate)
COST_STEPS = 24  # decode steps measured per round


@dataclass(frozen=True)
class Case:
    robot: str
    scene: str
    instruction: str
    golden: str | None  # None: hand-written, no golden plan


@dataclass
class Planner:
    engine: TorchEngine
    tokenizer: Tokenizer
    languages: dict[str, RobotPlanLanguage]
    prefixes: dict[str, list[int]] = field(default_factory=dict)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def prompt(self, case: Case) -> list[int]:
        request = self.languages[case.robot].format_request(case.scene, case.instruction)
        return self.prefixes[case.robot] + self.encode(request)

    def params(self, robot: str, grammar: bool, **kw: Any) -> SamplingParams:
        """With the grammar, closed near the token limit as the service does
        (`kw`: other fields, e.g. temperature and seed)."""
        if not grammar:
            return SamplingParams(max_tokens=MAX_TOKENS, **kw)
        language = self.languages[robot]
        spelled = [self.encode(text) for text in language.grammar_closers()]
        closers = tuple(ids[0] for ids in spelled if len(ids) == 1)
        return SamplingParams(
            max_tokens=MAX_TOKENS,
            grammar=language.grammar(),
            close_within=ServiceConfig().grammar_close_within,
            closing_ids=closers,
            **kw,
        )


def make_planner(path: Path, threads: int) -> Planner:
    config = EngineConfig(num_threads=threads, host_kv_bytes=2**24)
    engine = TorchEngine(path, config)
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    planner = Planner(engine, tokenizer, {r: load_language(r) for r in ROBOTS})
    for robot in ROBOTS:
        planner.prefixes[robot] = planner.encode(planner.languages[robot].prompt_prefix())
        engine.register_prefix(robot, planner.prefixes[robot])
    return planner


def generate(planner: Planner, cases: list[Case], grammar: bool) -> list[list[int]]:
    """Greedy ids per case (EOS included when it came), in batches of one robot."""
    out: dict[int, list[int]] = {}
    for robot in ROBOTS:
        mine = [i for i, c in enumerate(cases) if c.robot == robot]
        for start in range(0, len(mine), BATCH):
            chunk = mine[start : start + BATCH]
            for i in chunk:
                params = planner.params(robot, grammar)
                planner.engine.add(i, planner.prompt(cases[i]), params, prefix_id=robot)
                out[i] = []
            live = list(chunk)
            while live:
                for o in planner.engine.step(live):
                    out[o.gen_id].append(o.token_id)
                    if o.finished:
                        live.remove(o.gen_id)
    return [out[i] for i in range(len(cases))]


def score(planner: Planner, cases: list[Case], ids: list[list[int]]) -> dict[str, Any]:
    eos = planner.engine.eos_token_id
    valid = right = exact = 0
    records = []
    for case, plan in zip(cases, ids, strict=True):
        ended = bool(plan) and plan[-1] == eos
        text = planner.tokenizer.decode(plan[:-1] if ended else plan)
        check = check_plan(case.robot, text, ended)
        valid += check.valid
        right += check.right_skills
        exact += case.golden is not None and ended and text == case.golden
        records.append({"text": text, "valid": check.valid, "error": check.error})
    n = len(cases)
    return {
        "plans": n,
        "valid": valid,
        "valid_rate": valid / n,
        "right_skills": right,
        "right_skill_rate": right / n,
        "exact": exact,
        "records": records,
    }


def quality(planner: Planner, sets: dict[str, list[Case]]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, cases in sets.items():
        free = generate(planner, cases, grammar=False)
        constrained = generate(planner, cases, grammar=True)
        without, with_ = score(planner, cases, free), score(planner, cases, constrained)
        was_valid = [i for i, r in enumerate(without["records"]) if r["valid"]]
        same = sum(free[i] == constrained[i] for i in was_valid)
        repaired = [
            {
                "robot": cases[i].robot,
                "instruction": cases[i].instruction,
                "without": without["records"][i]["text"],
                "error": without["records"][i]["error"],
                "with": with_["records"][i]["text"],
                "valid_with": with_["records"][i]["valid"],
            }
            for i, r in enumerate(without["records"])
            if not r["valid"]
        ]
        for side in (without, with_):
            side.pop("records")
        figures[name] = {
            "without_grammar": without,
            "with_grammar": with_,
            "valid_without_grammar": len(was_valid),
            "unchanged_with_grammar": same,
            "invalid_without_grammar": repaired,
        }
    return figures


@contextmanager
def mode(planner: Planner, unmasked_first: bool) -> Iterator[None]:
    previous = planner.engine.masker.unmasked_first
    planner.engine.masker.unmasked_first = unmasked_first
    try:
        yield
    finally:
        planner.engine.masker.unmasked_first = previous


def decode_round(
    planner: Planner, cases: list[Case], grammar: bool, temperature: float, copy: bool = False
) -> tuple[float, float, int]:
    """(step seconds, grammar seconds, steps) over COST_STEPS decode steps of a full
    batch; stops early if any generation ends, so the batch never shrinks. `copy`:
    each request's names with the service's copy bias (its time is grammar time)."""
    engine = planner.engine
    live = []
    for i, case in enumerate(cases):
        gen_id = 10_000 + i
        extra: dict[str, Any] = {"temperature": temperature, "seed": i} if temperature else {}
        params = planner.params(case.robot, grammar, **extra)
        if copy:
            language, bias = planner.languages[case.robot], ServiceConfig().copy_bias
            params = with_copy_bias(params, language, case.scene, case.instruction, bias)
        engine.add(gen_id, planner.prompt(case), params, prefix_id=case.robot)
        live.append(gen_id)
    started = {g: False for g in live}
    while not all(started.values()):  # prefill until every generation decodes
        for o in engine.step(live):
            started[o.gen_id] = True
            if o.finished:
                raise RuntimeError("a plan ended during prefill; pick longer plans")
    step_s = grammar_s = 0.0
    steps = 0
    for _ in range(COST_STEPS):
        before = engine.masker.seconds + engine.copy_bias.seconds
        t0 = time.perf_counter()
        outputs = engine.step(live)
        step_s += time.perf_counter() - t0
        grammar_s += engine.masker.seconds + engine.copy_bias.seconds - before
        steps += 1
        if any(o.finished for o in outputs):
            break
    for gen_id in live:
        with suppress(UnknownGeneration):  # finished in the last step
            engine.abort(gen_id)
    return step_s, grammar_s, steps


def decode_cost(planner: Planner, cases: list[Case], rounds: int) -> dict[str, Any]:
    """Per batch size: per-token step time without the grammar, and the grammar's
    share of it, by variant, rounds alternating (medians)."""
    variants = {
        "greedy, unmasked first (default)": (True, True, 0.0, False),
        "greedy, unmasked first, copy bias (service default)": (True, True, 0.0, True),
        "greedy, mask every token": (True, False, 0.0, False),
        "sampled (temperature 1), unmasked first (default)": (True, True, 1.0, False),
        "sampled (temperature 1), mask every token": (True, False, 1.0, False),
    }
    figures: dict[str, Any] = {}
    for batch in (1, 32):
        chosen = cases[:batch]
        samples: dict[str, list[tuple[float, float, int]]] = {"none": [], "none sampled": []}
        samples.update({name: [] for name in variants})
        for _ in range(rounds):
            samples["none"].append(decode_round(planner, chosen, False, 0.0))
            samples["none sampled"].append(decode_round(planner, chosen, False, 1.0))
            for name, (grammar, unmasked_first, temperature, copy) in variants.items():
                with mode(planner, unmasked_first):
                    samples[name].append(decode_round(planner, chosen, grammar, temperature, copy))

        def per_step(rows: list[tuple[float, float, int]], index: int) -> float:
            return statistics.median(r[index] / r[2] for r in rows)

        base = per_step(samples["none"], 0)
        base_sampled = per_step(samples["none sampled"], 0)
        entry: dict[str, Any] = {
            "step_s_without_grammar": base,
            "step_s_without_grammar_sampled": base_sampled,
        }
        for name, (_, _, temperature, _) in variants.items():
            reference = base_sampled if temperature else base
            grammar_s = per_step(samples[name], 1)
            step_s = per_step(samples[name], 0)
            entry[name] = {
                "grammar_s_per_step": grammar_s,
                "grammar_share_of_step": grammar_s / reference,
                "step_s": step_s,
                "step_time_ratio": step_s / reference,
            }
        figures[f"batch_{batch}"] = entry
    return figures


def compile_times(planner: Planner, repeats: int) -> dict[str, Any]:
    """A fresh compiler per repeat: vocabulary (once per tokenizer), then each grammar."""
    vocab: list[float] = []
    per_robot: dict[str, list[float]] = {r: [] for r in ROBOTS}
    mc = planner.engine.model.config
    for _ in range(repeats):
        compiler = GrammarCompiler(planner.tokenizer, mc.vocab_size, (planner.engine.eos_token_id,))
        vocab.append(compiler.vocab_s)
        for robot in ROBOTS:
            grammar = planner.languages[robot].grammar()
            compiler.matcher(grammar)
            per_robot[robot].append(compiler.compile_s[grammar])
    return {
        "vocabulary_s": statistics.median(vocab),
        **{f"{r}_grammar_s": statistics.median(v) for r, v in per_robot.items()},
        **{f"{r}_grammar_chars": len(planner.languages[r].grammar()) for r in ROBOTS},
    }


def ttft(path: Path, planner: Planner, cases: list[Case], rounds: int, threads: int) -> Any:
    """Add to first token, one generation at a time, with the robot prefix registered."""
    engine = planner.engine

    def first_token(case: Case, grammar: bool) -> float:
        t0 = time.perf_counter()
        engine.add(20_000, planner.prompt(case), planner.params(case.robot, grammar), case.robot)
        while not engine.step([20_000]):
            pass
        seconds = time.perf_counter() - t0
        with suppress(UnknownGeneration):  # the first token ended it
            engine.abort(20_000)
        return seconds

    samples: dict[str, list[float]] = {"without": [], "with (compiled)": []}
    for _ in range(rounds):
        for case in cases:
            samples["without"].append(first_token(case, False))
            samples["with (compiled)"].append(first_token(case, True))
    cold = []
    for _ in range(max(1, rounds // 2)):  # a fresh engine: tokenizer and grammar compiled
        fresh = make_planner(path, threads)
        t0 = time.perf_counter()
        fresh.engine.add(1, fresh.prompt(cases[0]), fresh.params(cases[0].robot, True), "drone")
        while not fresh.engine.step([1]):
            pass
        cold.append(time.perf_counter() - t0)
    figures = {k: statistics.median(v) for k, v in samples.items()}
    figures["with (first request: vocabulary and grammar compiled)"] = statistics.median(cold)
    figures["ratio_with_to_without"] = figures["with (compiled)"] / figures["without"]
    return figures


def cases_of() -> dict[str, list[Case]]:
    data = build_dataset()
    heldout = [Case(e.robot_type, e.scene, e.instruction, e.plan) for e in data.heldout]
    lrtrace = [Case(e.robot_type, e.scene, e.instruction, e.plan) for e in data.lrtrace]
    ordinary = [
        Case(robot, o.scene, o.instruction, None)
        for robot in ROBOTS
        for o in ordinary_instructions(robot)
    ]
    return {"heldout": heldout, "lrtrace": lrtrace, "ordinary": ordinary}


def quality_table(
    results: dict[str, Any], title: str, extra: tuple[str, str] | None = None
) -> Table:
    """Plans with and without the grammar per set; `extra`: one more column, (header,
    a key of each set's results counted out of its plans)."""
    table = Table(title=title)
    columns = ["set", "plans", "valid w/o", "valid with", "right skills w/o", "with"]
    columns.append("valid w/o kept same")
    for column in columns + ([extra[0]] if extra else []):
        table.add_column(column, justify="right")
    for name, q in results["quality"].items():
        w, g = q["without_grammar"], q["with_grammar"]
        row = [
            name,
            str(w["plans"]),
            f"{w['valid']} ({100 * w['valid_rate']:.1f}%)",
            f"{g['valid']} ({100 * g['valid_rate']:.1f}%)",
            f"{w['right_skills']} ({100 * w['right_skill_rate']:.1f}%)",
            f"{g['right_skills']} ({100 * g['right_skill_rate']:.1f}%)",
            f"{q['unchanged_with_grammar']}/{q['valid_without_grammar']}",
        ]
        if extra:
            row.append(f"{q[extra[1]]}/{w['plans']}")
        table.add_row(*row)
    return table


def print_tables(results: dict[str, Any], console: Console) -> None:
    console.print(quality_table(results, "Plans with and without the grammar (greedy)"))
    cost = Table(title="Grammar cost per decoded token (share of the decode step without it)")
    for column in ("batch", "variant", "grammar work", "step time ratio"):
        cost.add_column(column, justify="right")
    for batch, entry in results["decode_cost"].items():
        for name, v in entry.items():
            if isinstance(v, dict):
                work = 1e6 * v["grammar_s_per_step"]
                share = 100 * v["grammar_share_of_step"]
                ratio = v["step_time_ratio"]
                cost.add_row(batch, name, f"{work:.0f} us ({share:.1f}%)", f"{ratio:.3f}")
    console.print(cost)
    console.print(f"compile: {results['compile']}")
    console.print(f"time to first token (s): {results['ttft_s']}")
    console.print(f"load average: {results['loadavg_before']} -> {results['loadavg_after']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=default_planner_path())
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    console = Console()
    torch.set_num_threads(args.threads)
    loadavg_before = os.getloadavg()
    started = time.perf_counter()
    planner = make_planner(args.model, args.threads)
    sets = cases_of()
    console.print("quality (greedy, with and without the grammar) ...")
    results: dict[str, Any] = {"quality": quality(planner, sets)}
    console.print("decode cost ...")
    arm = [c for c in sets["heldout"] + sets["ordinary"] if c.robot == "arm"]
    long_plans = sorted(arm, key=lambda c: -len(c.golden or ""))[:32]  # full batch longest
    results["decode_cost"] = decode_cost(planner, long_plans, args.rounds)
    console.print("compile and time to first token ...")
    results["compile"] = compile_times(planner, args.rounds)
    drone = [c for c in sets["heldout"] if c.robot == "drone"][:4]
    results["ttft_s"] = ttft(args.model, planner, drone, args.rounds, args.threads)
    results["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    results["settings"] = {"threads": args.threads, "rounds": args.rounds, "model": str(args.model)}
    results["loadavg_before"] = loadavg_before
    results["loadavg_after"] = os.getloadavg()
    results["seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print_tables(results, console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
