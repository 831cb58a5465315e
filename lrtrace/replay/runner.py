"""Replay one trace under several policies (and batch caps) with a progress bar.

Ctrl-C stops the current run, marks its unfinished tasks, and still writes the
results of everything done so far.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lrtrace import results_format
from lrtrace.errors import LrtraceError
from lrtrace.interrupts import say_interrupted
from lrtrace.replay.target import ReplayTarget
from lrtrace.results_format import ResultsFile, RunRecord, TaskRecord
from lrtrace.trace_format import TraceFile


def label_of(policy: str, max_batch: int | None) -> str:
    return policy if max_batch is None else f"{policy}@{max_batch}"


def run_labels(policies: Sequence[str], max_batches: Sequence[int | None]) -> list[str]:
    """The labels of the runs, in order; LrtraceError naming a label that would come
    twice (a policy or batch cap given twice): reports and `record --run` tell runs
    apart by label, so two runs under one label would be merged there."""
    labels: list[str] = []
    for policy in policies:
        for max_batch in max_batches:
            label = label_of(policy, max_batch)
            if label in labels:
                raise LrtraceError(
                    f"run label {label!r} would be used twice: give each policy and "
                    "each --max-batch value once"
                )
            labels.append(label)
    return labels


def replay(
    trace: TraceFile,
    target: ReplayTarget,
    policies: Sequence[str],
    max_batches: Sequence[int | None],
    out: Path | None,
    console: Console,
    trace_path: str = "",
    network_latency_s: float = 0.008,
) -> tuple[ResultsFile, bool]:
    """Returns (results, interrupted). Results are written after every run."""
    run_labels(policies, max_batches)
    target.check(trace)
    results = ResultsFile(workload=trace.workload, trace_path=trace_path)
    interrupted = False
    if target.simulated:
        console.print(
            f"[bold yellow]SIMULATION[/]: virtual-time replay on latency profile "
            f"{target.profile!r}; figures are modelled, not measured "
            f"(tokenizer: {getattr(target, 'tokenizer_source', 'given')}; "
            f"max batch {target.batch_cap(None)} unless a cap is given)."
        )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        for policy in policies:
            for max_batch in max_batches:
                label = label_of(policy, max_batch)
                bar = progress.add_task(label, total=len(trace.tasks))
                strategy, prefetch = target.kv_settings(policy)
                run = RunRecord(
                    label=label,
                    policy=policy,
                    target=target.kind,
                    engine=target.engine,
                    simulated=target.simulated,
                    profile=target.profile,
                    max_batch=max_batch,
                    batch_cap=target.batch_cap(max_batch),
                    handling_strategy=strategy,
                    kv_prefetch=prefetch,
                    network_latency_s=network_latency_s,
                )
                records: list[TaskRecord] = []
                stop = threading.Event()
                started = time.perf_counter()
                try:
                    run.engine_busy_s = target.run(
                        trace,
                        policy,
                        max_batch,
                        records,
                        lambda _r, b=bar: progress.advance(b),  # type: ignore[misc]
                        stop,
                    )
                except KeyboardInterrupt:
                    stop.set()
                    interrupted = True
                run.wall_s = time.perf_counter() - started
                run.tasks = records
                run.interrupted = interrupted or stop.is_set()
                for r in records:
                    if not r.finished and not r.error:
                        r.error = "interrupted" if run.interrupted else "not finished"
                results.runs.append(run)
                if out is not None:
                    results_format.write(results, out)
                if interrupted:
                    say_interrupted(console, f"{len(results.runs)} run(s)", out)
                    return results, True
    return results, False
