"""Conveyor on our planner (one run, the real TorchEngine on the planner checkpoint,
real plugin processes):

1. Fig. 8: an LRTrace arm plan whose skill calls are the elements; a tool works
   `t` seconds per call, swept against the mean decode time per call `g`
   (t/g from 0.1 to 10). Completion latency (task submitted -> decode ended and
   the tool done with every call) with partial execution (each call goes to the
   tool the moment its ')' is decoded) vs sequential (the same tool, in its own
   process, gets the calls when the plan is fully decoded), against Conveyor's
   bound `sum max(g_i, t_i) + g_{n+1}` computed from the run's own decode times.
   Goal: >= 30% lower latency near t/g = 1, within 10% of the bound.
2. Early validation: time from the token that completes a bad argument (an
   object the robot's map lacks) to the task's error, with the validator on
   partial calls, on complete calls only, and validating the complete output
   after it was decoded (paper's Validation workload).
3. Parsing + IPC overhead per decoded token: host time in the service's tool hook
   plus the plugin process's CPU, over the decode time (paper: 0.6% CPU).

Both sides of every comparison come from the same decode (1, 3) or the same
engine in the same run (2). On a shared machine the load moves the decode time
from run to run, and with it t/g: 1 and 2 pad each engine iteration to
`--pace-ms` (the tokens stay the model's; the JSON counts the iterations whose
compute alone took longer), 3 runs unpaced.

    PYTHONPATH=. .venv/bin/python bench/conveyor.py [--reps 3] [--pace-ms 12]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from robot_models.language import load_language
from timely_core.clock import MonotonicClock
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.events import TaskResult
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.tools.call_stream import CallStream
from timely_core.tools.plugin import ToolReply
from timely_core.tools.process import PendingCall, PluginProcess
from timely_core.tools.router import Deferred
from timely_core.tools.spec import ToolSpec

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RATIOS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
SORT = next(t for t in LRTRACE_TASKS if t.instruction.startswith("Sort the fruit"))
DESK = next(t for t in LRTRACE_TASKS if t.instruction == "Clean the desk")
BAD_OBJECT = "marker"
ELEMENT_TOOL = "conveyor_plugins:ElementTool"
VALIDATOR = "robot_models.tools.validator:SkillCallValidator"
OVERHEAD_REPS_PER_REP = 5  # /proc counts CPU in 10 ms ticks: enough tokens to see it
DEFAULT_PACE_MS = 12.0  # the unpaced planner takes 4-7 ms per token at load 5-10
GOAL_REDUCTION = 0.30
GOAL_BOUND_GAP = 0.10


class Replies:
    """Collects a standalone plugin process's replies, with their arrival times."""

    def __init__(self) -> None:
        self.times: list[tuple[float, ToolReply]] = []
        self.cond = threading.Condition()

    def __call__(self, pending: PendingCall, reply: ToolReply) -> None:
        with self.cond:
            self.times.append((time.monotonic(), reply))
            self.cond.notify_all()

    def wait(self, count: int, timeout_s: float = 120.0) -> list[tuple[float, ToolReply]]:
        with self.cond:
            if not self.cond.wait_for(lambda: len(self.times) >= count, timeout_s):
                raise TimeoutError(f"{len(self.times)} of {count} replies")
            out, self.times = self.times, []
            return out


class PacedEngine:
    """The TorchEngine, each `step` padded to at least `pace_s` (0: not padded): the
    tokens are the model's, the decode time per token fixed above what the shared
    machine's load makes the compute take, so g holds still across a sweep."""

    def __init__(self, inner: TorchEngine, pace_s: float) -> None:
        self.inner = inner
        self.pace_s = pace_s
        self.late_steps = 0  # steps whose compute alone took longer than the pace
        self.steps = 0

    def step(self, gen_ids: list[int]) -> Any:
        start = time.perf_counter()
        outputs = self.inner.step(gen_ids)
        left = self.pace_s - (time.perf_counter() - start)
        if self.pace_s > 0:
            self.steps += 1
            if left > 0:
                time.sleep(left)
            else:
                self.late_steps += 1
        return outputs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Planner:
    """The service on the planner checkpoint, one arm robot, continuous decoding."""

    def __init__(self, model: Path, pace_s: float) -> None:
        tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
        self.engine = PacedEngine(TorchEngine(model, EngineConfig()), pace_s)
        self.service = PlanningService(
            self.engine,
            tokenizer,
            policy="stream",  # no suspension between statements: g is pure decoding
            clock=MonotonicClock(),
            config=ServiceConfig(max_tokens=256),
            languages={"arm": load_language("arm")},
        )
        self.service.register_robot("arm", robot_type="arm")
        skill_set = load_language("arm").skill_set
        self.arm_skills = sorted({n for s in skill_set.skills for n in (s.name, s.short)})
        router = self.service._state.tools  # timed: the hook's host cost per token
        inner = router.on_decoded
        self.hook_s: dict[str, float] = {}  # by robot: wall
        self.hook_cpu_s: dict[str, float] = {}  # the loop thread's CPU inside the hook
        self.hook_calls: dict[str, int] = {}

        def timed(
            generation: Any,
            segment_done: bool,
            defer: bool = False,
            stream_wait_s: float | None = None,
        ) -> Deferred:
            start, start_cpu = time.perf_counter(), time.thread_time()
            try:
                return inner(generation, segment_done, defer, stream_wait_s)
            finally:
                robot = generation.robot_id
                cpu = time.thread_time() - start_cpu
                self.hook_cpu_s[robot] = self.hook_cpu_s.get(robot, 0.0) + cpu
                wall = time.perf_counter() - start
                self.hook_s[robot] = self.hook_s.get(robot, 0.0) + wall
                self.hook_calls[robot] = self.hook_calls.get(robot, 0) + 1

        router.on_decoded = timed  # type: ignore[method-assign]
        self.service.start()
        self._runs = 0

    def plan(
        self,
        scene: str,
        instruction: str,
        at_end: Callable[[TaskResult, float], None] | None = None,
        robot: str = "arm",
    ) -> tuple[str, float, float, TaskResult]:
        """(task id, submitted, decode ended, result); `at_end` runs at the result."""
        self._runs += 1
        task_id = f"run{self._runs}"
        ended: list[float] = []
        start = time.monotonic()
        handle = self.service.submit(
            TaskRequest(robot_id=robot, scene=scene, instruction=instruction, task_id=task_id)
        )

        def on_result(result: TaskResult) -> None:
            ended.append(time.monotonic())
            if at_end is not None:
                at_end(result, ended[0])

        handle.on_result(on_result)
        result = handle.result(timeout_s=300)
        return task_id, start, ended[0], result

    def outcomes_settled(self, task_id: str, count: int) -> list[Any]:
        for _ in range(30000):
            outcomes = self.service.tool_outcomes(task_id)
            if len(outcomes) >= count:
                return outcomes
            time.sleep(0.002)
        raise TimeoutError(f"{task_id}: {len(self.service.tool_outcomes(task_id))} outcomes")

    def element_tool(self, name: str, t_s: float, partial: bool = False) -> dict[str, Any]:
        return {
            "name": name,
            "plugin": ELEMENT_TOOL,
            "options": {"skills": self.arm_skills, "t_s": t_s, "partial": partial},
            "wall_s": 600,
        }


def complete_calls(text: str) -> list[str]:
    return [e.text for e in CallStream().feed(text) if e.complete]


def paper_bound(g: Sequence[float], t: Sequence[float]) -> float:
    """sum max(g_i, t_i) + g_{n+1} (g has n+1 entries)."""
    return sum(max(gi, ti) for gi, ti in zip(g[:-1], t, strict=True)) + g[-1]


def pipeline_ideal(starts: Sequence[float], end: float, t: Sequence[float]) -> float:
    """The exact schedule with no overhead: call i starts when decoded and the
    tool is free; done when both the decode and the last call are."""
    free = 0.0
    for s, ti in zip(starts, t, strict=True):
        free = max(free, s) + ti
    return max(end, free)


def fig8(planner: Planner, reps: int) -> dict[str, Any]:
    service = planner.service
    calls = complete_calls(SORT.golden_plan)
    n = len(calls)
    service.register_tool("arm", planner.element_tool("element", 0.0))
    gaps: list[float] = []
    for _ in range(reps):  # calibration: decode time per call, the tool idle
        task_id, start, _end, result = planner.plan(SORT.scene, SORT.instruction)
        assert result.success and result.plan_text == SORT.golden_plan, result.error
        sent = sorted(o.sent_s for o in planner.outcomes_settled(task_id, n) if o.complete)
        gaps += [b - a for a, b in itertools.pairwise(sent)]
    g_mean = statistics.mean(gaps)
    rows = []
    for ratio in RATIOS:
        t_s = ratio * g_mean
        service.register_tool("arm", planner.element_tool("element", t_s))
        seq_replies = Replies()
        sequential = PluginProcess(
            ToolSpec.model_validate(planner.element_tool("sequential", t_s)), seq_replies
        )
        runs = []
        for _ in range(reps):

            def after_decode(
                result: TaskResult, _end_s: float, tool: PluginProcess = sequential
            ) -> None:
                for text in complete_calls(result.plan_text):  # the whole call decoded
                    tool.submit(_call(text, result))

            task_id, start, end, result = planner.plan(SORT.scene, SORT.instruction, after_decode)
            assert result.success, result.error
            outcomes = [o for o in planner.outcomes_settled(task_id, n) if o.complete]
            seq_done = max(at for at, _ in seq_replies.wait(n))
            sent = sorted(o.sent_s - start for o in outcomes)
            g = [sent[0]] + [b - a for a, b in itertools.pairwise(sent)]
            g.append(end - start - sent[-1])
            latency = max(end, max(o.replied_s for o in outcomes)) - start
            bound = paper_bound(g, [t_s] * n)
            runs.append(
                {
                    # this run's own t/g: the load moves g between runs
                    "effective_t_over_g": t_s / statistics.mean(g[1:-1]),
                    "partial_s": latency,
                    "sequential_s": seq_done - start,
                    "bound_s": bound,
                    "ideal_s": pipeline_ideal(sent, end - start, [t_s] * n),
                    "old_model_s": sum(g) + n * t_s,
                    "decode_s": end - start,
                }
            )
        sequential.close()
        row: dict[str, Any] = {"t_over_g": ratio, "t_s": t_s}
        for key in runs[0]:
            row[key] = statistics.median(r[key] for r in runs)
        row["reduction"] = 1 - row["partial_s"] / row["sequential_s"]
        row["bound_gap"] = row["partial_s"] / row["bound_s"] - 1
        row["runs"] = runs
        rows.append(row)
    service.unregister_tool("arm", "element")
    return {"calls": n, "g_mean_s": g_mean, "rows": rows}


def _call(text: str, result: TaskResult) -> Any:
    from timely_core.tools.plugin import ToolCall

    name = text.split("(", 1)[0]
    return ToolCall(result.task_id, result.robot_id, 0, name, (), True, text)


def early_validation(planner: Planner, reps: int) -> dict[str, Any]:
    service = planner.service
    # The planner sees the marker in its scene; the robot's map no longer has it.
    scene = DESK.scene
    robot_map = DESK.scene.replace(f"{BAD_OBJECT}, ", "")
    bad_call = f"pk('{BAD_OBJECT}'"
    service.register_tool("arm", planner.element_tool("recorder", 0.0, partial=True))
    validator = {
        "name": "validator",
        "plugin": VALIDATOR,
        "options": {"robot_type": "arm", "map": robot_map},
    }
    modes: dict[str, list[float]] = {"partial": [], "complete_call": [], "complete_output": []}
    whole_replies = Replies()
    whole = PluginProcess(ToolSpec.model_validate(validator), whole_replies)

    def bad_token_s(task_id: str) -> float:
        for _ in range(30000):
            for o in service.tool_outcomes(task_id):
                if o.tool == "recorder" and o.call_text.startswith(bad_call):
                    return float(o.sent_s)
            time.sleep(0.002)
        raise TimeoutError(task_id)

    for _ in range(reps):
        for mode in ("partial", "complete_call"):
            service.register_tool("arm", {**validator, "partial_calls": mode == "partial"})
            task_id, _, end, result = planner.plan(scene, DESK.instruction)
            assert not result.success and BAD_OBJECT in result.error, result.error
            modes[mode].append(end - bad_token_s(task_id))
        service.unregister_tool("arm", "validator")

        def validate_output(result: TaskResult, _end_s: float) -> None:
            for text in complete_calls(result.plan_text):
                whole.submit(_scene_call(text, result, scene))

        task_id, _, _, result = planner.plan(scene, DESK.instruction, validate_output)
        assert result.success  # nothing checked it while it was decoded
        replies = whole_replies.wait(len(complete_calls(result.plan_text)))
        first_error = min(at for at, reply in replies if reply.kind == "error")
        modes["complete_output"].append(first_error - bad_token_s(task_id))
    whole.close()
    service.unregister_tool("arm", "recorder")
    medians = {mode: statistics.median(v) for mode, v in modes.items()}
    return {
        "bad_argument": BAD_OBJECT,
        "median_s": medians,
        "runs_s": modes,
        "complete_call_over_partial": medians["complete_call"] / medians["partial"],
        "complete_output_over_partial": medians["complete_output"] / medians["partial"],
    }


def _scene_call(text: str, result: TaskResult, scene: str) -> Any:
    from timely_core.tools.plugin import ToolCall

    event = [e for e in CallStream().feed(text) if e.complete][-1]
    return ToolCall(result.task_id, result.robot_id, 0, event.skill, event.args, True, text, scene)


def cpu_s(stat_path: str) -> float:
    """User + system CPU seconds of a process or thread (/proc, clock ticks)."""
    fields = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tool_cpu_s(planner: Planner, name: str) -> float:
    """CPU of the tool's process and of the service's reader thread for it."""
    process = planner.service._state.tools._tools["arm"][0].process
    assert process.spec.name == name
    reader = process._reader.native_id
    return cpu_s(f"/proc/{process.pid}/stat") + cpu_s(f"/proc/self/task/{reader}/stat")


def overhead(planner: Planner, reps: int) -> dict[str, Any]:
    """Against the unpaced decode (the overhead is a share of the real token time);
    a robot with a no-op tool on every call and argument and one without, their
    runs alternated so the machine's load hits both alike."""
    service = planner.service
    planner.engine.pace_s = 0.0
    service.register_robot("bare", robot_type="arm")
    service.register_tool("arm", planner.element_tool("noop", 0.0, partial=True))
    tool_start = tool_cpu_s(planner, "noop")
    planner.hook_s, planner.hook_cpu_s, planner.hook_calls = {}, {}, {}
    decode_s = {"bare": 0.0, "arm": 0.0}
    for _ in range(reps):
        for robot in decode_s:
            task_id, start, end, result = planner.plan(SORT.scene, SORT.instruction, robot=robot)
            assert result.success, result.error
            decode_s[robot] += end - start
            if robot == "arm":
                planner.outcomes_settled(task_id, 1)
    time.sleep(0.2)  # the last replies
    tool_s = tool_cpu_s(planner, "noop") - tool_start
    service.unregister_tool("arm", "noop")
    rows = {}
    for robot, label in (("bare", "no_tools"), ("arm", "tool_on_every_call_and_argument")):
        tokens = max(planner.hook_calls.get(robot, 0), 1)
        extra_s = tool_s if robot == "arm" else 0.0
        rows[label] = {
            "tokens": planner.hook_calls.get(robot, 0),
            "hook_wall_us_per_token": 1e6 * planner.hook_s.get(robot, 0.0) / tokens,
            "hook_cpu_us_per_token": 1e6 * planner.hook_cpu_s.get(robot, 0.0) / tokens,
            "tool_ipc_cpu_us_per_token": 1e6 * extra_s / tokens,
            "decode_ms_per_token": 1e3 * decode_s[robot] / tokens,
            "cpu_overhead_fraction": (planner.hook_cpu_s.get(robot, 0.0) + extra_s)
            / decode_s[robot],
        }
    return rows


def print_tables(results: dict[str, Any]) -> None:
    console = Console()
    f8 = results["fig8"]
    table = Table(
        title=f"Fig. 8: {f8['calls']} calls, g = {1e3 * f8['g_mean_s']:.1f} ms per call (medians)"
    )
    for col in (
        "t/g",
        "run t/g",
        "t ms",
        "sequential ms",
        "partial ms",
        "bound ms",
        "ideal ms",
        "lower",
        "vs bound",
    ):
        table.add_column(col, justify="right")
    for r in f8["rows"]:
        table.add_row(
            f"{r['t_over_g']:g}",
            f"{r['effective_t_over_g']:.2f}",
            f"{1e3 * r['t_s']:.1f}",
            f"{1e3 * r['sequential_s']:.0f}",
            f"{1e3 * r['partial_s']:.0f}",
            f"{1e3 * r['bound_s']:.0f}",
            f"{1e3 * r['ideal_s']:.0f}",
            f"{100 * r['reduction']:.1f}%",
            f"{100 * r['bound_gap']:+.1f}%",
        )
    console.print(table)
    ev = results["early_validation"]
    table = Table(
        title=f"Early validation: bad argument token -> task error ({ev['bad_argument']!r})"
    )
    table.add_column("validated on")
    table.add_column("median ms", justify="right")
    table.add_column("x partial", justify="right")
    for mode, value in ev["median_s"].items():
        ratio = value / ev["median_s"]["partial"]
        table.add_row(mode, f"{1e3 * value:.1f}", f"{ratio:.2f}")
    console.print(table)
    table = Table(title="Parsing + IPC overhead per decoded token")
    for col in ("case", "tokens", "hook wall us", "hook CPU us", "tool+IPC CPU us", "decode ms"):
        table.add_column(col, justify="right")
    table.add_column("CPU overhead", justify="right")
    for label, r in results["overhead"].items():
        table.add_row(
            label,
            str(r["tokens"]),
            f"{r['hook_wall_us_per_token']:.1f}",
            f"{r['hook_cpu_us_per_token']:.1f}",
            f"{r['tool_ipc_cpu_us_per_token']:.1f}",
            f"{r['decode_ms_per_token']:.2f}",
            f"{100 * r['cpu_overhead_fraction']:.2f}%",
        )
    console.print(table)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["fig8"]["rows"]
    x = [r["effective_t_over_g"] for r in rows]
    fig, (ax, rel) = plt.subplots(1, 2, figsize=(11, 4))
    series = (
        ("sequential_s", "o-", "sequential (tool after decode)"),
        ("partial_s", "s-", "partial execution (Conveyor)"),
        ("bound_s", "k--", "bound sum max(g,t) + g_n+1"),
    )
    for key, style, label in series:
        ax.plot(x, [1e3 * r[key] for r in rows], style, label=label)
        # the shared machine's load moves the decode time between rows: divided by it
        rel.plot(x, [r[key] / r["decode_s"] for r in rows], style, label=label)
    for axis in (ax, rel):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("t / g (tool time / the runs' decode time per call)")
        axis.legend()
    ax.set_ylabel("completion latency (ms)")
    rel.set_ylabel("completion latency / the run's decode time")
    ax.set_title("Conveyor Fig. 8 on the planner (TorchEngine, CPU)")
    rel.set_title("the same, relative to each run's decode")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--model", type=Path, default=default_planner_path())
    parser.add_argument(
        "--pace-ms", type=float, default=DEFAULT_PACE_MS, help="floor of an iteration (0: none)"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # conveyor_plugins, for the tools
    load_before = os.getloadavg()
    planner = Planner(args.model, args.pace_ms / 1e3)
    try:
        results: dict[str, Any] = {
            "engine": "torch (planner checkpoint, CPU)",
            "pace_ms": args.pace_ms,
            "policy": "stream",
            "reps": args.reps,
            "fig8": fig8(planner, args.reps),
            "early_validation": early_validation(planner, args.reps),
            "paced_steps_late": [planner.engine.late_steps, planner.engine.steps],
            "overhead": overhead(planner, OVERHEAD_REPS_PER_REP * args.reps),
        }
    finally:
        planner.service.stop()
        planner.service.close_tools()
    # near t/g = 1 by the decode the runs saw, not by the calibration's
    near_one = min(results["fig8"]["rows"], key=lambda r: abs(r["effective_t_over_g"] - 1))
    results["goals"] = {
        "effective_t_over_g_nearest_1": near_one["effective_t_over_g"],
        "reduction_at_t_over_g_1": near_one["reduction"],
        "reduction_goal": GOAL_REDUCTION,
        "max_abs_bound_gap": max(abs(r["bound_gap"]) for r in results["fig8"]["rows"]),
        "bound_gap_goal": GOAL_BOUND_GAP,
    }
    results["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "python": platform.python_version(),
    }
    print_tables(results)
    goals = results["goals"]
    print(
        f"t/g = {goals['effective_t_over_g_nearest_1']:.2f} (the runs' own, nearest 1): "
        f"{100 * goals['reduction_at_t_over_g_1']:.1f}% lower latency "
        f"(goal >= {100 * GOAL_REDUCTION:.0f}%); largest distance to the bound "
        f"{100 * goals['max_abs_bound_gap']:.1f}% (goal <= {100 * GOAL_BOUND_GAP:.0f}%); "
        f"load {load_before[0]:.1f} -> {results['machine']['loadavg_after'][0]:.1f} on "
        f"{os.cpu_count()} CPUs"
    )
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "conveyor.json").write_text(json.dumps(results, indent=2) + "\n")
    plot(results, RESULTS_DIR / "conveyor.png")


if __name__ == "__main__":
    main()
