"""`engine: vllm-server` when a server refuses one generation's request, against
stand-in servers on 127.0.0.1 (vllm_fake_server_testkit.py): an HTTP 400, or an
error event with a 4xx code in its stream, fails that generation alone (a
`GenerationsFailed` naming it, carrying the others' tokens of that step; no
failover, no server left out), and the others finish as if nothing happened; an
error event with a 5xx code is the server's fault and still fails over; a grammar
generation left without a server that runs the processor fails alone too. Each
test bounds its waits and asserts no durations."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from engine_testkit import drive_to_end
from vllm_fake_server_testkit import FakeVllmServer, expected
from vllm_testkit import PLANNER, eventually

from timely_core.engine.protocol import (
    SamplingParams,
    UnknownGeneration,
)
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_engine import VllmServerEngine

GRAMMAR = "start: /[a-z ]+/"
MARK = 1234  # a prompt starting with it is refused by the servers told so
GOOD = [[7, 40, 300], [8, 41, 301]]
BAD = [MARK, 42, 302]


def _engine(*urls: str) -> VllmServerEngine:
    """Servers left out for long once failed; a silent one after 0.5 s."""
    settings = {"urls": list(urls), "retry_after_s": 600, "token_timeout_s": 0.5}
    return VllmServerEngine(PLANNER, VllmServerConfig.model_validate(settings))


def _eventually(condition: Callable[[], bool]) -> bool:
    return eventually(condition, 30, 0.01)


@pytest.mark.parametrize("in_stream", [False, True], ids=["http-400", "error-event-400"])
def test_a_refused_request_fails_only_its_generation(
    fakes: Callable[..., FakeVllmServer], in_stream: bool
) -> None:
    """Both servers refuse the bad prompt (as any vLLM would); the good generations
    hold tokens in hand when it is refused, so the failed step carries them."""
    servers = [fakes(refuse_first=MARK, refuse_in_stream=in_stream) for _ in range(2)]
    engine = _engine(*(s.url for s in servers))
    try:
        params = SamplingParams(max_tokens=40)
        for gen_id, prompt in enumerate(GOOD):
            engine.add(gen_id, list(prompt), params)
        assert _eventually(lambda: min(engine.received_ahead(g) for g in (0, 1)) >= 5)
        engine.add(2, list(BAD), params)
        assert _eventually(lambda: engine._streams[2].error is not None)  # refused now
        out, raised = drive_to_end(engine, [0, 1, 2])
        assert len(raised) == 1
        failed = raised[0]
        assert list(failed.failures) == [2]
        reason = failed.failures[2]
        assert "refused generation 2" in reason and "400" in reason
        assert f"the prompt starts with {MARK}" in reason
        assert {o.gen_id for o in failed.outputs} == {0, 1}  # nothing of theirs lost
        assert out[0] == expected(GOOD[0], 40) and out[1] == expected(GOOD[1], 40)
        with pytest.raises(UnknownGeneration):
            engine.token_ids(2)  # ended in the engine: the caller sends no abort
        assert sum(s.refused for s in servers) == 1  # never tried again elsewhere
        assert not engine.generation_failovers.get(2)
        assert all(s.down_until == 0 and not s.last_error for s in engine.router.servers)
    finally:
        engine.close()


@pytest.mark.parametrize(("code", "in_stream"), [(500, True), (429, True), (429, False)])
def test_a_server_fault_or_a_busy_server_still_fails_over(
    fakes: Callable[..., FakeVllmServer], code: int, in_stream: bool
) -> None:
    """A 5xx error event is the server's fault, a 429 its load: the generation resumes
    on the other server from its kept ids, as uninterrupted, and no step fails."""
    faulty = fakes(refuse_first=MARK, refuse_in_stream=in_stream, refuse_code=code)
    other = fakes()
    engine = _engine(faulty.url, other.url)
    try:
        engine.add(0, list(BAD), SamplingParams(max_tokens=20))
        assert engine.server_of(0) == faulty.url  # the least loaded, first listed
        out, raised = drive_to_end(engine, [0])
        assert not raised and out[0] == expected(BAD, 20)
        assert faulty.refused == 1 and engine.generation_failovers.get(0) == 1
        said = engine.router.servers[0].last_error
        assert ("error event" if in_stream else f"HTTP {code}") in said
    finally:
        engine.close()


def test_a_grammar_generation_left_without_the_processor_fails_alone(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """The server with the grammar processor dies mid-plan; the one left lacks the
    processor: the grammar generation fails naming it, while the plain generation
    it serves finishes."""
    with_processor = fakes(token_delay_s=0.01, die_after=3)
    without = fakes(grammar=False)
    engine = _engine(with_processor.url, without.url)
    try:
        engine.add(0, list(GOOD[0]), SamplingParams(max_tokens=30, grammar=GRAMMAR))
        engine.add(1, list(GOOD[1]), SamplingParams(max_tokens=30))
        assert engine.server_of(0) == with_processor.url
        assert engine.server_of(1) == without.url
        out, raised = drive_to_end(engine, [0, 1])
        assert len(raised) == 1 and list(raised[0].failures) == [0]
        reason = raised[0].failures[0]
        assert "runs Timely's grammar processor" in reason and without.url in reason
        assert out[1] == expected(GOOD[1], 30)
    finally:
        engine.close()
