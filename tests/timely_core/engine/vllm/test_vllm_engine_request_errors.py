"""The in-process vLLM engine when vLLM refuses one generation's request as a step
submits it again (a parked generation, listed again): that generation fails alone
(`GenerationsFailed`, ended in the engine), the other in the step gets its token,
and goes on to its end."""

from __future__ import annotations

from typing import Any

import pytest
from vllm_testkit import robot_prompts

from timely_core.engine.protocol import GenerationsFailed, SamplingParams, UnknownGeneration


def test_a_parked_generation_vllm_refuses_fails_alone(
    vllm_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = vllm_engine
    _, prompts = robot_prompts()
    for gen_id in (1, 2):
        engine.add(gen_id, prompts[gen_id], SamplingParams(max_tokens=8))
    made = [o.gen_id for o in engine.step([1, 2])]
    made += [o.gen_id for o in engine.step([1])]  # parks 2: submitted again when listed
    assert engine.generation(2).request_id is None
    add_request = engine.llm.add_request

    def refusing(request_id: str, *args: Any, **kwargs: Any) -> Any:
        if request_id.startswith("2."):
            raise ValueError("the prompt is refused")
        return add_request(request_id, *args, **kwargs)

    monkeypatch.setattr(engine.llm, "add_request", refusing)
    with pytest.raises(GenerationsFailed) as failed:
        engine.step([1, 2])
    assert list(failed.value.failures) == [2]
    assert "vLLM refused generation 2: the prompt is refused" in failed.value.failures[2]
    assert [o.gen_id for o in failed.value.outputs] == [1]
    with pytest.raises(UnknownGeneration):
        engine.token_ids(2)
    made += [o.gen_id for o in failed.value.outputs]
    for _ in range(100):
        outputs = engine.step([1])
        made += [o.gen_id for o in outputs]
        if outputs and outputs[-1].finished:
            break
    assert made.count(1) == 8  # none of its tokens lost
