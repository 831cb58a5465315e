"""The CLI's subcommands: argument handling only; the work lives in the modules."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from lrtrace import results_format, trace_format
from lrtrace.errors import LrtraceError
from lrtrace.interrupts import EXIT_INTERRUPTED
from lrtrace.outputs import check_distinct, check_file
from lrtrace.workload import WorkloadSpec, derived, load_yaml, parse_spec, preset

if TYPE_CHECKING:
    from lrtrace.replay.targets.variant_source import VariantSource

MAX_NETWORK_LATENCY_MS = 60_000.0  # a minute per segment: beyond it no replay means much

_FLAG_FIELDS = {
    "name": "name",
    "eps": "eps",
    "max_tpe": "max_tpe",
    "trace_ids": "trace_ids",
    "agents": "agents",
    "duration": "duration_s",
    "seed": "seed",
}


def _spec_from_args(args: argparse.Namespace) -> WorkloadSpec:
    """The workload of `--wid`/`--yaml` changed by the flags (named so: `derived`), or
    one from the flags alone."""
    from lrtrace.cli import _ints

    if args.wid is not None and args.yaml is not None:
        raise LrtraceError("give --wid or --yaml, not both")
    changes: dict[str, object] = {}
    for flag, field in _FLAG_FIELDS.items():
        value = getattr(args, flag)
        if value is not None:
            changes[field] = _ints(value) if flag == "trace_ids" else value
    if args.wid is not None:
        return derived(preset(args.wid), changes, "workload")
    if args.yaml is not None:
        return derived(load_yaml(args.yaml), changes, "workload")
    if not changes:
        raise LrtraceError("say what to compose: --wid N, --yaml FILE, or --eps/--max-tpe/...")
    return parse_spec(changes, "workload")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def compose(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.catalog import load_catalog
    from lrtrace.compose import compose as build
    from lrtrace.variants import parse_variants, variant_counts, with_variants

    check_distinct([("-o", args.out)], [("the workload YAML", args.yaml)])
    check_file(args.out, "trace")
    spec = _spec_from_args(args)
    by_type = parse_variants(args.variants or [])
    trace = build(spec, load_catalog())
    if by_type:
        trace = with_variants(trace, by_type)
    trace_format.write(trace, args.out)
    events = len({t.event for t in trace.tasks})
    console.print(
        f"{args.out}: {spec.name}, {_count(len(trace.tasks), 'task')} in "
        f"{_count(events, 'event')} over {spec.duration_s:g} s on "
        f"{_count(len(trace.agents), 'agent')} (seed {spec.seed})"
    )
    if by_type:
        console.print(f"variants: {variant_counts(trace.agents)}")
    return 0


def _policies(text: str) -> list[str]:
    from lrtrace.replay.target import POLICIES

    names = [p.strip() for p in text.split(",") if p.strip()]
    for name in names:
        if name not in POLICIES:
            raise LrtraceError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")
    if not names:
        raise LrtraceError("no policy given")
    return names


def network_latency_s(ms: float) -> float:
    """`--network-latency-ms` in seconds: a finite number >= 0 (NaN or infinity would
    put every robot event at an impossible time), at most `MAX_NETWORK_LATENCY_MS` (a
    latency of years leaves every task unfinished and nothing to report)."""
    if not math.isfinite(ms) or ms < 0:
        raise LrtraceError(f"--network-latency-ms must be a finite number >= 0, got {ms:g}")
    if ms > MAX_NETWORK_LATENCY_MS:
        raise LrtraceError(
            f"--network-latency-ms {ms:g}: at most {MAX_NETWORK_LATENCY_MS:,.0f} (a minute)"
        )
    return ms / 1000


def _given_flags(args: argparse.Namespace) -> list[str]:
    """The target-specific replay flags given on the command line, whatever their
    value (`--profile` naming the default profile included): none has a default."""
    values = {
        "--model": args.model,
        "--threads": args.threads,
        "--tokenizer": args.tokenizer,
        "--profile": args.profile,
        "--max-batch": args.max_batch,
        "--variants-dir": args.variants_dir,
        "--zoo": args.zoo,
        "--zoo-base": args.zoo_base,
    }
    return [flag for flag, value in values.items() if value is not None]


def _variant_source(args: argparse.Namespace) -> VariantSource:
    """Where the service target loads the trace's fleet variants (and, from a zoo,
    the base model)."""
    from lrtrace.replay.targets.variant_source import VariantSource

    if args.zoo is not None and args.variants_dir is not None:
        raise LrtraceError("give --variants-dir or --zoo, not both")
    if args.zoo_base is not None and args.zoo is None:
        raise LrtraceError("--zoo-base names a variant of --zoo; give --zoo too")
    if args.zoo is not None:
        return VariantSource(zoo=args.zoo, zoo_base=args.zoo_base or "base")
    return VariantSource() if args.variants_dir is None else VariantSource(args.variants_dir)


def _replay_inputs(args: argparse.Namespace, profile: str) -> list[tuple[str, Path | None]]:
    """The files a replay reads, which its output must not replace."""
    from lrtrace.profiles import profile_path

    sim = args.target == "sim"
    return [
        ("the trace", args.trace),
        ("the latency profile", profile_path(profile) if sim else None),
        ("the tokenizer", args.tokenizer),
    ]


def replay(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.cli import DEFAULT_PROFILE, _ints
    from lrtrace.replay.runner import replay as run_replay
    from lrtrace.replay.runner import run_labels
    from lrtrace.replay.targets import make_target
    from lrtrace.replay.targets.common import ReplayServiceOptions
    from lrtrace.replay.targets.flags import refuse_ignored, strategy_ignored_by

    refuse_ignored(args.target, _given_flags(args))
    profile = args.profile or DEFAULT_PROFILE
    check_distinct([("-o", args.out)], _replay_inputs(args, profile))
    check_file(args.out, "results")  # now, not after the first policy's replay
    trace = trace_format.read(args.trace)
    policies = _policies(args.policy)
    batches: list[int | None] = [None] if args.max_batch is None else list(_ints(args.max_batch))
    if any(b is not None and b < 1 for b in batches):
        raise LrtraceError(f"--max-batch values must be >= 1, got {args.max_batch}")
    run_labels(policies, batches)  # now, not after the first run
    ignoring = strategy_ignored_by(policies, args.handling_strategy)
    if ignoring:
        console.print(f"note: {ignoring}")
    latency_s = network_latency_s(args.network_latency_ms)
    target = make_target(
        args.target,
        profile=profile,
        model=args.model,
        threads=args.threads,
        tokenizer=args.tokenizer,
        network_latency_s=latency_s,
        options=ReplayServiceOptions(
            prefix_cache=not args.no_prefix_cache,
            handling_strategy=args.handling_strategy,
            kv_prefetch=None if args.kv_prefetch is None else args.kv_prefetch == "on",
        ),
        variants=_variant_source(args),
    )
    results, interrupted = run_replay(
        trace,
        target,
        policies,
        batches,
        args.out,
        console,
        trace_path=str(args.trace),
        network_latency_s=latency_s,
    )
    from lrtrace.report import print_report

    print_report(results, console, groups="classes")
    console.print(f"results: {args.out}")
    return EXIT_INTERRUPTED if interrupted else 0


def report(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.plots import all_figures, figure_paths, runs_without_completed_tasks
    from lrtrace.report import print_report, write_json

    results = results_format.read(args.results, distinct_labels=True)
    prefix = Path(args.results).stem
    figures = figure_paths(results, args.plots, prefix) if args.plots else []
    outputs = [("--json", args.json), *(("the figure", p) for p in figures)]
    check_distinct(outputs, [("the results file", args.results)])
    if args.json:
        check_file(args.json, "statistics")
    if args.plots and args.plots.exists() and not args.plots.is_dir():
        raise LrtraceError(f"cannot write figures to {args.plots}: not a directory")
    print_report(results, console, groups=args.groups)
    if args.json:
        write_json(results, args.json)
        console.print(f"statistics: {args.json}")
    if args.plots:
        figures = all_figures(results, args.plots, prefix=prefix)
        for path in figures:
            console.print(f"figure: {path}")
        if not figures:
            console.print(f"no figures: {args.results} has no runs")
        for label in runs_without_completed_tasks(results):  # none without runs
            console.print(f"fig6: run {label} has no completed task (its panel says so)")
    return 0


def capacity(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.capacity_cli import run

    return run(args, console)


def profile_engine(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.engine_profile_cli import run

    return run(args, console)


def record(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.executions import record_reports

    count, skipped = record_reports(args.reports, args.out, args.run)
    note = f" ({skipped} segments skipped: not one skill call)" if skipped else ""
    console.print(f"{args.out}: {_count(count, 'execution')} recorded{note}")
    return 0


def fit(args: argparse.Namespace, console: Console) -> int:
    from lrtrace.executions import fit_models

    for line in fit_models(args.executions, args.out_dir):
        console.print(line)
    return 0
