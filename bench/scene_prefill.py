"""Scenes prefilled ahead of the goal (Teola's partial prefill) vs prefilled with it.

Two parts, each against its baseline in the same run:

1. Real engine (the shipped planner on the torch engine, background thread, real
   clock): eight arm robots, each with its own scene of about 50, 200 or 800
   tokens. "ahead": every robot publishes its scene and it is prefilled before the
   goal comes; "with goal": the goal carries the scene. Low load: one goal at a
   time; high load: all eight robots at once. Each task is cancelled once its
   first segment is out: TTFT (arrival -> first token) and first-segment response
   time are what is measured. Rounds alternate the two modes so load drift hits
   both alike. (The arm's prompt prefix is 1,448 tokens and the checkpoint was
   trained on 2,048 positions: 800-token scenes run past them. TTFT does not
   depend on what is generated; the response time needs a valid first statement.)
2. Scene-heavy LRTrace load in virtual time (SimulatedEngine on this machine's
   measured latency profile, WID 1's arrivals): every robot has a 200-token scene
   of its own, published ahead or carried by each goal. Urgent and normal utility,
   response time and TTFT under `timely`.

    PYTHONPATH=. .venv/bin/python bench/scene_prefill.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import matmul_peak  # noqa: E402  (bench/engine.py, this script's folder)

from lrtrace.catalog import load_catalog  # noqa: E402
from lrtrace.compose import compose  # noqa: E402
from lrtrace.metrics import task_metrics  # noqa: E402
from lrtrace.profiles import load as load_profile  # noqa: E402
from lrtrace.replay.exec_sampler import ExecTimeSampler  # noqa: E402
from lrtrace.replay.targets.sim import SimTarget, engine_config  # noqa: E402
from lrtrace.results_format import TaskRecord  # noqa: E402
from lrtrace.trace_format import TraceFile  # noqa: E402
from lrtrace.workload import preset  # noqa: E402
from robot_models.dataset import LRTRACE_TASKS  # noqa: E402
from robot_models.language import load_language  # noqa: E402
from timely_core.clock import MonotonicClock, VirtualClock  # noqa: E402
from timely_core.engine.sim.engine import SimulatedEngine  # noqa: E402
from timely_core.engine.torch.config import EngineConfig  # noqa: E402
from timely_core.engine.torch.engine import TorchEngine  # noqa: E402
from timely_core.errors import TaskFinished  # noqa: E402
from timely_core.request import TaskRequest  # noqa: E402
from timely_core.service import PlanningService  # noqa: E402
from timely_core.service_config import ServiceConfig  # noqa: E402
from timely_core.serving.robots import scene_request_ids  # noqa: E402

CHECKPOINT = ROOT / "robot_models" / "checkpoints" / "planner"
RESULTS = ROOT / "bench" / "results" / "scene_prefill.json"
SCENE_TOKENS = (50, 200, 800)
ROBOTS = 8
MODES = ("ahead", "with goal")
PROFILE = "measured-torch-planner-cpu"
OBJECTS = (
    "red cup", "blue box", "green apple", "wooden spoon", "glass jar", "yellow sponge",
    "cardboard tray", "steel bolt", "plastic bottle", "paper towel", "black marker",
    "orange cone", "white plate", "rubber duck", "tin can", "folded cloth", "lemon",
    "small screwdriver", "roll of tape", "ceramic bowl", "toy car", "pine cone",
)  # fmt: skip


def make_scene(tokenizer: Any, seed: int, tokens: int) -> str:
    """A scene of about `tokens` tokens: objects at places, in a per-robot order."""
    rng = random.Random(seed)
    parts: list[str] = []
    while len(tokenizer.encode(", ".join(parts)).ids) < tokens:
        thing = rng.choice(OBJECTS)
        parts.append(f"a {thing} at {rng.randint(1, 99)} cm")
    return ", ".join(parts)


# ---- part 1: the real engine ----------------------------------------------------------


def real_service(tokenizer: Any) -> PlanningService:
    service = PlanningService(
        TorchEngine(CHECKPOINT, EngineConfig(device_kv_bytes=256 * 2**20)),
        tokenizer,
        clock=MonotonicClock(),
        config=ServiceConfig(scene_debounce_s=0.0, scene_kv_fraction=0.5),
        languages={"arm": load_language("arm")},
    )
    for i in range(ROBOTS):
        service.register_robot(f"arm{i}", robot_type="arm")
    service.start()
    return service


def first_segment(service: PlanningService, request: TaskRequest) -> tuple[float, float | None]:
    """(TTFT, first-segment response time) of a task cut after its first segment; no
    response time when the planner's first statement was invalid (greedy plans are
    the same in both modes, so the same tasks lack one)."""
    handle = service.submit(request)
    for _segment in handle.segments(timeout_s=120):
        with contextlib.suppress(TaskFinished):  # a one-segment plan may be done already
            handle.cancel()
        break
    result = handle.result(timeout_s=120)
    if result.ttft_s is None:
        raise RuntimeError(f"{request.robot_id}: no token generated ({result.error})")
    return result.ttft_s, result.response_time_s if result.segment_count else None


def run_load(
    service: PlanningService, requests: list[TaskRequest], burst: bool
) -> list[tuple[float, float | None]]:
    if not burst:
        return [first_segment(service, r) for r in requests]
    out: list[tuple[float, float | None]] = [(0.0, None)] * len(requests)

    def one(i: int) -> None:
        out[i] = first_segment(service, requests[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def measure_real(rounds: int) -> dict[str, Any]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(CHECKPOINT / "tokenizer.json"))
    language = load_language("arm")
    instructions = [t.instruction for t in LRTRACE_TASKS if t.robot_type == "arm"]
    services = {mode: real_service(tokenizer) for mode in MODES}
    rows: dict[str, Any] = {}
    try:
        for size in SCENE_TOKENS:
            scenes = [make_scene(tokenizer, 1000 * size + i, size) for i in range(ROBOTS)]
            scene_ids = [len(scene_request_ids(tokenizer, language, s)) for s in scenes]
            ahead = services["ahead"]
            for i, scene in enumerate(scenes):
                ahead.publish_scene(f"arm{i}", scene)
            deadline = time.monotonic() + 300
            while ahead.stats().scene_prefixes < ROBOTS or any(
                ahead.scene(f"arm{i}") != s for i, s in enumerate(scenes)
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("the scenes were not prefilled")
                time.sleep(0.01)
            hits_before = ahead.stats().scene_hits
            for load in ("low", "high"):
                samples: dict[str, list[tuple[float, float | None]]] = {m: [] for m in MODES}
                for rnd in range(rounds + 1):  # round 0 warms up
                    order = MODES if rnd % 2 == 0 else MODES[::-1]
                    for mode in order:
                        requests = [
                            TaskRequest(
                                robot_id=f"arm{i}",
                                instruction=instructions[(i + rnd) % len(instructions)],
                                scene="" if mode == "ahead" else scenes[i],
                            )
                            for i in range(ROBOTS)
                        ]
                        got = run_load(services[mode], requests, burst=load == "high")
                        if rnd:
                            samples[mode].extend(got)
                row: dict[str, Any] = {
                    "scene_tokens": size,
                    "scene_request_tokens_mean": statistics.mean(scene_ids),
                    "load": load,
                    "tasks_per_mode": len(samples["ahead"]),
                }
                for mode in MODES:
                    key = mode.replace(" ", "_")
                    row[f"{key}_ttft_s"] = statistics.median(t for t, _ in samples[mode])
                    responses = [r for _, r in samples[mode] if r is not None]
                    row[f"{key}_response_s"] = statistics.median(responses)
                    row[f"{key}_valid_first_segments"] = len(responses)
                row["ttft_change_pct"] = 100 * (row["ahead_ttft_s"] / row["with_goal_ttft_s"] - 1)
                row["response_change_pct"] = 100 * (
                    row["ahead_response_s"] / row["with_goal_response_s"] - 1
                )
                rows[f"{size}/{load}"] = row
            hits = ahead.stats().scene_hits - hits_before
            if hits != 2 * (rounds + 1) * ROBOTS:
                raise RuntimeError(f"scene {size}: {hits} tasks started from the prefilled scene")
    finally:
        for service in services.values():
            service.stop()
    return rows


# ---- part 2: a scene-heavy LRTrace load in virtual time -------------------------------


class InstructionScript:
    """Prompt ids -> the golden plan of the instruction the prompt ends with (the
    scenes here are the bench's own, so the catalog's request ids do not match)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._plans = {
            t.instruction: list(tokenizer.encode(t.golden_plan, add_special_tokens=False).ids)
            for t in LRTRACE_TASKS
        }

    def __call__(self, prompt_ids: Sequence[int]) -> Sequence[int]:
        text = self._tokenizer.decode(list(prompt_ids[-80:]))
        match = re.search(r"Task: (.*)\nPlan:\n?$", text)
        if match is None or match.group(1) not in self._plans:
            raise ValueError(f"no plan for the prompt ending {text[-60:]!r}")
        return self._plans[match.group(1)]


class SceneTarget(SimTarget):
    """The simulator target with every robot's scene published ahead (`ahead`) or
    carried by its goals (the trace's scenes are replaced by the robots' own)."""

    def __init__(self, ahead: bool, scenes: dict[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ahead, self._scenes = ahead, scenes

    def _new_service(self, trace: TraceFile, policy: str, config: ServiceConfig) -> PlanningService:
        clock = VirtualClock()
        eos = self._tokenizer.token_to_id("<eos>")
        engine = SimulatedEngine(
            clock,
            self.profile_model,
            InstructionScript(self._tokenizer),
            engine_config(self.profile_model, 0 if eos is None else int(eos)),
        )
        service = PlanningService(
            engine, self._tokenizer, policy, clock=clock, config=config, languages=self._languages
        )
        if self._ahead:
            for agent in trace.agents:
                service.register_robot(agent.agent_id, robot_type=agent.robot_type)
                service.publish_scene(agent.agent_id, self._scenes[agent.agent_id])
            service.run_until_idle()  # prefilled before the first arrival (clock at 0)
        self.last_service = service
        return service


def measure_lrtrace(scene_tokens: int) -> dict[str, Any]:
    from lrtrace.replay.targets.common import planner_tokenizer

    tokenizer, _ = planner_tokenizer()
    trace = compose(preset(1), load_catalog())
    scenes = {
        a.agent_id: make_scene(tokenizer, n, scene_tokens) for n, a in enumerate(trace.agents)
    }
    out: dict[str, Any] = {"workload": "WID1", "scene_tokens": scene_tokens, "profile": PROFILE}
    for mode in MODES:
        ahead = mode == "ahead"
        tasks = tuple(
            t.model_copy(update={"scene": "" if ahead else scenes[t.agent_id]}) for t in trace.tasks
        )
        target = SceneTarget(
            ahead,
            scenes,
            profile=load_profile(PROFILE),
            tokenizer=tokenizer,
            sampler=ExecTimeSampler(),
            catalog=load_catalog(),
            service_config=ServiceConfig(scene_debounce_s=0.0),
        )
        records: list[TaskRecord] = []
        target.run(
            trace.model_copy(update={"tasks": tasks}),
            "timely",
            None,
            records,
            lambda _r: None,
            threading.Event(),
        )
        stats = target.last_service.stats() if target.last_service else None
        metrics = [m for m in (task_metrics(r) for r in records) if m is not None]
        row: dict[str, Any] = {"tasks": len(records), "finished": len(metrics)}
        for urgency in ("urgent", "normal"):
            group = [m for m in metrics if m.urgency == urgency]
            row[f"{urgency}_utility"] = statistics.mean(m.utility / m.max_utility for m in group)
            row[f"{urgency}_response_s"] = statistics.mean(m.response_s for m in group)
        row["scene_hits"] = stats.scene_hits if stats else 0
        out[mode.replace(" ", "_")] = row
    return out


# ---- report ---------------------------------------------------------------------------


def print_tables(console: Console, results: dict[str, Any]) -> None:
    table = Table(title="real engine: scene prefilled ahead vs with the goal (medians, same run)")
    for column in (
        "scene", "load", "TTFT ahead (ms)", "TTFT with goal (ms)", "change",
        "response ahead (ms)", "response with goal (ms)", "change",
    ):  # fmt: skip
        table.add_column(column)
    for row in results["real"].values():
        table.add_row(
            f"{row['scene_tokens']} tok",
            row["load"],
            f"{row['ahead_ttft_s'] * 1e3:.1f}",
            f"{row['with_goal_ttft_s'] * 1e3:.1f}",
            f"{row['ttft_change_pct']:+.1f}%",
            f"{row['ahead_response_s'] * 1e3:.1f}",
            f"{row['with_goal_response_s'] * 1e3:.1f}",
            f"{row['response_change_pct']:+.1f}%",
        )
    console.print(table)
    sim = results["lrtrace"]
    table = Table(
        title=f"SIMULATION: WID1 with {sim['scene_tokens']}-token scenes, timely, {sim['profile']}"
    )
    for column in ("mode", "urgent utility", "normal utility", "urgent resp", "normal resp"):
        table.add_column(column)
    for mode in ("ahead", "with_goal"):
        row = sim[mode]
        table.add_row(
            mode,
            f"{row['urgent_utility']:.3f}",
            f"{row['normal_utility']:.3f}",
            f"{row['urgent_response_s']:.3f} s",
            f"{row['normal_response_s']:.3f} s",
        )
    console.print(table)
    console.print(
        f"matmul peak {results['matmul_peak_gflops']:.0f} GFLOP/s; load average "
        f"{results['load_average'][0]:.2f} at the start; {results['rounds']} rounds per cell"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per cell")
    args = parser.parse_args()
    console = Console()
    if not (CHECKPOINT / "model.safetensors").is_file():
        raise SystemExit(f"no planner checkpoint at {CHECKPOINT}")
    load_average = os.getloadavg()
    peak = matmul_peak(2, 3)
    results: dict[str, Any] = {
        "model": str(CHECKPOINT),
        "rounds": args.rounds,
        "robots": ROBOTS,
        "load_average": load_average,
        "matmul_peak_gflops": peak,
        "baseline": "the same scenes sent with each goal, same run, rounds alternating",
        "real": measure_real(args.rounds),
        "lrtrace": measure_lrtrace(200),
    }
    print_tables(console, results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
