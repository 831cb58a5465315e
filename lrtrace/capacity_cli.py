"""`lrtrace capacity`: flags -> validated mix, target and search; progress on
stderr; the table on stdout; JSON and a PNG next to it. Ctrl-C writes the sizes
judged so far (the JSON marked `interrupted`) and exits 130, as `replay` does."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ValidationError
from rich.console import Console

from lrtrace.errors import LrtraceError
from lrtrace.outputs import output_path

if TYPE_CHECKING:  # the planner pulls in the service: only `run` needs it
    from lrtrace.capacity import Setting, SizePoint

M = TypeVar("M", bound=BaseModel)

MAX_KV_TOKENS = 10_000_000  # 1.2 TB of KV on the paper's profile; the pool is built in memory

# the flag that sets each validated field, so an error names what the user typed
FLAGS = {
    "urgent_full_share": "--urgent-full",
    "normal_utility_share": "--normal-utility",
    "seeds": "--seeds",
    "first_seed": "--first-seed",
    "duration_s": "--duration",
    "min_tasks": "--min-tasks",
    "max_robots": "--max-robots",
    "precision": "--precision",
    "rule": "--rule",
}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser(
        "capacity", help="largest fleet of a mix one engine serves within a target (simulated)"
    )
    c.add_argument("-o", "--out", type=output_path, required=True, help="JSON to write (.json)")
    c.add_argument("--plot", type=output_path, help="PNG to write (default: the JSON's name, .png)")
    c.add_argument(
        "--mix", default="drones", help="built-in mix name, YAML file, or inline YAML mapping"
    )
    c.add_argument("--profile", default="paper-llama3-8b-rtx4090", help="latency profile")
    c.add_argument("--policy", default="timely", help="a policy or a comma-separated list")
    c.add_argument("--max-batch", default="", help="max batch sizes to sweep, e.g. 4,8,16")
    c.add_argument(
        "--kv-tokens", default="", help="KV capacities (tokens) to sweep, e.g. 4096,23000"
    )
    c.add_argument(
        "--urgent-full", type=float, default=0.95, help="share of urgent tasks at full utility"
    )
    c.add_argument(
        "--normal-utility", type=float, default=0.90, help="normal tasks' mean utility / maximum"
    )
    c.add_argument("--rule", default="median", help="median (of the seeds) or all (every seed)")
    c.add_argument("--seeds", type=int, default=3, help="replays per fleet size")
    c.add_argument("--first-seed", type=int, default=0)
    c.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals per replay")
    c.add_argument("--min-tasks", type=int, default=20, help="tasks per class a replay expects")
    c.add_argument("--max-robots", type=int, default=4096, help="largest fleet size tried")
    c.add_argument(
        "--precision", type=float, default=0.02, help="stop when pass and fail are this close"
    )
    c.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: the planner's)")
    c.add_argument("--network-latency-ms", type=float, default=8.0)


def validated(model: type[M], fields: dict[str, object]) -> M:
    """The model, or one line naming the flag that was wrong (a check over several
    fields, such as a target that asks nothing, names the model)."""
    try:
        return model.model_validate(fields)
    except ValidationError as err:
        first = err.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else ""
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise LrtraceError(f"{FLAGS.get(name, model.__name__)}: {msg}") from None


def settings_from(args: argparse.Namespace) -> list[Setting]:
    from lrtrace.capacity import Setting
    from lrtrace.cli import _ints
    from lrtrace.commands import _policies
    from lrtrace.replay.runner import run_labels

    batches: list[int | None] = list(_ints(args.max_batch)) if args.max_batch else [None]
    kvs: list[int | None] = list(_ints(args.kv_tokens)) if args.kv_tokens else [None]
    if any(b is not None and b < 1 for b in batches):
        raise LrtraceError(f"--max-batch values must be >= 1, got {args.max_batch}")
    if any(k is not None and not 1 <= k <= MAX_KV_TOKENS for k in kvs):
        raise LrtraceError(f"--kv-tokens values must be between 1 and {MAX_KV_TOKENS:,}")
    repeated = next((k for i, k in enumerate(kvs) if k in kvs[:i]), None)
    if repeated is not None:
        raise LrtraceError(f"--kv-tokens {repeated} is given twice: give each value once")
    policies = _policies(args.policy)
    run_labels(policies, batches)  # a policy or max batch given twice, as replay says
    return [Setting(p, b, k) for p in policies for b in batches for k in kvs]


def check_outputs(args: argparse.Namespace) -> Path:
    """Refuse, before any search, outputs that cannot be written, a figure format
    matplotlib lacks, and an output that is an input or the other output (`-o c.png`
    with the figure's default name, the JSON's with .png). Returns the figure's path."""
    from lrtrace.figure_formats import check_figure_path
    from lrtrace.fleet_mix import mix_path
    from lrtrace.outputs import check_distinct, check_file
    from lrtrace.profiles import profile_path

    plot = args.plot or args.out.with_suffix(".png")
    plot_flag = "--plot" if args.plot else "the figure (default: -o with .png)"
    check_distinct(
        [("-o", args.out), (plot_flag, plot)],
        [
            ("the fleet mix", mix_path(args.mix)),
            ("the latency profile", profile_path(args.profile)),
            ("the tokenizer", args.tokenizer),
        ],
    )
    check_file(args.out, "capacity results")
    check_file(plot, "figure")
    check_figure_path(plot, plot_flag)
    return plot


def run(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.capacity import CapacityPlanner, SearchConfig, SearchInterrupted
    from lrtrace.capacity_plot import capacity_figure
    from lrtrace.capacity_report import table, to_json, write_json
    from lrtrace.capacity_target import CapacityTarget
    from lrtrace.catalog import load_catalog
    from lrtrace.commands import _count, network_latency_s
    from lrtrace.fleet_mix import load_mix
    from lrtrace.interrupts import EXIT_INTERRUPTED, say_interrupted
    from lrtrace.profiles import load
    from lrtrace.replay.targets.common import load_tokenizer_file, planner_tokenizer

    plot_path = check_outputs(args)
    target = validated(
        CapacityTarget,
        {"urgent_full_share": args.urgent_full, "normal_utility_share": args.normal_utility},
    )
    search = validated(
        SearchConfig,
        {
            "seeds": args.seeds,
            "first_seed": args.first_seed,
            "duration_s": args.duration,
            "min_tasks": args.min_tasks,
            "max_robots": args.max_robots,
            "precision": args.precision,
            "rule": args.rule,
        },
    )
    latency_s = network_latency_s(args.network_latency_ms)
    settings = settings_from(args)
    catalog = load_catalog()
    mix = load_mix(args.mix, catalog)
    profile = load(args.profile)
    if args.tokenizer is not None:
        tokenizer, source = load_tokenizer_file(args.tokenizer), str(args.tokenizer)
    else:
        tokenizer, source = planner_tokenizer()
    progress = Console(stderr=True)

    def report(setting: Setting, point: SizePoint) -> None:
        verdict = "[green]meets[/]" if point.met else "[red]fails[/]"
        values = ", ".join(f"{c} {100 * v:.1f}%" for c, v in point.judged.items())
        wall = sum(r.wall_s for r in point.runs)
        progress.print(
            f"{setting.label}: {_count(point.robots, 'robot')} {verdict} ({values}; "
            f"{point.duration_s:.0f} s x {len(point.runs)} seeds, {wall:.1f} s)",
            soft_wrap=True,
        )

    planner = CapacityPlanner(mix, catalog, profile, tokenizer, target, search, latency_s, report)
    planner.check(settings)
    progress.print(
        f"[bold yellow]SIMULATION[/]: capacity of mix {mix.name!r} on profile {profile.name!r}, "
        f"{len(settings)} setting(s); target: {target.describe()}",
        soft_wrap=True,
    )
    started = time.perf_counter()
    interrupted = False
    try:
        results = planner.run(settings)
    except SearchInterrupted as stop:
        results, interrupted = stop.results, True
    console.print(table(planner, results, source))
    extra = {"wall_s": time.perf_counter() - started, "interrupted": interrupted}
    write_json(to_json(planner, results, source, extra), args.out)
    if interrupted:  # no figure: the JSON keeps every size judged
        sizes = sum(len(r.points) for r in results)
        say_interrupted(console, f"the {_count(sizes, 'fleet size')} judged", args.out)
        return EXIT_INTERRUPTED
    plot = capacity_figure(planner, results, plot_path)
    console.print(f"capacity: {args.out}\nfigure: {plot}")
    return 0
