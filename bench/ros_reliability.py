"""ROS 2 reliability report (#26): cancels at random points and fuzzed goals against a
running planner and a simulated arm, in separate processes, at the issue's scale.

- Cancel trials: a long arm goal cancelled before acceptance, right after it, just
  after a segment was sent, or mid-segment (chosen at random); for each, whether the
  robot stopped and how long from the client's cancel to the robot stopping (the
  robot's own monotonic log timestamps: one clock on this machine), and anything
  the robot started or finished after it stopped (must be nothing). Target 100 ms.
- Fuzz: goals with random fields (any Unicode, sizes up to 9,000 characters, NaN
  and infinite TUFs, bad presets, unknown robots), sent in windows of 200: every one
  must end, every rejection must name the field, the planner must not crash, and
  its resident memory is sampled to show it stays bounded.

    PYTHONPATH=. .venv/bin/python bench/ros_reliability.py [--cancels 200] [--fuzz 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.timely_ros.reliability import (  # noqa: E402
    CANCEL_POINTS,
    cancel_trial,
    fuzz_goal,
    names_a_field,
    rss_kib,
)
from tests.timely_ros.ros_support import (  # noqa: E402
    NodeProcess,
    RosClient,
    claim_domain,
    executor_entry,
    lrtrace_goal_fields,
    planner_checkpoint,
    planner_entry,
)

RESULTS = ROOT / "bench" / "results" / "ros_reliability.json"
WINDOW = 200  # fuzzed goals in flight at once


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": ordered[-1]}


def run_cancels(client: Any, robot: NodeProcess, trials: int, console: Console) -> dict[str, Any]:
    from timely_ros.plan_client import make_goal

    task = lrtrace_goal_fields(10)
    rng = random.Random(2026)
    rows = []
    for n in range(trials):
        point = rng.choice(CANCEL_POINTS)
        goal = make_goal("arm1", task["instruction"], scene=task["scene"])
        trial = cancel_trial(client, robot, goal, point, rng)
        rows.append(trial)
        if (n + 1) % 20 == 0:
            console.print(f"cancel trials: {n + 1}/{trials}", style="dim")
    by_point: dict[str, Any] = {}
    for point in CANCEL_POINTS:
        mine = [t for t in rows if t.point == point]
        stops = [t.robot_stop_s for t in mine if t.robot_stop_s is not None]
        by_point[point] = {
            "trials": len(mine),
            "segment_running_at_cancel": sum(t.ran_before_cancel for t in mine),
            "robot_stopped": len(stops),
            "stop_s": _percentiles(stops),
            "moved_after_cancel": sum(bool(t.moved_after_cancel) for t in mine),
        }
    stops = [t.robot_stop_s for t in rows if t.robot_stop_s is not None]
    return {
        "trials": len(rows),
        "not_cancelled_status": sum(t.status != 5 for t in rows),  # 5: STATUS_CANCELED
        "ran_but_not_stopped": sum(t.ran_before_cancel and t.robot_stop_s is None for t in rows),
        "moved_after_cancel": [t.moved_after_cancel for t in rows if t.moved_after_cancel],
        "stop_s": _percentiles(stops),
        "within_100ms": sum(s <= 0.1 for s in stops),
        "with_a_stop": len(stops),
        "by_point": by_point,
    }


def run_fuzz(client: Any, planner: NodeProcess, goals: int, console: Console) -> dict[str, Any]:
    rng = random.Random(105)
    pid = planner.proc.pid
    rss = [(0, rss_kib(pid))]
    accepted = rejected = unnamed = hung = 0
    examples: list[str] = []
    started = time.monotonic()
    last = (0, started)
    rates: list[tuple[int, float]] = []  # (goals sent, goals/s over the last 5,000)
    sent = 0
    while sent < goals:
        window = [
            client.send(fuzz_goal(rng, ["arm1", "drone1"]))
            for _ in range(min(WINDOW, goals - sent))
        ]
        sent += len(window)
        for call in window:
            if not call.done.wait(60):
                hung += 1
                continue
            if call.accepted:
                accepted += 1
                continue
            rejected += 1
            reason = client.rejection_reason(call, wait_s=5.0)
            if not names_a_field(reason):
                unnamed += 1
                if len(examples) < 5:
                    examples.append(reason)
        if sent % 5_000 < WINDOW:
            now = time.monotonic()
            rss.append((sent, rss_kib(pid)))
            rates.append((sent, (sent - last[0]) / (now - last[1])))  # goals/s since last
            last = (sent, now)
            console.print(
                f"fuzz: {sent}/{goals} goals, {rates[-1][1]:.0f}/s, RSS {rss[-1][1]} KiB",
                style="dim",
            )
    rss.append((sent, rss_kib(pid)))
    return {
        "goals": sent,
        "accepted": accepted,
        "rejected": rejected,
        "rejections_not_naming_a_field": unnamed,
        "examples_not_naming_a_field": examples,
        "hung": hung,
        "seconds": time.monotonic() - started,
        "planner_rss_kib": rss,
        "goals_per_s": rates,
        "planner_alive": planner.proc.poll() is None,
        "tracebacks_in_planner_log": planner.output().count("Traceback"),
    }


def print_tables(console: Console, results: dict[str, Any]) -> None:
    c = results["cancels"]
    table = Table(
        title=f"cancel at random points: {c['trials']} trials "
        "(stop: the client's cancel -> the robot stopped)"
    )
    for column in (
        "point",
        "trials",
        "segment running",
        "stopped",
        "p50",
        "p90",
        "max",
        "moved after",
    ):
        table.add_column(column)
    for point, row in c["by_point"].items():
        s = row["stop_s"]
        table.add_row(
            point,
            str(row["trials"]),
            str(row["segment_running_at_cancel"]),
            str(row["robot_stopped"]),
            *(f"{s[k] * 1e3:.1f} ms" if s else "-" for k in ("p50", "p90", "max")),
            str(row["moved_after_cancel"]),
        )
    console.print(table)
    console.print(
        f"stops within 100 ms: {c['within_100ms']}/{c['with_a_stop']}; ran but not stopped: "
        f"{c['ran_but_not_stopped']}; not ending CANCELED: {c['not_cancelled_status']}"
    )
    f = results["fuzz"]
    rss = f["planner_rss_kib"]
    console.print(
        f"fuzz: {f['goals']} goals in {f['seconds']:.0f} s: {f['rejected']} rejected "
        f"({f['rejections_not_naming_a_field']} not naming a field), {f['accepted']} accepted, "
        f"{f['hung']} hung; planner alive {f['planner_alive']}, tracebacks "
        f"{f['tracebacks_in_planner_log']}; RSS {rss[0][1]} -> {rss[-1][1]} KiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cancels", type=int, default=200)
    parser.add_argument("--fuzz", type=int, default=100_000)
    args = parser.parse_args()
    console = Console()
    from timely_ros.plan_client import PlanClient

    with tempfile.TemporaryDirectory() as tmp_dir, claim_domain():
        tmp = Path(tmp_dir)
        planner_cfg = planner_entry(
            {"arm1": "arm", "drone1": "drone"},
            engine="simulated",
            model_path=str(planner_checkpoint(tmp)),
            kv_budget_mb=4096.0,
            max_active_goals=256,
            drone1={"type": "drone", "dispatch": False},
        )
        robot = NodeProcess(
            executor_entry("arm1", "sim-arm", time_scale=1.0), "executors", tmp, "arm"
        )
        planner = NodeProcess(planner_cfg, "planner", tmp, "planner")
        ros = RosClient(f"reliability_bench_{os.getpid()}")
        try:
            robot.wait_for_output("robot arm1: sim-arm executor ready", 60)
            client = PlanClient(ros.node)
            if not client.wait_for_server(60):
                raise SystemExit(planner.output())
            load = os.getloadavg()
            results = {
                "load_average_at_start": load,
                "cpus": os.cpu_count(),
                "cancels": run_cancels(client, robot, args.cancels, console),
                "fuzz": run_fuzz(client, planner, args.fuzz, console),
                "load_average_at_end": os.getloadavg(),
                "setup": "planner (simulated engine, paced) and sim arm (time scale 1) in two "
                "processes, client in this one; Fast DDS shared memory",
            }
        finally:
            ros.close()
            planner.stop()
            robot.stop()
    print_tables(console, results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
