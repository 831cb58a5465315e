"""`engine: vllm-server` when a server misbehaves while another answers, against
stand-in servers on 127.0.0.1 (vllm_fake_server_testkit.py: each starts in
milliseconds; the real servers' failover is in test_vllm_server_engine.py): a hung
server's generations resume on the other from their kept ids, and only when no
server answers does a step fail, naming each server's state; a server without the
grammar processor, or serving another model, is left out while the others serve; a
URL that does not answer at build is named in a warning, and its model checked
when it first answers; failovers count real moves only, and the last server's
death is one generic error, not one generation's stamped on all. Each test bounds
its waits and asserts no durations."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

import pytest
from vllm_fake_server_testkit import FakeVllmServer, expected
from vllm_testkit import PLANNER, eventually, free_port

from timely_core.engine.protocol import EngineError, SamplingParams
from timely_core.engine.vllm.grammar_args import PROCESSOR_FQCN
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_engine import VllmServerEngine
from timely_core.engine.vllm.server_router import Router, ServerState

GRAMMAR = "start: /[a-z ]+/"
PROMPTS = [[7 + i, 40 + i, 300 + i] for i in range(4)]


def _engine(*urls: str, **config: float) -> VllmServerEngine:
    """Servers left out for long once failed (unless said); a silent one after 0.5 s."""
    settings = {"urls": list(urls), "retry_after_s": 600, "token_timeout_s": 0.5} | config
    return VllmServerEngine(PLANNER, VllmServerConfig.model_validate(settings))


def _drive(engine: VllmServerEngine, gen_ids: list[int]) -> dict[int, list[int]]:
    """Step `gen_ids` to their ends (bounded): the tokens of each."""
    out: dict[int, list[int]] = {g: [] for g in gen_ids}
    live = list(gen_ids)
    for _ in range(10_000):
        if not live:
            return out
        for o in engine.step(live):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
    raise AssertionError(f"generations {live} did not finish")


def _eventually(condition: Callable[[], bool]) -> bool:
    return eventually(condition, 30, 0.02)


# ---- defect 1: a hung server ------------------------------------------------------------
def test_a_hung_servers_generations_resume_on_the_other(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """The second server hangs after a stream's third token (connections open, nothing
    sent, new requests unanswered, as under SIGSTOP): its generations go on on the
    first from every id they received, each as uninterrupted, and no step fails."""
    good, hung = fakes(token_delay_s=0.01), fakes(token_delay_s=0.01, hang_after=3)
    engine = _engine(good.url, hung.url)
    try:
        params = SamplingParams(max_tokens=30)
        for gen_id, prompt in enumerate(PROMPTS):
            engine.add(gen_id, list(prompt), params)
        routed = {g: engine.server_of(g) for g in range(len(PROMPTS))}
        assert set(routed.values()) == {good.url, hung.url}
        out = _drive(engine, list(routed))
        assert out == {g: expected(p, 30) for g, p in enumerate(PROMPTS)}
        moved = [g for g, url in routed.items() if url == hung.url]
        assert all(engine.generation_failovers.get(g) == 1 for g in moved)
        assert not any(engine.generation_failovers.get(g) for g in routed if g not in moved)
        state = engine.router.servers[1]
        assert state.down_until > 0 and "sent nothing" in state.last_error
    finally:
        engine.close()


def test_with_every_server_hung_a_step_fails_naming_each(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    first, second = fakes(hang_after=2), fakes(hang_after=2)
    engine = _engine(first.url, second.url)
    try:
        for gen_id, prompt in enumerate(PROMPTS[:2]):
            engine.add(gen_id, list(prompt), SamplingParams(max_tokens=30))
        with pytest.raises(EngineError, match="no vLLM server answers") as err:
            _drive(engine, [0, 1])
        for url in (first.url, second.url):
            assert re.search(rf"{re.escape(url)} \(down, [^)]*sent nothing", str(err.value))
    finally:
        engine.close()


def test_a_hung_server_back_from_its_time_out_gets_no_stream_until_it_answers(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """Once left out, a server must answer /health before it streams again: a still
    hung one is found by that probe (within connect_timeout_s), not by a request
    waiting token_timeout_s on it, and is left out twice as long. A server that
    streams again is forgiven."""
    good, hung = fakes(), fakes(hang_after=2)
    engine = _engine(good.url, hung.url, retry_after_s=0.05, connect_timeout_s=0.2)
    state = engine.router.servers[1]
    try:
        engine.add(0, list(PROMPTS[0]), SamplingParams(max_tokens=6))
        engine.add(1, list(PROMPTS[1]), SamplingParams(max_tokens=6))
        assert engine.server_of(1) == hung.url
        _drive(engine, [0, 1])
        assert "sent nothing" in state.last_error and state.strikes == 1
        assert _eventually(lambda: state.down_until <= time.monotonic())
        engine.add(2, list(PROMPTS[2]), SamplingParams(max_tokens=6))
        engine.add(3, list(PROMPTS[3]), SamplingParams(max_tokens=6))
        assert hung.url in {engine.server_of(2), engine.server_of(3)}  # back in routing
        out = _drive(engine, [2, 3])
        assert out == {g: expected(PROMPTS[g], 6) for g in (2, 3)}
        assert "no answer to /health" in state.last_error and state.strikes == 2
        assert "2 failures in a row" in engine.router.describe()
    finally:
        engine.close()


def test_each_failure_in_a_row_doubles_a_servers_time_out() -> None:
    server = ServerState("http://a")
    router = Router([server], 0, 600)
    left_out = []
    for _ in range(6):
        router.mark_down(server, "boom")
        left_out.append(server.down_until - time.monotonic())
    assert [round(t / 600) for t in left_out] == [1, 2, 4, 8, 16, 16]
    assert server.suspect
    router.heard_from(server)
    router.mark_down(server, "boom")
    assert round((server.down_until - time.monotonic()) / 600) == 1


def test_the_servers_states_are_named_as_they_are() -> None:
    """A server that answers is "up", never lumped in with one that failed."""
    up, down = ServerState("http://a"), ServerState("http://b")
    router = Router([up, down], 0, 600)
    router.mark_down(down, "stream failed: boom")
    text = router.describe()
    assert "http://a (up)" in text
    assert re.search(r"http://b \(down, retried in [\d.]+ s: stream failed: boom\)", text)


# ---- defect 2: a server without the grammar processor ----------------------------------
def test_a_server_without_the_grammar_processor_is_left_out_of_grammars(
    fakes: Callable[..., FakeVllmServer], caplog: pytest.LogCaptureFixture
) -> None:
    """Grammar generations run on the server with the processor (named once in a
    warning); plain ones still use both; with only the bad server left, a grammar
    generation is refused naming it and the flag."""
    good, bad = fakes(), fakes(grammar=False)
    engine = _engine(good.url, bad.url)
    grammar = SamplingParams(max_tokens=8, grammar=GRAMMAR)
    try:
        with caplog.at_level(logging.WARNING):
            for gen_id, prompt in enumerate(PROMPTS):
                engine.add(gen_id, list(prompt), grammar)
                assert engine.server_of(gen_id) == good.url
            out = _drive(engine, list(range(len(PROMPTS))))
        assert out == {g: expected(p, 8) for g, p in enumerate(PROMPTS)}
        assert engine.router.servers[1].grammar is False
        named = [r for r in caplog.records if bad.url in r.getMessage()]
        assert len(named) == 1 and PROCESSOR_FQCN in named[0].getMessage()
        engine.add(10, list(PROMPTS[0]), SamplingParams(max_tokens=4))
        engine.add(11, list(PROMPTS[1]), SamplingParams(max_tokens=4))
        assert bad.url in {engine.server_of(10), engine.server_of(11)}  # least loaded
        _drive(engine, [10, 11])
    finally:
        engine.close()
    alone = _engine(bad.url)
    try:
        flag = re.escape(f"--logits-processors {PROCESSOR_FQCN}")
        with pytest.raises(EngineError, match=rf"{re.escape(bad.url)} does not run .*{flag}"):
            alone.add(0, list(PROMPTS[0]), grammar)
    finally:
        alone.close()


# ---- defect 3: a server serving another model ------------------------------------------
@pytest.mark.parametrize(
    ("other", "reason"),
    [
        ({"tokenizer_shift": 1}, "its tokenizer gives other ids"),
        ({"vocab_size": 2048}, "it accepts token id 1536"),
        ({"max_model_len": 4096}, "exceeds the checkpoint's max_position_embeddings"),
    ],
)
def test_a_server_serving_another_model_is_left_out(
    fakes: Callable[..., FakeVllmServer], other: dict[str, int], reason: str
) -> None:
    good, wrong = fakes(), fakes(**other)
    engine = _engine(wrong.url, good.url)
    try:
        assert reason in engine.router.servers[0].unusable
        for gen_id, prompt in enumerate(PROMPTS[:2]):
            engine.add(gen_id, list(prompt), SamplingParams(max_tokens=5))
            assert engine.server_of(gen_id) == good.url
        _drive(engine, [0, 1])
        assert wrong.streams == 0
    finally:
        engine.close()
    with pytest.raises(EngineError, match=f"no vLLM server serves the checkpoint.*{reason}"):
        _engine(wrong.url)


# ---- defect 8: a server down at build ------------------------------------------------------
def test_a_server_down_at_build_is_named_and_checked_when_it_answers(
    fakes: Callable[..., FakeVllmServer], caplog: pytest.LogCaptureFixture
) -> None:
    """Built with the second URL not answering: a warning names it; once it answers
    (here: serving another model), its model is checked before any generation
    streams there, and it is left out."""
    good = fakes()
    late = FakeVllmServer(PLANNER, tokenizer_shift=1)
    with caplog.at_level(logging.WARNING):
        engine = _engine(good.url, late.url, retry_after_s=0.2)
    try:
        assert any(
            late.url in r.getMessage() and "does not answer" in r.getMessage()
            for r in caplog.records
        )
        assert not any(good.url in r.getMessage() for r in caplog.records)
        late.start()
        state = engine.router.servers[1]
        assert _eventually(lambda: state in engine.router.up())
        for gen_id, prompt in enumerate(PROMPTS):
            engine.add(gen_id, list(prompt), SamplingParams(max_tokens=5))
        out = _drive(engine, list(range(len(PROMPTS))))
        assert out == {g: expected(p, 5) for g, p in enumerate(PROMPTS)}
        assert "its tokenizer gives other ids" in state.unusable and late.streams == 0
    finally:
        engine.close()
        late.die()


# ---- defect 9: the last server dies ----------------------------------------------------
def test_when_the_last_server_dies_failovers_count_real_moves_only(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """The first server dies, its generations move to the second; the second dies
    too: nothing moves again, and the step's error is the servers' states, not one
    generation's error stamped on every task."""
    first = fakes(token_delay_s=0.02, die_after=5)
    second = fakes(token_delay_s=0.02, die_after=25)
    engine = _engine(first.url, second.url)
    try:
        routed: dict[int, str | None] = {}
        for gen_id, prompt in enumerate(PROMPTS):
            engine.add(gen_id, list(prompt), SamplingParams(max_tokens=40))
            routed[gen_id] = engine.server_of(gen_id)
        with pytest.raises(EngineError) as err:
            _drive(engine, list(routed))
        message = str(err.value)
        assert message.startswith("no vLLM server answers: ")
        assert not re.search(r"generation \d+:", message)
        assert first.url in message and second.url in message
        for gen_id, url in routed.items():
            assert engine.generation_failovers.get(gen_id, 0) == (url == first.url)
    finally:
        engine.close()


def test_a_url_that_never_answers_fails_the_build_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineError, match=rf"no vLLM server answers: {re.escape(url)} \(down"):
        _engine(url, connect_timeout_s=1)


# ---- defect 2b: the service does not blame memory for the engine's refusals ----------
def test_tasks_the_engine_refuses_do_not_fail_others_as_not_fitting(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """The only server lacks the grammar processor, so the engine refuses each plan
    under its grammar; one admitted per pass (max_batch_size=1), the others wait
    queued while nothing runs and KV memory is all free: each task ends with the
    engine's own reason, none as "does not fit in KV memory"."""
    from tokenizers import Tokenizer

    from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
    from robot_models.language import load_language
    from timely_core.clock import MonotonicClock
    from timely_core.request import TaskRequest
    from timely_core.service import PlanningService
    from timely_core.service_config import ServiceConfig

    bad = fakes(grammar=False)
    engine = _engine(bad.url)
    service = PlanningService(
        engine,
        Tokenizer.from_file(str(PLANNER / "tokenizer.json")),
        policy="timely",
        clock=MonotonicClock(),
        config=ServiceConfig(max_tokens=20, grammar=True, max_batch_size=1),
        languages={t: load_language(t) for t in ("drone", "arm")},
    )
    tasks = LRTRACE_TASKS[:3]
    for i, task in enumerate(tasks):
        service.register_robot(f"robot{i}", robot_type=task.robot_type)
    handles = [
        service.submit(
            TaskRequest(robot_id=f"robot{i}", scene=task.scene, instruction=task.instruction)
        )
        for i, task in enumerate(tasks)
    ]
    service.start()
    try:
        errors = [handle.result(timeout_s=60).error or "" for handle in handles]
    finally:
        service.stop()
        engine.close()
    assert all("does not run Timely's grammar processor" in e for e in errors), errors
