"""End to end on the real engine and the shipped planner checkpoint: 20 robots plan
concurrently through the PlanningService (timely, background thread, real clock);
every plan's concatenated segments equal the plan generated without segmentation
(greedy, the engine driven straight through), which is the task's golden LRTrace plan,
every task succeeds, and segments arrive in order. (A plan invalid in the robot's
language ending with an error result is tested in test_core_service_errors.)"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS, LRTraceTask
from robot_models.language import load_language
from timely_core.clock import MonotonicClock
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import TaskRequest
from timely_core.scheduling.tuf import Tuf
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.serving.robots import encode_prefix, encode_request

ROBOTS = 20
MAX_TOKENS = 200


def planner_path() -> Path:
    """The shipped planner; TIMELY_PLANNER_PATH points the test at another checkpoint."""
    return Path(os.environ.get("TIMELY_PLANNER_PATH", default_planner_path()))


def unsegmented_plans(
    tokenizer: Tokenizer, languages: dict[str, PlanLanguage], tasks: list[LRTraceTask]
) -> dict[int, str]:
    """Greedy plans with no segmentation: each task alone, stepped until it ends."""
    engine = TorchEngine(planner_path(), EngineConfig())
    plans = {}
    for gen_id, task in enumerate(tasks):
        language = languages[task.robot_type]
        prompt = encode_prefix(tokenizer, language.prompt_prefix()) + encode_request(
            tokenizer, language.format_request(task.scene, task.instruction)
        )
        engine.add(gen_id, prompt, SamplingParams(max_tokens=MAX_TOKENS))
        ids: list[int] = []
        finished = False
        while not finished:
            for out in engine.step([gen_id]):
                finished = out.finished
                if not (finished and out.token_id == engine.eos_token_id):
                    ids.append(out.token_id)
        plans[task.trace_id] = tokenizer.decode(ids)
    return plans


@pytest.mark.slow
def test_twenty_robots_segments_equal_the_unsegmented_greedy_plans() -> None:
    path = planner_path()
    if not (path / "model.safetensors").is_file():
        pytest.fail(f"the planner checkpoint is missing at {path}: python -m robot_models.train")
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    languages: dict[str, PlanLanguage] = {t: load_language(t) for t in ("drone", "arm")}
    tasks = [LRTRACE_TASKS[i % len(LRTRACE_TASKS)] for i in range(ROBOTS)]
    expected = unsegmented_plans(tokenizer, languages, list(LRTRACE_TASKS))
    assert expected == {t.trace_id: t.golden_plan for t in LRTRACE_TASKS}

    service = PlanningService(
        TorchEngine(path, EngineConfig()),
        tokenizer,
        policy="timely",
        clock=MonotonicClock(),
        config=ServiceConfig(max_tokens=MAX_TOKENS),
        languages=languages,
    )
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
        plan = expected[task.trace_id]
        delivered = "".join(texts)
        if not result.success:
            failures.append(f"robot{i} ({task.name}): {result.error}")
        elif delivered != plan:
            failures.append(f"robot{i}: {delivered!r} != {plan!r}")
        if indices != list(range(len(indices))):
            failures.append(f"robot{i}: segments out of order {indices}")

    service.start()
    threads = [threading.Thread(target=robot, args=(i, t)) for i, t in enumerate(tasks)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
    finally:
        service.stop()
    assert not failures, "\n".join(failures)
    stats = service.stats()
    assert stats.succeeded == ROBOTS
    assert stats.segments_emitted >= ROBOTS
