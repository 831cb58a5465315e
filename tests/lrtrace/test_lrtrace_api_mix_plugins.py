"""The API mix through the tool plugins (real plugin processes, real clock, the
simulator's engine costs instant): every request completes after each of its calls
was answered by its class's plugin, the per-tool answer-time statistics learn the
measured durations, and a failing plugin ends only the request it failed on."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Any

import pytest

from lrtrace.api_mix import API_CLASSES, ApiRequest, compose_api_mix
from lrtrace.api_mix_plugins import TOOL, PluginRun, run_plugin_mix, tool_spec
from lrtrace.api_tools import call_duration_s
from timely_core.clock import VirtualClock
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.sim.engine import Script, SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel

SCALE = 0.002  # chatbot ~57 ms: a few requests in a few seconds
SEED = 3
CLASSES = {api.name: api for api in API_CLASSES}
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def mix(*names: str) -> list[ApiRequest]:
    """One request per class named, in order, a few calls each (VE's 28 cut to 4)."""
    composed = compose_api_mix(50.0, 60, seed=SEED)
    out: list[ApiRequest] = []
    for name in names:
        r = next(r for r in composed if r.api.name == name and r not in out)
        calls = min(len(r.sentences) - 1, 4)
        out.append(
            ApiRequest(
                f"r{len(out):05d}",
                r.api,
                0.02 * len(out),
                r.sentences[: calls + 1],
                r.call_s[:calls],
            )
        )
    return out


def run(
    requests: list[ApiRequest], tokenizer: Any, policy: str = "lamps", **kwargs: Any
) -> PluginRun:
    eos = int(tokenizer.token_to_id("<eos>"))

    def simulator(script: Script) -> PagedEngine:
        # the engine's own costs in a clock of its own: instant on the service's
        return SimulatedEngine(
            VirtualClock(), LatencyModel(), script, SimulatedEngineConfig(eos_token_id=eos)
        )

    return run_plugin_mix(
        requests, policy, tokenizer, simulator, scale=SCALE, seed=SEED, timeout_s=60, **kwargs
    )


def test_every_call_goes_through_its_classes_plugin_and_every_request_completes(
    tokenizer: Any,
) -> None:
    requests = mix("math", "qa", "ve", "chatbot", "image", "tts", "chatbot")
    result = run(requests, tokenizer)
    for outcome in result.outcomes:
        assert outcome.result is not None and outcome.result.success, outcome.result
        assert outcome.result.plan_text == outcome.text  # the trace's reply, calls in it
        assert outcome.result.segment_count == outcome.calls + 1
        answers = result.service.tool_outcomes(outcome.request.request_id)
        assert [a.call_index for a in answers] == list(range(outcome.calls))
        assert {a.tool for a in answers} == {TOOL} and all(a.complete for a in answers)
        name = outcome.request.api.name
        for answer in answers:
            if name == "math":  # really computed
                x, op, y = answer.call_text[len("math(") : -1].split(", ")
                assert answer.value == pytest.approx(OPS[op.strip("'")](int(x), int(y)))
            else:  # answered no earlier than its drawn duration
                drawn = call_duration_s(*CLASSES[name].duration_s, SCALE, SEED,
                                        outcome.request.request_id, answer.call_index)  # fmt: skip
                assert answer.replied_s - answer.sent_s >= drawn
    calls = {name: 0 for name in CLASSES}
    for outcome in result.outcomes:
        calls[outcome.request.api.name] += outcome.calls
    for name, count in calls.items():  # the service's statistics counted every answer
        assert result.service.tool_answer_stats(name, TOOL).samples == count
        assert result.tools[name].samples == count
        assert len(result.tools[name].predicted_s) == count
    # the waits were decided as tool waits (a call still out at its sentence's end)
    assert sum(v for k, v in result.counts.items() if k.startswith("tool-")) > 0


def test_the_answer_time_predictions_learn_the_measured_durations(tokenizer: Any) -> None:
    """Declared 10x too fast, the chatbot's prediction moves to its measured answers;
    with no prior, the image tool's first measured answer becomes its prediction."""
    chatbot = tool_spec(CLASSES["chatbot"], SCALE, SEED, prior=False)
    chatbot["expected_s"] = CLASSES["chatbot"].duration_s[0] * SCALE / 10
    image = tool_spec(CLASSES["image"], SCALE, SEED, prior=False)
    result = run(
        mix("chatbot", "chatbot", "image"), tokenizer, tools={"chatbot": chatbot, "image": image}
    )
    assert all(o.result is not None and o.result.success for o in result.outcomes)
    bot = result.tools["chatbot"]
    assert bot.final_s is not None and bot.samples >= 4
    prior = chatbot["expected_s"]
    assert abs(bot.final_s - bot.measured_mean_s) < abs(prior - bot.measured_mean_s) / 2
    assert bot.final_s >= min(  # measured: no less than the shortest drawn duration
        call_duration_s(*CLASSES["chatbot"].duration_s, SCALE, SEED, o.request.request_id, i)
        for o in result.outcomes
        if o.request.api.name == "chatbot"
        for i in range(o.calls)
    )
    img = result.tools["image"]
    assert img.prior_s is None and img.final_s is not None and img.samples >= 1
    assert img.predicted_s[0] is not None  # delivered after its answer: measured already


def test_a_failing_plugin_ends_only_its_own_request(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The qa plugin's process dies on one task's call, and a division by zero is an
    error of the math plugin: those two requests fail naming the tool and call; the
    others, of the same classes too, complete."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    requests = mix("qa", "qa", "math", "math", "chatbot")
    crash = requests[0].request_id
    qa = tool_spec(CLASSES["qa"], SCALE, SEED, prior=True)
    qa["plugin"] = "lrtrace_crash_tools:CrashingApiTool"
    qa["options"] = {**qa["options"], "crash_task": crash}
    divide = requests[2]
    reply = f"{divide.sentences[0][:-1]} math(1, '/', 0). " + " ".join(divide.sentences[1:])
    result = run(requests, tokenizer, tools={"qa": qa}, replies={divide.request_id: reply})
    by_id = {o.request.request_id: o for o in result.outcomes}
    crashed = by_id[crash].result
    assert crashed is not None and not crashed.success
    assert "tool 'api'" in crashed.error and "qa(0)" in crashed.error
    divided = by_id[divide.request_id].result
    assert divided is not None and not divided.success
    assert "division by zero" in divided.error and "argument 3 (0)" in divided.error
    for request_id, outcome in by_id.items():
        if request_id not in (crash, divide.request_id):
            assert outcome.result is not None and outcome.result.success, outcome.result


def test_a_pool_of_plugin_processes_per_class_takes_its_requests_in_turn(
    tokenizer: Any,
) -> None:
    """Three chatbot requests on a pool of two: the first and third on chatbot0, the
    second on chatbot1, each robot's statistics counting its own answers."""
    requests = mix("chatbot", "chatbot", "chatbot")
    result = run(requests, tokenizer, pool=2)
    assert all(o.result is not None and o.result.success for o in result.outcomes)
    calls = [o.calls for o in result.outcomes]
    first = result.service.tool_answer_stats("chatbot0", TOOL).samples
    second = result.service.tool_answer_stats("chatbot1", TOOL).samples
    assert (first, second) == (calls[0] + calls[2], calls[1])
    assert result.tools["chatbot"].samples == sum(calls)
    with pytest.raises(ValueError, match="pool must be at least 1, got 0"):
        run(requests, tokenizer, pool=0)
