"""Plan grammars through real vLLM servers on 127.0.0.1 (the planner checkpoint): a
server started with Timely's grammar processor (`--logits-processors`) gives the
torch engine's greedy plans under the robots' grammars, through resumes (each a new
request carrying the plan so far) and closing (a window cut to the tokens left
too), and the service on it plans the
golden plans under the grammar; a server started without it is found out before
any grammar request reaches it and gets none (grammar generations go to one with
it; with none left, an error names it and the flag), also when it was down as the
plan started and its probe waited for its first grammar request (behind a relay
that takes it down and brings it back); malformed grammar args are refused by the
server (HTTP 400)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from engine_testkit import closed_from_an_open_name
from vllm_grammar_testkit import (
    ADVERSARIAL,
    LRTRACE,
    OBSERVING,
    Robots,
    observation_edits,
    resume_after_every_token,
    run_with_edits,
)
from vllm_relay_testkit import Relay
from vllm_testkit import VllmServer, plan_with_service

from timely_core.engine.protocol import (
    EngineError,
    GenerationsFailed,
    HandlingStrategy,
    SamplingParams,
)
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.vllm.grammar_args import PROCESSOR_FQCN, GrammarArgs
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_engine import VllmServerEngine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def servers(planner: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Two servers, started together: with the grammar processor and without it."""
    logs = tmp_path_factory.mktemp("vllm-grammar-servers")
    started = {
        "with": VllmServer(
            planner, logs / "with.log", extra_args=("--logits-processors", PROCESSOR_FQCN)
        ),
        "without": VllmServer(planner, logs / "without.log"),
    }
    try:
        for server in started.values():
            server.wait_ready(400)
        yield {name: server.url for name, server in started.items()}
    finally:
        for server in started.values():
            server.kill()


def _engine(planner: Path, *urls: str) -> VllmServerEngine:
    return VllmServerEngine(planner, VllmServerConfig(urls=list(urls)))


def test_greedy_plans_through_a_server_equal_the_torch_engine(
    planner: Path, servers: dict[str, str]
) -> None:
    robots = Robots()
    reference = TorchEngine(planner, EngineConfig(num_threads=1))
    engine = _engine(planner, servers["with"])
    try:
        cases = LRTRACE[1:2] + LRTRACE[8:9] + ADVERSARIAL[:3]
        params = [robots.params(c[0]) for c in cases]
        between = resume_after_every_token([HandlingStrategy.DISCARD], every=3)
        got = robots.run(engine, cases, params, between)
        assert got == robots.run(reference, cases, params)
        assert all(engine.generation_failovers.get(g, 0) == 0 for g in range(len(cases)))
        window = [
            robots.params(c[0], max_tokens=64, close_within=32, closing_ids=robots.closing_ids())
            for c in cases
        ]
        assert robots.run(engine, cases, window) == robots.run(reference, cases, window)
    finally:
        engine.close()


def test_a_closing_window_cut_to_the_tokens_left_travels_to_the_server(
    planner: Path, servers: dict[str, str]
) -> None:
    """`set_closing(..., within=1)` reopens the stream with the cut window in its
    args: a name still open ends at once, as on torch."""
    robots = Robots()
    reference = TorchEngine(planner, EngineConfig(num_threads=1))
    engine = _engine(planner, servers["with"])
    try:
        statement = robots.encode("pk('sastooooooooo")
        params = robots.params(
            "arm",
            close_within=32,
            closing_ids=robots.closing_ids(),
            hard_closing_ids=robots.hard_closing_ids(),
        )
        prompt = robots.prompt(OBSERVING)
        got = closed_from_an_open_name(engine, 0, prompt, params, statement, within=1)
        assert got == closed_from_an_open_name(reference, 0, prompt, params, statement, within=1)
        assert got == [*robots.encode("');"), engine.eos_token_id]
    finally:
        engine.close()


def test_observations_through_a_server_are_not_read_by_the_grammar(
    planner: Path, servers: dict[str, str]
) -> None:
    """The observed spans travel in the request's grammar args: the same plan
    around the same observations as on torch."""
    robots = Robots()
    reference = TorchEngine(planner, EngineConfig(num_threads=1))
    engine = _engine(planner, servers["with"])
    try:
        edits, observed = observation_edits(robots)
        got = run_with_edits(engine, robots, OBSERVING, 0, edits)
        assert got == run_with_edits(reference, robots, OBSERVING, 0, edits)
        robots.assert_observed_plan_valid(got, observed, engine.eos_token_id)
    finally:
        engine.close()


def test_the_service_plans_under_the_grammar_through_a_server(
    planner: Path, servers: dict[str, str]
) -> None:
    engine = _engine(planner, servers["with"])
    try:
        failures, stats = plan_with_service(engine, 6, grammar=True)
        assert not failures, "\n".join(failures)
        assert stats.succeeded == 6 and stats.segments_emitted > 6
    finally:
        engine.close()


def test_a_server_without_the_processor_is_refused_naming_it(
    planner: Path, servers: dict[str, str]
) -> None:
    """Alone, it is refused for grammar generations (naming it and the flag); beside
    one with the processor, grammar generations go there and it serves the rest."""
    robots = Robots()
    prompt = robots.prompt(ADVERSARIAL[0])
    grammar = robots.params("drone")
    flag = rf"--logits-processors {PROCESSOR_FQCN}"
    for urls in ([servers["without"]], [servers["with"], servers["without"]]):
        engine = _engine(planner, *urls)
        try:
            if len(urls) == 1:
                with pytest.raises(
                    EngineError, match=rf"{servers['without']} does not run .*{flag}"
                ):
                    engine.add(1, prompt, grammar)
                with pytest.raises(EngineError):
                    engine.generation(1)
            else:
                engine.add(1, prompt, grammar)
                assert engine.server_of(1) == servers["with"]
                assert engine.router.servers[1].grammar is False
                engine.abort(1)
            # unconstrained generations still run there
            engine.add(2, prompt, SamplingParams(max_tokens=3))
            outputs = engine.step([2])
            while not outputs[-1].finished:
                outputs += engine.step([2])
            assert len(outputs) == 3
        finally:
            engine.close()


@pytest.mark.parametrize("back_as", ["with", "without"])
def test_a_server_down_as_a_plan_starts_is_probed_before_its_first_grammar_request(
    planner: Path, servers: dict[str, str], back_as: str
) -> None:
    """The second server does not answer the probe when the grammar plan is added, so
    it is left out; the plan runs on the first, which then goes down while the second
    comes back (as the server with the processor, or the one without): probed before
    the plan's first request there, it continues the plan as the torch engine does,
    or the plan ends with an error naming it and the flag, no token taken from it."""
    robots = Robots()
    reference = TorchEngine(planner, EngineConfig(num_threads=1))
    plans = robots.run(reference, ADVERSARIAL, [robots.params(c[0]) for c in ADVERSARIAL])
    # the longest plan: its server can go down while it is still being written
    case, expected = max(zip(ADVERSARIAL, plans, strict=True), key=lambda c: len(c[1]))
    params = robots.params(case[0])
    first, second = Relay(), Relay()
    first.start(servers["with"])
    second.start(servers[back_as])
    engine = VllmServerEngine(
        planner, VllmServerConfig(urls=[first.url, second.url], retry_after_s=0.5)
    )
    try:
        second.stop()
        engine.add(100, robots.prompt(case), params)
        late = engine.router.servers[1]
        assert late.grammar is None and "grammar probe failed" in late.last_error
        got = [o.token_id for _ in range(4) for o in engine.step([100])]
        assert engine.server_of(100) == first.url and got == expected[:4]
        engine.suspend(100, HandlingStrategy.DISCARD)
        second.start(servers[back_as])  # back at the same URL
        first.stop()
        while not any(s is late for s in engine.router.up()):
            time.sleep(0.05)  # left out for retry_after_s
        engine.resume(100)
        if back_as == "without":
            flag = re.escape(f"--logits-processors {PROCESSOR_FQCN}")
            with pytest.raises(
                GenerationsFailed, match=rf"{re.escape(second.url)} does not run .*{flag}"
            ) as failed:
                engine.step([100])
            assert late.grammar is False and list(failed.value.failures) == [100]
            assert not failed.value.outputs  # no token taken from it
            return
        finished = False
        while not finished:
            for output in engine.step([100]):
                got.append(output.token_id)
                finished = output.finished
        assert got == expected and late.grammar is True
    finally:
        engine.close()
        first.stop()
        second.stop()


def test_malformed_grammar_args_are_refused_by_the_server(servers: dict[str, str]) -> None:
    args = GrammarArgs(grammar='start: ""', plan_start=1, max_tokens=4).wire()
    body = {"prompt": [5, 6], "max_tokens": 1, "vllm_xargs": args | {"timely_plan_start": 0}}
    model = httpx.get(f"{servers['with']}/v1/models", timeout=10).json()["data"][0]["id"]
    reply = httpx.post(
        f"{servers['with']}/v1/completions", json=body | {"model": model}, timeout=60
    )
    assert reply.status_code == 400, reply.text
    assert "plan_start" in reply.text
