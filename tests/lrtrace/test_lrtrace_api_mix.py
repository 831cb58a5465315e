"""The API mix (LAMPS Table 2 classes): composed deterministically in the table's
shape; served in chat mode on the simulator, every request gets its whole reply,
after each of its calls (segment_done), under each call-waiting policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from lrtrace.api_mix import API_CLASSES, compose_api_mix, run_api_mix
from lrtrace.replay.targets.common import load_tokenizer_file
from timely_core.engine.sim.engine import SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090


def test_the_mix_follows_table_2() -> None:
    mix = compose_api_mix(2.0, 400, seed=3)
    assert mix == compose_api_mix(2.0, 400, seed=3)
    assert [r.arrival_s for r in mix] == sorted(r.arrival_s for r in mix)
    assert {r.api.name for r in mix} == {a.name for a in API_CLASSES}
    for request in mix:
        assert len(request.sentences) == len(request.call_s) + 1 >= 2
        assert all(s.endswith(".") for s in request.sentences)
    chatbot = [d for r in mix if r.api.name == "chatbot" for d in r.call_s]
    assert 20 < sum(chatbot) / len(chatbot) < 37  # mean 28.6 s
    ve_calls = [len(r.call_s) for r in mix if r.api.name == "ve"]
    assert 20 < sum(ve_calls) / len(ve_calls) < 36  # mean 28.18 calls
    with pytest.raises(ValueError, match="positive"):
        compose_api_mix(0.0, 1, seed=0)


@pytest.mark.parametrize("policy", ["lamps", "infercept", "vllm-like"])
def test_every_request_is_served_after_its_calls(tokenizer_path: Path, policy: str) -> None:
    tokenizer = load_tokenizer_file(tokenizer_path)
    mix = compose_api_mix(1.0, 8, seed=2)
    config = SimulatedEngineConfig(eos_token_id=int(tokenizer.token_to_id("<eos>")))
    run = run_api_mix(mix, policy, PAPER_LLAMA3_8B_RTX4090, config, tokenizer)
    assert len(run.e2e_s()) == len(mix) and len(run.ttft_s()) == len(mix)
    for outcome in run.outcomes:
        assert outcome.result is not None and outcome.result.success
        assert outcome.result.segment_count == len(outcome.request.sentences)
        # the reply cannot end before every call has returned
        assert outcome.done_s is not None
        assert outcome.done_s - outcome.request.arrival_s >= sum(outcome.request.call_s)
    assert run.makespan_s > 0
