"""Plans that react on the in-process vLLM engine (`engine: vllm`, a tiny random
Llama): a robot's failed segment is rolled back in the same task, the generation's
ids past it are gone from vLLM (no request left for them), the observation is its
input, what it writes next is exactly vLLM's greedy output for that context, and
nothing generated past the failure is ever dispatched to the robot.

The model is random, so the robot speaks test_core_torch_service's word language
(any text is a plan); its head size is 32, the smallest vLLM's CPU attention has."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from tests.timely_core.core_support import eos_id, make_tokenizer, run_reporting_segments
from tests.timely_core.test_core_torch_service import MAX_TOKENS, WordLanguage
from timely_core.clock import VirtualClock
from timely_core.engine.protocol import RewritableEngine, SamplingParams
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.engine import VllmEngine
from timely_core.events import Rollback, Segment
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.tools.router import OBSERVATION_FORMAT


@pytest.fixture(scope="module")
def vllm_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmEngine]:
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny_llama_vllm")
    tokenizer = make_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        eos_token_id=eos_id(),
        bos_token_id=eos_id(),
        initializer_range=0.2,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # make words end often: louder logits for tokens with a space
        for token_id in range(config.vocab_size):
            if " " in tokenizer.decode([token_id]) and token_id != eos_id():
                model.lm_head.weight[token_id] *= 4.0
    model.save_pretrained(path)
    # vLLM loads a tokenizer with the model (the engine itself only passes ids)
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<eos>"})
    )
    engine = VllmEngine(path, VllmConfig(max_model_len=1024, max_num_seqs=4))
    yield engine
    engine.close()  # before another module builds its own (see VllmEngine.close)


def greedy(engine: VllmEngine, context: list[int], max_tokens: int) -> list[int]:
    engine.add(10_000, context, SamplingParams(max_tokens=max_tokens))
    ids: list[int] = []
    while True:
        for out in engine.step([10_000]):
            ids.append(out.token_id)
            if out.finished:
                return ids


def test_a_failed_segment_is_rolled_back_and_planning_goes_on(vllm_engine: VllmEngine) -> None:
    engine = vllm_engine
    assert isinstance(engine, RewritableEngine)
    config = ServiceConfig(max_tokens=MAX_TOKENS, max_segment_tokens=MAX_TOKENS + 1, grammar=False)
    service = PlanningService(
        engine, make_tokenizer(), "timely", clock=VirtualClock(), config=config
    )
    service.register_robot("r0", WordLanguage())
    request = TaskRequest(robot_id="r0", instruction="look for the cat", replan_on_failure=True)
    handle = service.submit(request)
    gen = service._state.generations[handle.task_id]
    log: list[Segment | Rollback] = []
    seen: dict[str, Any] = {}

    def fail_segment_0(segment: Segment) -> None:
        """The robot reports segment 0 failed when segment 2 reaches it: the
        generation has written two words (and a token) past it."""
        log.append(segment)
        if segment.index != 2 or "rollback" in seen:
            return
        seen["ahead"] = len(gen.written_ids) - gen.records[0].generated_end
        seen["rollback"] = handle.segment_failed(0, "blocked")
        seen["ids"] = engine.token_ids(gen.gen_id)
        seen["request"] = engine.generation(gen.gen_id).request_id

    handle.on_segment(fail_segment_0)
    handle.on_rollback(log.append)
    run_reporting_segments(service, handle)
    rollback = seen["rollback"]
    assert isinstance(rollback, Rollback)
    assert rollback.tokens_dropped == seen["ahead"] and rollback.tokens_dropped >= 2
    assert rollback.withdrawn == (1, 2)
    assert seen["request"] is None  # vLLM holds nothing for it: resumed as a new request
    prompt = list(gen.prompt_ids)
    kept = gen.written_ids[: gen.records[0].generated_end]
    text = OBSERVATION_FORMAT.format(observation=rollback.observation)
    observation = make_tokenizer().encode(text, add_special_tokens=False).ids
    context = prompt + kept + observation
    assert seen["ids"] == context  # nothing written past segment 0 is kept
    result = handle.result(timeout_s=0)
    assert result.success, result.error  # the same task went on
    assert gen.written_ids[: len(context) - len(prompt)] == kept + observation
    written = gen.written_ids[len(kept) + len(observation) :]
    assert written == greedy(engine, context, MAX_TOKENS - len(kept) - len(observation))
    # dispatched: segments 0..2, the rollback, then segments 1.. of the new text only
    at = next(i for i, e in enumerate(log) if isinstance(e, Rollback))
    assert [e.index for e in log[:at] if isinstance(e, Segment)] == [0, 1, 2]
    after = [e for e in log[at + 1 :] if isinstance(e, Segment)]
    assert [s.index for s in after] == list(range(1, len(after) + 1))
    # the plan is the kept text and what followed the observation (never in it)
    plan = make_tokenizer().decode(kept + [t for t in written if t != eos_id()])
    assert isinstance(log[0], Segment)
    assert result.plan_text == plan == log[0].text + "".join(s.text for s in after)
    assert engine.rewrites == 1
    memory = engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total
