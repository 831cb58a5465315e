"""The PlanningService on the in-process vLLM engine (planner checkpoint, timely
policy, background thread, real clock): robots plan concurrently, every plan's
segments joined equal the task's golden LRTrace plan (greedy, unsegmented), segments
arrive in order, and a cancelled task frees its KV."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS, LRTraceTask
from robot_models.language import load_language
from timely_core.clock import MonotonicClock
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

ROBOTS = 12


def test_service_on_vllm_plans_equal_the_golden_plans(planner: Path, vllm_engine: Any) -> None:
    tokenizer = Tokenizer.from_file(str(planner / "tokenizer.json"))
    languages: dict[str, PlanLanguage] = {t: load_language(t) for t in ("drone", "arm")}
    service = PlanningService(
        vllm_engine,
        tokenizer,
        policy="timely",
        clock=MonotonicClock(),
        # vLLM refuses grammars (engine/vllm/generation.py says why)
        config=ServiceConfig(max_tokens=200, grammar=False),
        languages=languages,
    )
    tasks = [LRTRACE_TASKS[i % len(LRTRACE_TASKS)] for i in range(ROBOTS)]
    for i, task in enumerate(tasks):
        service.register_robot(f"robot{i}", robot_type=task.robot_type)
    failures: list[str] = []

    def robot(i: int, task: LRTraceTask) -> None:
        handle = service.submit(
            TaskRequest(
                robot_id=f"robot{i}",
                scene=task.scene,
                instruction=task.instruction,
                tuf=Tuf.preset(task.urgency),
            )
        )
        texts, indices = [], []
        for segment in handle.segments(timeout_s=300):
            texts.append(segment.text)
            indices.append(segment.index)
            handle.segment_done(segment.index)
        result = handle.result(timeout_s=300)
        if not result.success:
            failures.append(f"robot{i} ({task.name}): {result.error}")
        elif "".join(texts) != task.golden_plan:
            failures.append(f"robot{i}: {''.join(texts)!r} != {task.golden_plan!r}")
        if indices != list(range(len(indices))):
            failures.append(f"robot{i}: segments out of order {indices}")

    service.start()
    threads = [threading.Thread(target=robot, args=(i, t)) for i, t in enumerate(tasks)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        cancelled = service.submit(
            TaskRequest(robot_id="robot0", scene=tasks[0].scene, instruction="Look for the cat")
        )
        cancelled.cancel()
        assert not cancelled.result(timeout_s=60).success
    finally:
        service.stop()
    assert not failures, "\n".join(failures)
    stats = service.stats()
    assert stats.succeeded == ROBOTS
    assert stats.segments_emitted > ROBOTS  # suspended and resumed on vLLM between segments
    assert vllm_engine.memory().device_blocks_free == vllm_engine.memory().device_blocks_total
