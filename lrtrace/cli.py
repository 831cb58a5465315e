"""`lrtrace`: compose, replay, report, capacity, profile-engine, record, fit.

Every bad input (malformed trace, unknown trace id or policy, impossible workload,
missing file, a flag the chosen target would ignore) ends with one line on stderr and
exit status 2 (an invalid trace or workload: a line, then one per problem); Ctrl-C
during a replay or a capacity search writes what is done and exits 130 (elsewhere:
one line and 130).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from lrtrace.errors import LrtraceError
from lrtrace.int_lists import parse_int_list
from lrtrace.interrupts import EXIT_INTERRUPTED
from lrtrace.outputs import output_path

DEFAULT_PROFILE = "paper-llama3-8b-rtx4090"  # the paper's (Table 1), built in


def _ints(text: str) -> tuple[int, ...]:
    """`1-8`, `1,3,5`, `1-3,9` (`lrtrace.int_lists`), not empty."""
    try:
        out = parse_int_list(text)
    except ValueError as err:
        raise LrtraceError(str(err)) from None
    if not out:
        raise LrtraceError(f"empty list of integers: {text!r}")
    return tuple(out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lrtrace", description="LRTrace: multi-robot LLM planning workloads and replay"
    )
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compose", help="compose a trace (WID 1-3 or custom)")
    c.add_argument(
        "-o", "--out", type=output_path, required=True, help="trace file to write (.lrt)"
    )
    c.add_argument("--wid", type=int, help="the paper's workload 1, 2 or 3 (Table 3)")
    c.add_argument("--yaml", type=Path, help="a workload YAML file (fields of WorkloadSpec)")
    c.add_argument("--name")
    c.add_argument("--eps", type=float, help="events per second")
    c.add_argument("--max-tpe", type=int, help="max tasks per event")
    c.add_argument("--trace-ids", help="e.g. 1-8 or 9,10,11")
    c.add_argument("--agents", type=int, help="agents per robot type")
    c.add_argument("--duration", type=float, help="seconds")
    c.add_argument("--seed", type=int)
    c.add_argument(
        "--variants",
        action="append",
        metavar="TYPE=NAME[,NAME...]",
        help="fleet variants a robot type's agents plan with, in turn (base: the base "
        "model), e.g. drone=heavy-drone,warehouse-drone,base; repeat per type",
    )

    r = sub.add_parser("replay", help="replay a trace against a target")
    r.add_argument("trace", type=Path)
    r.add_argument("-o", "--out", type=output_path, required=True, help="results file (.json)")
    r.add_argument("--target", choices=("sim", "service", "ros"), default="sim")
    r.add_argument("--policy", default="timely", help="a policy or a comma-separated list")
    # no defaults: a flag the target ignores is refused when given (flags.py), even
    # with the default's value
    r.add_argument("--max-batch", help="batch caps to sweep, e.g. 2,4,6,8 (Fig. 7)")
    r.add_argument("--profile", help=f"sim latency profile (default {DEFAULT_PROFILE})")
    r.add_argument("--model", type=Path, help="checkpoint for --target service (default: planner)")
    r.add_argument(
        "--tokenizer", type=Path, help="tokenizer.json for --target sim (default: planner)"
    )
    r.add_argument("--threads", type=int, help="torch threads for --target service")
    r.add_argument(
        "--variants-dir",
        type=Path,
        help="--target service: a folder of fleet variant folders, one per name the trace's "
        "agents give (default: the shipped robot_models/checkpoints/variants)",
    )
    r.add_argument(
        "--zoo",
        type=Path,
        help="--target service: serve the base model and the trace's variants from this "
        "block zoo (python -m robot_models.blocks)",
    )
    r.add_argument("--zoo-base", help="with --zoo: its variant served as the base (default base)")
    r.add_argument("--network-latency-ms", type=float, default=8.0)
    r.add_argument(
        "--handling-strategy",
        choices=("auto", "ttl", "preserve", "swap", "discard"),
        help="a suspended generation's KV (sim, service; default: the service's, auto); "
        "lamps, infercept and vllm-like bring their own",
    )
    r.add_argument(
        "--kv-prefetch",
        choices=("on", "off"),
        help="bring swapped KV back before a predicted resume (sim, service; default: "
        "the service's, on)",
    )
    r.add_argument(
        "--no-prefix-cache",
        action="store_true",
        help="prefill every prompt whole (sim, service): a server without a prefix cache",
    )

    rep = sub.add_parser("report", help="tables, JSON and plots from a results file")
    rep.add_argument("results", type=Path)
    rep.add_argument("--json", type=output_path, help="write the statistics as JSON here")
    rep.add_argument("--plots", type=Path, help="write PNG figures into this directory")
    rep.add_argument("--groups", choices=("all", "traces", "classes"), default="all")

    from lrtrace.capacity_cli import add_parser as add_capacity

    add_capacity(sub)

    pe = sub.add_parser("profile-engine", help="measure the real engine, write a latency profile")
    pe.add_argument("--model", type=Path, help="checkpoint (default: the planner)")
    pe.add_argument("--name", default="measured-torch-planner-cpu")
    pe.add_argument(
        "--out",
        type=output_path,
        help="profile file (default: NAME.json in the current directory; the committed "
        "profiles in lrtrace/profiles/ are replaced only when named here)",
    )
    pe.add_argument("--threads", type=int)
    pe.add_argument("--repeats", type=int, default=5)
    pe.add_argument(
        "--service-duration",
        type=float,
        default=5.0,
        help="seconds of drone load replayed on the real service per policy to measure its "
        "own time per iteration (default 5; 0: not measured)",
    )
    pe.add_argument(
        "--service-eps",
        type=float,
        default=15.0,
        help="events/s of that load (default 15: contended, short of overload, on this CPU)",
    )
    pe.add_argument(
        "--prefix-tokens",
        type=int,
        help="length of the shared prompt prefix to profile with (default: the longest "
        "robot prefix of robot_models under the checkpoint's tokenizer; 0: fresh prompts)",
    )

    rec = sub.add_parser(
        "record", help="collect executor reports or a replay's results into an executions file"
    )
    rec.add_argument(
        "reports",
        type=Path,
        help="JSON lines from executors ('-' for stdin), or an lrtrace results file",
    )
    rec.add_argument("--run", help="results file: only the run with this label (e.g. timely)")
    rec.add_argument("-o", "--out", type=output_path, required=True, help="executions file (.lrx)")

    f = sub.add_parser("fit", help="refit execution-time models from recorded executions")
    f.add_argument("executions", type=Path, nargs="+")
    f.add_argument("--out-dir", type=Path, required=True, help="where refitted models go")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    console = Console(width=max(Console().width, 180))  # the report table needs the room
    try:
        args = _parser().parse_args(argv)  # an output path can be refused here already
        from lrtrace import commands

        return int(getattr(commands, args.command.replace("-", "_"))(args, console))
    except LrtraceError as err:
        print(f"lrtrace: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # replay and capacity write their work first, and say so
        print("lrtrace: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
