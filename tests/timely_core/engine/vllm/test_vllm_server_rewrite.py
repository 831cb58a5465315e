"""`VllmServerEngine.rewrite` (plans that react) against two real vLLM servers on
127.0.0.1 (the planner checkpoint): the scenarios of rewrite_testkit.py (a rollback,
an observation, the errors), the servers' prefix caches restoring the kept blocks,
and a rewritten generation whose server is killed mid-stream goes on on the other
server from its rewritten ids."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rewrite_testkit import (
    BLOCK,
    check_a_full_budget_of_appended_ids,
    check_errors,
    check_observation,
    check_rollback,
    fresh,
    looping_prompt,
    observation_ids,
    run,
    running_prompt,
)
from vllm_testkit import VllmServer, eventually

from timely_core.engine.protocol import HandlingStrategy, SamplingParams
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_engine import VllmServerEngine

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def servers(planner: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VllmServer]]:
    logs = tmp_path_factory.mktemp("vllm-rewrite-servers")
    started = [VllmServer(planner, logs / f"server{i}.log", max_num_seqs=2) for i in range(2)]
    try:
        for server in started:
            server.wait_ready(400)
        yield started
    finally:
        for server in started:
            server.kill()


@pytest.fixture(scope="module")
def engine(planner: Path, servers: list[VllmServer]) -> Iterator[VllmServerEngine]:
    urls = [s.url for s in servers]
    engine = VllmServerEngine(
        planner, VllmServerConfig(urls=urls, affinity_slack=4, retry_after_s=600)
    )
    yield engine
    engine.close()


def _eventually(condition: Callable[[], bool]) -> bool:
    return eventually(condition, 60, 0.1)


def test_a_rollback_resumes_from_the_kept_ids_on_its_servers_cache(
    engine: VllmServerEngine,
) -> None:
    prompt = running_prompt(engine, 1000, 3)
    engine.register_prefix("rewrite-3", prompt[:64])  # its generations stay on one server
    state = check_rollback(engine, 100, prompt, prefix_id="rewrite-3")
    # the server reports cached tokens when a request ends: the resumed one found
    # every full block of prompt + 14 kept ids (kept generated ids too)
    cached = (len(prompt) + 14 - 1) // BLOCK * BLOCK
    assert cached > len(prompt)
    assert _eventually(lambda: state.cached_history[-1:] == [cached]), state.cached_history


def test_an_observation_is_input_and_counts_towards_max_tokens(engine: VllmServerEngine) -> None:
    prompt = running_prompt(engine, 2000, 4, 10)
    engine.register_prefix("rewrite-4", prompt[:64])
    state = check_observation(engine, 200, prompt, HandlingStrategy.PRESERVE, prefix_id="rewrite-4")
    cached = (len(prompt) + 10 + len(observation_ids()) - 1) // BLOCK * BLOCK  # the probe's
    assert _eventually(lambda: state.cached_history[-1:] == [cached]), state.cached_history
    check_a_full_budget_of_appended_ids(engine, 210, prompt)
    assert engine.rewrites == 3  # this module's first two tests


def test_rewrite_errors_change_nothing(engine: VllmServerEngine) -> None:
    check_errors(engine, 300, running_prompt(engine, 3000, 5), engine.max_model_len)


def test_a_rewritten_generation_fails_over_from_its_rewritten_ids(
    engine: VllmServerEngine, servers: list[VllmServer]
) -> None:
    """Runs last: it kills a server. The appended ids (another loop's) are probed for
    a continuation that runs its whole budget, and the server the resumed generation
    went to is frozen at once, then killed, so the kill finds it mid-stream (the tiny
    planner streams a whole budget before a test could step it, and a generation
    streamed to its end needs no failover)."""
    prompt = running_prompt(engine, 4000, 3, 10)
    appended = _appended_that_runs(engine, prompt)
    engine.add(400, prompt, SamplingParams(max_tokens=FAILOVER_BUDGET))
    generated = run(engine, 400, steps=10)
    engine.suspend(400, HandlingStrategy.DISCARD)
    engine.rewrite(400, 6, appended)
    context = prompt + generated[:6] + appended
    expected = fresh(engine, 401, context, FAILOVER_BUDGET - 6 - len(appended))
    assert len(expected) == FAILOVER_BUDGET - 6 - len(appended)
    engine.resume(400)
    url = engine.server_of(400)  # routed by resume
    victim = next(s for s in servers if s.url == url)
    victim.pause()
    victim.kill()
    after = run(engine, 400)
    assert after == expected
    assert engine.generation_failovers.get(400, 0) >= 1  # it moved to the other server
    assert engine.generation_failovers.get(401, 0) == 0


FAILOVER_BUDGET = 200


def _appended_that_runs(engine: VllmServerEngine, prompt: list[int]) -> list[int]:
    """40 ids of another loop after which the planner, on prompt + its first 6 ids,
    writes the rest of FAILOVER_BUDGET without its EOS."""
    first = fresh(engine, 4100, prompt, 6)
    rest = FAILOVER_BUDGET - 6 - 40
    for seed in range(4, 44):
        appended = looping_prompt(seed)[:40]
        if len(fresh(engine, 4200 + seed, prompt + first + appended, rest)) == rest:
            return appended
    raise AssertionError("the planner ends early after every appended loop tried")
