"""Plans that react (issue #23), on the simulated engine in virtual time: the 11
LRTrace tasks, each on its own simulated robot, with skill failures injected at
`--fail-rate` per executed segment (the same draws in every mode). Three modes,
one run, the same engine model (TimelyLLM's Llama3-8B on an RTX 4090 profile):

- `off`: a failure ends the task (the service without replan_on_failure);
- `rollback`: replan_on_failure: the generation is rolled back to the failed
  segment's end, the failure appended as an observation, planning goes on;
- `scratch`: the caller replans from scratch: the failed task ends and a new
  task is submitted whose instruction carries the history (the plan that ran and
  the failure), so its plan starts where the failed one stopped.

The planner is scripted (the data set's golden plans; after a failure it retries
the failed segment, `robot_models.recovery`): the shipped checkpoint was not
trained on observations, so what is measured is the serving path, not the
model's recovery. Robots run each segment for its mean modelled time.

Reported: the share of tasks that hit a failure and still completed their plan,
and the recovery latency: from the robot's failure to the dispatch of the next
segment it runs. Times are virtual (modelled), not this machine's.

    PYTHONPATH=. .venv/bin/python bench/closed_loop.py [--seeds 10] [--fail-rate 0.2]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from robot_models.language import FAILED_MARK, load_language
from robot_models.recovery import retry_after_failure
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.errors import TaskFinished
from timely_core.events import Rollback, Segment, TaskResult
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.task_handle import TaskHandle

LANGUAGES = {t: load_language(t) for t in ("drone", "arm")}
TYPES = {f"robot{i}": t.robot_type for i, t in enumerate(LRTRACE_TASKS)}
RESULTS = Path(__file__).parent / "results" / "closed_loop.json"
MODES = ("off", "rollback", "scratch")
HISTORY = "\nHistory:\n"  # how the scratch mode's instruction carries what happened
MAX_RECOVERIES = 3
STEP_S = 0.002  # virtual time between the robots' looks at the service
ARRIVAL_GAP_S = 0.5


class ScriptedPlanner:
    """The golden plan of a known request; after failure observations (in the
    generation, or in a scratch task's history) the failed segment again and the rest."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._plans = {
            (t.scene.strip(), t.instruction.strip()): t.golden_plan for t in LRTRACE_TASKS
        }

    def __call__(self, ids: Sequence[int]) -> list[int]:
        text = self._tokenizer.decode(list(ids))
        request = text[text.rindex("### Request\nScene: ") :]
        scene, rest = request.removeprefix("### Request\nScene: ").split("\nTask: ", 1)
        task, written = rest.split("\nPlan:\n", 1)
        instruction, _, history = task.partition(HISTORY)
        plan = self._plans[(scene.strip(), instruction.strip())]
        written = (history + "\n" if history else "") + written
        if FAILED_MARK in written:
            recovery = retry_after_failure(plan, written)
            if recovery is None:
                raise KeyError(f"no recovery scripted after {written[-80:]!r}")
            plan = recovery
        return list(self._tokenizer.encode(plan, add_special_tokens=False).ids)


@dataclass
class Run:
    """One task on one robot, through however many service tasks it takes."""

    robot_id: str
    scene: str
    instruction: str
    handle: TaskHandle
    queue: deque[Segment] = field(default_factory=deque)
    running: Segment | None = None
    ends_s: float = 0.0
    fails: bool = False
    executions: int = 0  # segments started: the failure draws are by this count
    done_text: str = ""  # the plan text the robot completed
    failures: list[float] = field(default_factory=list)  # when, per failure
    recoveries_s: list[float] = field(default_factory=list)  # failure -> next dispatch
    result: TaskResult | None = None
    ended_s: float | None = None
    awaiting_recovery: float | None = None  # a failure's time, until the next start
    abandoned: bool = False  # a failure ended it: the plan was not completed


def eos_id(tokenizer: Tokenizer) -> int:
    eos = tokenizer.token_to_id("<eos>")
    if eos is None:
        raise SystemExit("the planner tokenizer has no <eos> token")
    return eos


def fails(seed: int, robot_id: str, execution: int, rate: float) -> bool:
    return random.Random(f"{seed}/{robot_id}/{execution}").random() < rate


def run_mode(
    mode: str, seed: int, rate: float, tokenizer: Tokenizer
) -> tuple[list[Run], dict[str, int]]:
    clock = VirtualClock()
    engine = SimulatedEngine(
        clock,
        PAPER_LLAMA3_8B_RTX4090,
        ScriptedPlanner(tokenizer),
        SimulatedEngineConfig(eos_token_id=eos_id(tokenizer)),
    )
    config = ServiceConfig(max_recoveries=MAX_RECOVERIES, grammar=False)
    service = PlanningService(engine, tokenizer, "timely", clock=clock, config=config)
    runs: list[Run] = []

    def submit(run_robot: str, scene: str, instruction: str, at_s: float) -> TaskHandle:
        request = TaskRequest(
            robot_id=run_robot,
            scene=scene,
            instruction=instruction,
            replan_on_failure=mode == "rollback",
        )
        return service.submit_at(at_s, request)

    def attach(run: Run) -> None:
        run.handle.on_segment(run.queue.append)
        run.handle.on_rollback(lambda rb: withdraw(run, rb))

    def withdraw(run: Run, rollback: Rollback) -> None:
        kept = [s for s in run.queue if s.index not in rollback.withdrawn]
        run.queue.clear()  # in place: the segment callback appends to this deque
        run.queue.extend(kept)

    for i, task in enumerate(LRTRACE_TASKS):
        robot_id = f"robot{i}"
        service.register_robot(robot_id, LANGUAGES[task.robot_type])
        handle = submit(robot_id, task.scene, task.instruction, i * ARRIVAL_GAP_S)
        run = Run(robot_id, task.scene, task.instruction, handle)
        attach(run)
        runs.append(run)

    while not all(r.ended_s is not None for r in runs):
        now = clock.now()
        for run in runs:
            step_robot(run, now, mode, seed, rate, submit, attach)
        service.run_until(now + STEP_S)
        if now > 3600:
            raise RuntimeError("the closed loop did not finish within an hour of virtual time")
    stats = engine.stats
    work = {
        "prefill_tokens": stats.prefill_tokens,
        "decode_tokens": stats.decode_tokens,
        "engine_busy_ms": round(stats.busy_s * 1000),
    }
    return runs, work


def step_robot(
    run: Run, now: float, mode: str, seed: int, rate: float, submit: Any, attach: Any
) -> None:
    """The robot's part at `now`: end the running segment when due, start the next."""
    if run.ended_s is not None:
        return
    if run.running is not None and run.ends_s <= now:
        segment, run.running = run.running, None
        if not run.fails:
            run.done_text += segment.text
            run.handle.segment_done(segment.index, run.ends_s)
        else:
            run.failures.append(run.ends_s)
            run.awaiting_recovery = run.ends_s
            error = f"{segment.text.strip()} injected failure"
            try:
                rollback = run.handle.segment_failed(segment.index, error, run.ends_s)
            except TaskFinished:  # the plan had ended (its result delivered)
                rollback = None
            if rollback is None:
                run.queue.clear()
                run.abandoned = True  # unless replanned from scratch below
                if mode == "scratch" and len(run.failures) <= MAX_RECOVERIES:
                    run.abandoned = False
                    language = LANGUAGES[TYPES[run.robot_id]]
                    observation = language.failure_observation(segment.text, error)
                    history = f"{run.done_text}{segment.text}\n{observation}"
                    instruction = f"{run.instruction}{HISTORY}{history}"
                    run.handle = submit(run.robot_id, run.scene, instruction, run.ends_s)
                    attach(run)
    if run.running is None and not run.queue and run.handle.done():
        run.result, run.ended_s = run.handle.result(timeout_s=0), now
        return
    if run.running is None and run.queue:
        segment = run.queue.popleft()
        if run.awaiting_recovery is not None:
            run.recoveries_s.append(segment.emitted_at_s - run.awaiting_recovery)
            run.awaiting_recovery = None
        run.running = segment
        run.executions += 1
        run.fails = fails(seed, run.robot_id, run.executions, rate)
        language = LANGUAGES[TYPES[run.robot_id]]
        _, mean_s = language.estimate_execution_s(list(segment.statements))
        run.ends_s = max(now, segment.emitted_at_s) + (mean_s / 2 if run.fails else mean_s)


def summary(mode: str, runs: list[Run]) -> dict[str, Any]:
    hit = [r for r in runs if r.failures]
    recovered = [r for r in hit if completed(r)]
    latencies = [x for r in runs for x in r.recoveries_s]
    return {
        "mode": mode,
        "tasks": len(runs),
        "tasks_with_failure": len(hit),
        "failures": sum(len(r.failures) for r in runs),
        "completed_after_failure": len(recovered),
        "share_completed_after_failure": len(recovered) / len(hit) if hit else None,
        "completed": sum(1 for r in runs if completed(r)),
        "recoveries": len(latencies),
        "recovery_latency_mean_s": statistics.fmean(latencies) if latencies else None,
        "recovery_latency_median_s": statistics.median(latencies) if latencies else None,
        "recovery_latency_p90_s": _quantile(latencies, 0.9),
        "task_end_mean_s": statistics.fmean(r.ended_s or 0.0 for r in runs),
    }


def completed(run: Run) -> bool:
    """The robot ran a whole plan: its last task succeeded and no failure ended it."""
    return run.result is not None and run.result.success and not run.abandoned


def _quantile(values: list[float], q: float) -> float | None:
    if len(values) < 2:
        return values[0] if values else None
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--fail-rate", type=float, default=0.2)
    args = parser.parse_args()
    tokenizer = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    rows = []
    for mode in MODES:
        runs: list[Run] = []
        work: dict[str, int] = {}
        for seed in range(args.seeds):
            seed_runs, seed_work = run_mode(mode, seed, args.fail_rate, tokenizer)
            runs += seed_runs
            for key, value in seed_work.items():
                work[key] = work.get(key, 0) + value
        rows.append(summary(mode, runs) | work)
    table = Table(
        title=f"closed loop: {args.seeds} x 11 LRTrace tasks, fail rate "
        f"{args.fail_rate:g} per segment (virtual time)"
    )
    for column in (
        "mode",
        "tasks hit",
        "failures",
        "completed after failure",
        "recovery latency mean / median / p90 (ms)",
        "task end mean (s)",
        "prefill / decode tokens",
    ):
        table.add_column(column)
    for row in rows:
        share = row["share_completed_after_failure"]
        ms = [
            row[k]
            for k in (
                "recovery_latency_mean_s",
                "recovery_latency_median_s",
                "recovery_latency_p90_s",
            )
        ]
        table.add_row(
            row["mode"],
            f"{row['tasks_with_failure']}/{row['tasks']}",
            str(row["failures"]),
            f"{row['completed_after_failure']} ({share:.0%})" if share is not None else "-",
            " / ".join("-" if v is None else f"{v * 1000:.1f}" for v in ms),
            f"{row['task_end_mean_s']:.2f}",
            f"{row['prefill_tokens']} / {row['decode_tokens']}",
        )
    Console().print(table)
    base, roll = rows[2], rows[1]
    ratio = None
    if base["recovery_latency_mean_s"] and roll["recovery_latency_mean_s"]:
        ratio = roll["recovery_latency_mean_s"] / base["recovery_latency_mean_s"]
        print(f"rollback / scratch mean recovery latency: {ratio:.3f}")
    RESULTS.write_text(
        json.dumps(
            {
                "bench": "closed_loop",
                "engine": "simulated (PAPER_LLAMA3_8B_RTX4090 latency model, virtual time)",
                "policy": "timely",
                "seeds": args.seeds,
                "fail_rate": args.fail_rate,
                "max_recoveries": MAX_RECOVERIES,
                "rows": rows,
                "rollback_over_scratch_mean_latency": ratio,
            },
            indent=2,
        )
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
