"""Scenes prefilled ahead on the real engine and the shipped planner: the KV the
engine computes for a published scene is the KV a task's own prefill would have
computed, so each LRTrace task's plan is token-identical whether its scene came
with the goal or was prefilled before it (greedy, background thread, real clock)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from robot_models.language import load_language
from timely_core.clock import MonotonicClock
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

TIMEOUT_S = 120.0
SCENES = {(task.robot_type, task.scene) for task in LRTRACE_TASKS}


def plans(publish: bool) -> tuple[dict[int, str], PlanningService]:
    path = Path(os.environ.get("TIMELY_PLANNER_PATH", default_planner_path()))
    service = PlanningService(
        TorchEngine(path, EngineConfig()),
        Tokenizer.from_file(str(path / "tokenizer.json")),
        clock=MonotonicClock(),
        config=ServiceConfig(max_tokens=200, scene_debounce_s=0.0),
        languages={t: load_language(t) for t in ("drone", "arm")},
    )
    for task in LRTRACE_TASKS:
        service.register_robot(f"r{task.trace_id}", robot_type=task.robot_type)
        if publish:
            service.publish_scene(f"r{task.trace_id}", task.scene)
    service.start()
    try:
        if publish:  # every scene prefilled before its task arrives
            deadline = time.monotonic() + TIMEOUT_S
            while service.stats().scene_prefixes < len(SCENES):
                assert time.monotonic() < deadline, "the scenes were not prefilled in time"
                time.sleep(0.01)
        handles = {
            task.trace_id: service.submit(
                TaskRequest(
                    robot_id=f"r{task.trace_id}",
                    instruction=task.instruction,
                    scene="" if publish else task.scene,
                )
            )
            for task in LRTRACE_TASKS
        }
        out = {}
        for trace_id, handle in handles.items():
            for segment in handle.segments(timeout_s=TIMEOUT_S):
                handle.segment_done(segment.index)
            result = handle.result(timeout_s=TIMEOUT_S)
            assert result.success, result.error
            out[trace_id] = result.plan_text
        return out, service
    finally:
        service.stop()


def test_plans_are_token_identical_with_the_scene_prefilled_ahead() -> None:
    with_goal, _ = plans(publish=False)
    ahead, service = plans(publish=True)
    assert ahead == with_goal
    assert all(task.golden_plan == with_goal[task.trace_id] for task in LRTRACE_TASKS)
    stats = service.stats()
    assert stats.scene_hits == len(LRTRACE_TASKS)  # every task started from its scene
    assert stats.scene_prefills == len(SCENES)
