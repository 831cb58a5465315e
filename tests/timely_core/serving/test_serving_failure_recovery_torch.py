"""Plans that react on the real TorchEngine (a tiny random Llama): after a robot's
failure the generation's ids past the failed segment and their KV are gone, the
observation is its input, and what it writes next is exactly the model's greedy
output for that context, computed by a fresh engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.timely_core.core_support import make_tokenizer, run_reporting_segments
from tests.timely_core.test_core_torch_service import (  # noqa: F401 (a fixture)
    MAX_TOKENS,
    WordLanguage,
    checkpoint,
)
from timely_core.clock import VirtualClock
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.events import Rollback, Segment
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.tools.router import OBSERVATION_FORMAT


def greedy(path: Path, context: list[int], max_tokens: int) -> list[int]:
    engine = TorchEngine(path, EngineConfig())
    engine.add(0, context, SamplingParams(max_tokens=max_tokens))
    ids: list[int] = []
    while True:
        [out] = engine.step([0])
        ids.append(out.token_id)
        if out.finished:
            return ids


def test_a_rollback_frees_the_kv_and_goes_on_greedily_from_the_observation(
    checkpoint: Path,  # noqa: F811
) -> None:
    engine = TorchEngine(checkpoint, EngineConfig())
    clock = VirtualClock()
    config = ServiceConfig(max_tokens=MAX_TOKENS, max_segment_tokens=MAX_TOKENS + 1)
    service = PlanningService(engine, make_tokenizer(), "timely", clock=clock, config=config)
    service.register_robot("r0", WordLanguage())
    request = TaskRequest(robot_id="r0", instruction="look for the cat", replan_on_failure=True)
    handle = service.submit(request)
    gen = service._state.generations[handle.task_id]
    seen: dict[str, Any] = {}

    def fail_segment_0(segment: Segment) -> None:
        """The robot reports segment 0 failed when segment 2 reaches it: the
        generation has written two words (and a token) past it."""
        if segment.index != 2 or "rollback" in seen:
            return
        seen["ahead"] = len(gen.written_ids) - gen.records[0].generated_end
        seen["free"] = engine.memory().device_blocks_free
        seen["rollback"] = handle.segment_failed(0, "blocked")
        seen["ids"] = engine.token_ids(gen.gen_id)
        seen["table"] = list(engine.generation(gen.gen_id).block_table)
        memory = engine.memory()
        seen["unheld"] = memory.device_blocks_total - memory.pinned_prefix_blocks
        seen["free_after"] = memory.device_blocks_free

    handle.on_segment(fail_segment_0)
    run_reporting_segments(service, handle)
    rollback = seen["rollback"]
    assert isinstance(rollback, Rollback)
    assert rollback.tokens_dropped == seen["ahead"] and rollback.tokens_dropped >= 2
    assert rollback.withdrawn == (1, 2)
    prompt = list(gen.prompt_ids)
    kept = gen.written_ids[: gen.records[0].generated_end]
    observation = (
        make_tokenizer()
        .encode(
            OBSERVATION_FORMAT.format(observation=rollback.observation), add_special_tokens=False
        )
        .ids
    )
    context = prompt + kept + observation
    assert seen["ids"] == context  # nothing written past segment 1 is kept
    assert seen["table"] == []  # its KV went at once...
    assert seen["free_after"] == seen["unheld"] > seen["free"]  # ...all but the pinned prefix
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert gen.written_ids[: len(context) - len(prompt)] == kept + observation
    written = gen.written_ids[len(kept) + len(observation) :]
    assert written == greedy(checkpoint, context, MAX_TOKENS - len(kept) - len(observation))
    memory = engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total - memory.pinned_prefix_blocks
