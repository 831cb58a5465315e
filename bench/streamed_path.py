"""The streamed skill (issue #23): a drone's `fp` path whose legs go to the robot as
they are decoded, against the same path sent whole, in one run.

The service runs on the simulated engine in virtual time at the paper's latency
(TimelyLLM's Llama3-8B on an RTX 4090), forced to write `fp(<k legs>);ld();` (the
shipped checkpoint was not trained on `fp`), with `StreamedPath` in its own process.
Three ways per path length k (2, 4, 8 legs):
- streamed: the tool on partial calls: each leg delivered at the token completing it;
- at ')': the same tool on complete calls only (`partial_calls: False`);
- whole: no tool: the statement is one segment, delivered at its ';'.
The robot flies the legs one after another, each when it has it and the one before
ended, for its mean time by the execution-time model (1.2 s + length / 60 cm/s):
first motion (request -> first leg starts) and path done (-> last leg ends), in the
service's virtual time. The wall time the service loop spends per decoded token,
with the tool's per-token wait and without a tool, is measured for real (median of
`--reps` runs; the machine is shared, so the ratio is what to read).

    PYTHONPATH=. .venv/bin/python bench/streamed_path.py [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.exec_time import ExecTimeModel
from robot_models.language import load_language
from robot_models.plan_ast import BoundCall
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.events import Segment, StreamedElement
from timely_core.request import TaskRequest
from timely_core.service import PlanningService

RESULTS = Path(__file__).resolve().parent / "results" / "streamed_path.json"
LEG_CYCLE = [(100, 0, 50), (0, 100, 0), (-100, 0, 0), (0, -100, -50)]
MODES = ("streamed", "at ')'", "whole")
SEGMENT_TOKENS = 160  # an 8-leg path is about 70 tokens (the ROS planner's limit for it)


def plan_of(legs: int) -> str:
    values = [v for i in range(legs) for v in LEG_CYCLE[i % len(LEG_CYCLE)]]
    return f"fp({','.join(map(str, values))});ld();"


def make_service(tokenizer: Tokenizer, plan: str, mode: str) -> PlanningService:
    ids = list(tokenizer.encode(plan, add_special_tokens=False).ids)
    eos = tokenizer.token_to_id("<eos>")
    assert eos is not None

    def script(_prompt: Sequence[int]) -> list[int]:
        return ids

    engine = SimulatedEngine(
        VirtualClock(), PAPER_LLAMA3_8B_RTX4090, script, SimulatedEngineConfig(eos_token_id=eos)
    )
    service = PlanningService(engine, tokenizer, "timely", clock=engine.clock)
    language = load_language("drone", streamed_skills=True)
    service.register_robot("drone1", language, max_segment_tokens=SEGMENT_TOKENS)
    if mode != "whole":
        service.register_tool(
            "drone1",
            {
                "name": "path",
                "plugin": "robot_models.tools.path_stream:StreamedPath",
                "options": {"robot_type": "drone"},
                "partial_calls": mode == "streamed",
            },
        )
    return service


def robot_times(events: list[Any], model: ExecTimeModel, start_s: float) -> tuple[float, float]:
    """(first motion, path done) after `start_s`: legs flown in order, each from
    when it arrived and the one before ended, for its mean modelled time."""
    legs: list[tuple[float, tuple[int, ...]]] = []
    for event in events:
        if isinstance(event, StreamedElement):
            args = tuple(int(a) for a in event.text[3:-1].split(","))
            legs.append((event.emitted_at_s, args))
        elif isinstance(event, Segment) and event.text.startswith("fp(") and not legs:
            values = [int(v) for v in event.text[3:-2].split(",")]
            legs += [
                (event.emitted_at_s, tuple(values[i : i + 3])) for i in range(0, len(values), 3)
            ]
    end = first = None
    for arrived, args in legs:
        begin = arrived if end is None else max(arrived, end)
        first = begin if first is None else first
        end = begin + model.estimate(BoundCall("fly_path", "fp", args))[1]
    assert first is not None and end is not None
    return first - start_s, end - start_s


def run_once(tokenizer: Tokenizer, legs: int, mode: str, rep: int) -> dict[str, float]:
    plan = plan_of(legs)
    service = make_service(tokenizer, plan, mode)
    try:
        events: list[Any] = []
        handle = service.submit(
            TaskRequest(robot_id="drone1", instruction="fly the path", task_id=f"t{rep}")
        )
        handle.on_segment(events.append)
        handle.on_element(events.append)
        start = service.clock.now()
        wall = time.perf_counter()
        service.run_until_idle()
        wall_s = time.perf_counter() - wall
        assert handle.result(timeout_s=0).success, handle.result(timeout_s=0).error
    finally:
        service.close_tools()
    model = load_language("drone", streamed_skills=True).exec_time
    first, done = robot_times(events, model, start)
    tokens = len(tokenizer.encode(plan, add_special_tokens=False).ids) + 1
    return {
        "first_motion_s": first,
        "path_done_s": done,
        "loop_wall_ms_per_token": 1e3 * wall_s / tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    rows: list[dict[str, Any]] = []
    for legs in (2, 4, 8):
        for mode in MODES:
            runs = [run_once(tokenizer, legs, mode, rep) for rep in range(args.reps)]
            row: dict[str, Any] = {"legs": legs, "mode": mode}
            for key in runs[0]:
                row[key] = statistics.median(r[key] for r in runs)
            rows.append(row)
    table = Table(title="fp path: legs streamed vs sent whole (virtual time, paper latency)")
    for column in ("legs", "mode", "first motion s", "vs whole", "path done s", "vs whole",
                   "loop ms/token"):  # fmt: skip
        table.add_column(column)
    for row in rows:
        whole = next(r for r in rows if r["legs"] == row["legs"] and r["mode"] == "whole")
        row["first_motion_vs_whole"] = row["first_motion_s"] / whole["first_motion_s"]
        row["path_done_vs_whole"] = row["path_done_s"] / whole["path_done_s"]
        row["loop_wall_vs_whole"] = row["loop_wall_ms_per_token"] / whole["loop_wall_ms_per_token"]
        table.add_row(
            str(row["legs"]),
            row["mode"],
            f"{row['first_motion_s']:.3f}",
            f"{row['first_motion_vs_whole']:.2f}",
            f"{row['path_done_s']:.2f}",
            f"{row['path_done_vs_whole']:.3f}",
            f"{row['loop_wall_ms_per_token']:.3f}",
        )
    Console().print(table)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "reps": args.reps,
                "latency": "PAPER_LLAMA3_8B_RTX4090 (virtual time)",
                "robot": "legs flown in order at their mean modelled time",
                "load_average": os.getloadavg(),
                "machine": platform.machine(),
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
