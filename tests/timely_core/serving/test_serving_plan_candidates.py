"""Plan candidates through the PlanningService (`ServiceConfig.plan_candidates`).

On the shipped planner, over every other example of the generated held-out set (its
objects from the lexicon's held-out split, never trained on, in no evaluation set):
with candidates, more plans name every object their request's reference plan names
than without, and every plan is still valid. On a tiny random model with the word language: a
plan chosen among candidates whose segment fails is rolled back and admitted
again from its kept ids (greedily: candidates choose how a plan starts), and the
task ends with the recovery's plan."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from robot_models.dataset import build_dataset
from robot_models.dataset.example import Example
from robot_models.language import load_language
from robot_models.plan_check import check_plan
from tests.timely_core.core_support import make_tokenizer, run_reporting_segments
from tests.timely_core.serving.test_serving_failure_recovery_torch import greedy
from tests.timely_core.test_core_torch_service import (  # noqa: F401 (a fixture)
    MAX_TOKENS,
    WordLanguage,
    checkpoint,
)
from timely_core.clock import MonotonicClock, VirtualClock
from timely_core.engine.plan_candidates import CandidateEngine
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.events import Rollback, Segment
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.tools.router import OBSERVATION_FORMAT

PLANNER = Path(__file__).resolve().parents[3] / "robot_models" / "checkpoints" / "planner"
ROBOTS = 8  # per type, planning at once
QUOTED = re.compile(r"'([^']*)'")


def _plans(examples: list[Example], candidates: int) -> list[str]:
    engine = TorchEngine(PLANNER, EngineConfig(num_threads=2))
    service = PlanningService(
        engine,
        Tokenizer.from_file(str(PLANNER / "tokenizer.json")),
        clock=MonotonicClock(),
        config=ServiceConfig(plan_candidates=candidates),
        languages={r: load_language(r) for r in ("drone", "arm")},
    )
    queues: dict[str, list[int]] = {}
    for robot in ("drone", "arm"):
        mine = [i for i, e in enumerate(examples) if e.robot_type == robot]
        for k in range(ROBOTS):
            service.register_robot(f"{robot}{k}", robot_type=robot)
            queues[f"{robot}{k}"] = mine[k::ROBOTS]
    plans: dict[int, str] = {}

    def run(robot_id: str) -> None:
        for i in queues[robot_id]:
            e = examples[i]
            request = TaskRequest(robot_id=robot_id, scene=e.scene, instruction=e.instruction)
            handle = service.submit(request)
            for segment in handle.segments(timeout_s=600):
                handle.segment_done(segment.index)
            result = handle.result(timeout_s=600)
            assert result.success, (e.instruction, result.error)
            plans[i] = result.plan_text

    service.start()
    try:
        with ThreadPoolExecutor(max_workers=len(queues)) as pool:
            for future in [pool.submit(run, robot_id) for robot_id in queues]:
                future.result()
    finally:
        service.stop()
    stats = service.stats()
    assert stats.candidate_plans == (len(examples) if candidates else 0)
    assert stats.candidate_alternatives_kept <= stats.candidate_plans
    return [plans[i] for i in range(len(examples))]


def _names_all(example: Example, plan: str) -> bool:
    return set(QUOTED.findall(example.plan)) <= set(QUOTED.findall(plan))


@pytest.mark.slow
def test_candidates_name_the_requested_objects_more_often() -> None:
    # half the held-out set, for half the run time; the margin is halved with it
    examples = list(build_dataset(generator="frames").heldout)[::2]
    default, chosen = _plans(examples, 0), _plans(examples, 8)
    assert all(
        check_plan(e.robot_type, p, True).valid for e, p in zip(examples, chosen, strict=True)
    )
    named_default = sum(_names_all(e, p) for e, p in zip(examples, default, strict=True))
    named_chosen = sum(_names_all(e, p) for e, p in zip(examples, chosen, strict=True))
    assert named_chosen >= named_default + 5, (named_default, named_chosen)


def test_a_chosen_plan_whose_segment_fails_is_admitted_again_and_recovers(
    checkpoint: Path,  # noqa: F811
) -> None:
    engine = TorchEngine(checkpoint, EngineConfig())
    config = ServiceConfig(
        max_tokens=MAX_TOKENS, max_segment_tokens=MAX_TOKENS + 1, plan_candidates=2
    )
    clock = VirtualClock()
    service = PlanningService(engine, make_tokenizer(), "timely", clock=clock, config=config)
    service.register_robot("r0", WordLanguage())
    request = TaskRequest(robot_id="r0", instruction="look for the cat", replan_on_failure=True)
    handle = service.submit(request)
    seen: dict[str, object] = {}

    def fail_segment_0(segment: Segment) -> None:
        if segment.index == 1 and "rollback" not in seen:
            seen["rollback"] = handle.segment_failed(0, "blocked")

    handle.on_segment(fail_segment_0)
    gen = service._state.generations[handle.task_id]
    run_reporting_segments(service, handle)
    rollback = seen["rollback"]
    assert isinstance(rollback, Rollback)
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    kept = gen.written_ids[: gen.records[0].generated_end]
    text = OBSERVATION_FORMAT.format(observation=rollback.observation)
    observation = make_tokenizer().encode(text, add_special_tokens=False).ids
    assert gen.written_ids[: len(kept) + len(observation)] == kept + observation
    written = gen.written_ids[len(kept) + len(observation) :]
    context = list(gen.prompt_ids) + kept + observation
    assert written and written == greedy(checkpoint, context, MAX_TOKENS)[: len(written)]
    assert isinstance(service.engine, CandidateEngine)
    # candidates chose the plan's start; re-admitted after the rollback, it went on
    # as decoded
    assert service.engine.counts["plans"] == 1
