"""`engine: vllm-server` against two real vLLM servers on 127.0.0.1 (the CPU build,
the planner checkpoint): greedy plans equal the torch engine's, a robot's second
request hits its server's prefix cache, the policy's ranking reaches vLLM's priority
queue, closing a stream aborts the request, and a server killed mid-run loses no
generation (each resumes on the other from its kept token ids), nor does the
PlanningService's task; with no server left, or a URL that never answered, the error
names them and nothing hangs."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import pytest
from engine_testkit import drive
from rewrite_testkit import running_prompts
from vllm_testkit import VllmServer, eventually, free_port, plan_with_service, robot_prompts

from timely_core.engine.protocol import EngineError, SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_engine import VllmServerEngine

pytestmark = pytest.mark.slow
ROBOTS = 11  # the LRTrace tasks, both robot types
SLOTS = 2  # --max-num-seqs of each server: a short waiting queue to order


@pytest.fixture(scope="module")
def servers(planner: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[VllmServer]]:
    logs = tmp_path_factory.mktemp("vllm-servers")
    # two for the engine tests, a third for the service test to kill
    # each logs its aborts (the abort test waits for one)
    started = [
        VllmServer(planner, logs / f"server{i}.log", SLOTS, ("--enable-log-requests",))
        for i in range(3)
    ]
    try:
        for server in started:
            server.wait_ready(400)
        yield started
    finally:
        for server in started:
            server.kill()


@pytest.fixture(scope="module")
def engine(planner: Path, servers: list[VllmServer]) -> Iterator[VllmServerEngine]:
    urls = [s.url for s in servers[:2]]
    config = VllmServerConfig(urls=urls, affinity_slack=4, retry_after_s=600)
    engine = VllmServerEngine(planner, config)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def torch_engine(planner: Path) -> TorchEngine:
    return TorchEngine(planner, EngineConfig(num_threads=1))


def _random_prompts(seed: int, count: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(2, 1536) for _ in range(rng.randrange(20, 300))] for _ in range(count)]


def _looping_prompts(
    engine: VllmServerEngine | TorchEngine, count: int, tokens: int = 300
) -> list[list[int]]:
    """`count` looping prompts (rewrite_testkit.looping_prompt) that the planner goes
    on repeating for a long while (where a random prompt ends at once): the first of
    seeds 0..59 whose greedy continuation, probed on `engine` as generations 900 on,
    runs `tokens` ids without EOS (on the torch engine most such loops run past 1,500)."""
    prompts = list(islice(running_prompts(engine, range(60), 900, tokens), count))
    assert len(prompts) == count, f"fewer than {count} looping prompts of 60 run {tokens} ids"
    return prompts


def test_server_plans_equal_the_torch_engine(
    engine: VllmServerEngine, torch_engine: TorchEngine
) -> None:
    _, prompts = robot_prompts()
    chosen = prompts[:6]
    params = SamplingParams(max_tokens=40)
    arrivals = [0, 0, 1, 3, 4, 9]
    assert drive(engine, chosen, params, arrivals) == drive(torch_engine, chosen, params, arrivals)


def test_a_robots_second_request_hits_its_servers_cache(engine: VllmServerEngine) -> None:
    prefixes, prompts = robot_prompts()
    engine.register_prefix("arm", prefixes["arm"])
    home = engine.router.home_of("arm")
    assert home is not None
    arm_prompts = [p for p in prompts if p[: len(prefixes["arm"])] == prefixes["arm"]]
    assert engine.prefix_cached_tokens["arm"] == 0  # prefilled there once
    for gen_id, prompt in enumerate(arm_prompts[:2], start=10):
        engine.add(gen_id, prompt, SamplingParams(max_tokens=8), prefix_id="arm")
        assert engine.server_of(gen_id) == home.url
        drive_alone(engine, gen_id)
        # the server reports cached tokens in a request's last chunk, just after its
        # last token
        assert _eventually(lambda: gen_id in engine.cache_reports)  # noqa: B023
        assert engine.cache_reports[gen_id][0] >= len(prefixes["arm"]) // 32 * 32


def drive_alone(engine: VllmServerEngine, gen_id: int) -> list[int]:
    tokens: list[int] = []
    while True:
        for out in engine.step([gen_id]):
            tokens.append(out.token_id)
            if out.finished:
                return tokens


def test_the_ranking_orders_the_servers_waiting_queue(
    engine: VllmServerEngine, servers: list[VllmServer]
) -> None:
    """On one server (the prefix's) with both slots busy, the generation the policy
    ranks first starts before one added earlier but ranked lower (first tokens as
    they arrive from the server). The server's core is frozen while the two are
    added, once both slots' streams have tokens in hand (so the loop steps on), and
    thawed once its API server has handed both to it: the tiny planner cannot end a
    slot's 1,500-id loop before both wait, so the first free slot goes by priority.
    Where the machine stalled this test long enough for a loop to end before the
    freeze (seen on the server's finished requests), it is tried again."""
    looping = _looping_prompts(engine, 2, 1500)  # first and second hold both slots throughout
    head = looping[0][:64]
    engine.register_prefix("queue", head)
    tries = (_ranked_while_held(engine, servers, looping, 20 + 4 * n) for n in range(3))
    assert any(tries), "a slot's loop ended before each freeze"
    engine.set_ranking([])


def _ranked_while_held(
    engine: VllmServerEngine, servers: list[VllmServer], looping: list[list[int]], base: int
) -> bool:
    """One try of the ranking test with generations base..base+3; False, having
    asserted nothing, where a loop ended before the freeze."""
    home = engine.router.home_of("queue")
    assert home is not None
    server = next(s for s in servers if s.url == home.url)
    server.core_pids()  # found before the race the freeze closes
    finished = server.finished_requests()
    head = looping[0][:64]
    first, second, low, high = base, base + 1, base + 2, base + 3
    engine.set_ranking([first, second, high, low])
    for gen_id in (first, second):
        engine.add(gen_id, looping[0], SamplingParams(max_tokens=1500), prefix_id="queue")
    assert engine.step([first, second])
    assert _eventually(lambda: min(engine.received_ahead(g) for g in (first, second)) >= 2)
    if not _held_in_time(engine, server, finished, [first, second]):
        return False
    try:
        added = server.adds_logged()
        for gen_id in (low, high):
            params = SamplingParams(max_tokens=40)
            engine.add(gen_id, head + looping[1], params, prefix_id="queue")
        assert engine.step([first, second, low, high])  # opens low's and high's streams
        assert _eventually(lambda: server.adds_logged() >= added + 2), (
            f"{server.url} got {server.adds_logged() - added} of 2 requests; their streams "
            f"are on {[engine.server_of(g) for g in (low, high)]}"
        )
    finally:
        server.hold_engine_core(False)
    assert engine.generation(high).priority < engine.generation(low).priority
    assert {engine.server_of(g) for g in (first, second, low, high)} == {home.url}
    started = {g: engine.generation(g) for g in (low, high)}  # forgotten once finished
    live = [first, second, low, high]
    while live:
        for out in engine.step(live):
            if out.finished:
                live.remove(out.gen_id)
    first_high, first_low = started[high].first_token_s, started[low].first_token_s
    assert first_high is not None and first_low is not None
    assert first_high < first_low
    return True


def test_closing_a_stream_aborts_the_request_on_its_server(
    engine: VllmServerEngine, servers: list[VllmServer], torch_engine: TorchEngine
) -> None:
    """A loop the planner runs for all 1,500 ids (probed on the torch engine, whose
    greedy ids are vLLM's), aborted after its first: its server stops generating it,
    far short of the budget. The server's core is frozen from the first id until its
    API server has logged the abort, so the tiny planner cannot finish the budget
    while the abort is on its way; the count is read from its token counter once that
    has settled (its gauges lag). Where the machine stalled this test long enough for
    the server to finish the whole budget before the freeze, there was nothing to
    abort: that is seen on the server's finished requests, and tried again."""
    prompt = _looping_prompts(torch_engine, 1, 1500)[0]
    tries = (_abort_while_held(engine, servers, prompt, gen_id) for gen_id in (30, 31, 32))
    assert any(tries), "the server finished the whole budget before each freeze"


def _abort_while_held(
    engine: VllmServerEngine, servers: list[VllmServer], prompt: list[int], gen_id: int
) -> bool:
    """Run `prompt`, freeze its server's core after the first id, abort it: the abort
    reaches the server and it stops short of the budget. False, having asserted
    nothing, where the server had finished the budget before the freeze."""
    before = {s.url: _settled(s.generated_tokens) for s in servers}
    finished = {s.url: s.finished_requests() for s in servers}
    engine.add(gen_id, prompt, SamplingParams(max_tokens=1500))
    server = next(s for s in servers if s.url == engine.server_of(gen_id))
    server.core_pids()  # found before the race the freeze closes
    engine.step([gen_id])
    if not _held_in_time(engine, server, finished[server.url], [gen_id]):
        return False
    try:
        aborted = server.aborts_logged()
        engine.abort(gen_id)
        assert _eventually(lambda: server.aborts_logged() > aborted)
    finally:
        server.hold_engine_core(False)
    generated = _settled(server.generated_tokens) - before[server.url]
    assert 1 <= generated < 1500
    assert _eventually(lambda: server.running_requests() == 0)
    return True


def _held_in_time(
    engine: VllmServerEngine, server: VllmServer, finished: float, gen_ids: list[int]
) -> bool:
    """Freeze `server`'s core; True if it had finished no request since `finished` was
    read, else (the machine stalled the test past `gen_ids`' whole budget) thawed again,
    `gen_ids` aborted, False."""
    server.hold_engine_core(True)
    if _settled(server.finished_requests) <= finished:
        return True
    server.hold_engine_core(False)
    for gen_id in gen_ids:
        engine.abort(gen_id)
    return False


def _settled(read: Callable[[], float], quiet_s: float = 2.0) -> float:
    """`read()` once it has not changed for `quiet_s` (bounded: 60 s)."""
    deadline = time.monotonic() + 60
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < deadline:
        time.sleep(0.2)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
    return value


def _eventually(condition: Callable[[], bool]) -> bool:
    return eventually(condition, 60, 0.1)


def test_a_url_that_does_not_answer_is_named(planner: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineError, match=f"no vLLM server answers: {url} .*refused"):
        VllmServerEngine(planner, VllmServerConfig(urls=[url], connect_timeout_s=1))


def test_service_on_servers_completes_every_task_with_one_killed(
    planner: Path, servers: list[VllmServer]
) -> None:
    """The PlanningService on two servers (the first and the third): the third is
    killed while the robots' plans are in flight; every task still ends with its
    golden plan. Runs before the engine-level kill test (which kills the others)."""
    extra = servers[2]
    config = VllmServerConfig(urls=[servers[0].url, extra.url], retry_after_s=600, affinity_slack=2)
    engine = VllmServerEngine(planner, config)
    # every LRTrace task: drones and arms, so each server holds one robot type's prefix
    failures, stats = plan_with_service(engine, ROBOTS, on_first_segment=extra.kill)
    engine.close()
    assert not failures, "\n".join(failures)
    assert stats.succeeded == ROBOTS
    assert engine.router.servers[1].failures >= 1  # the killed one was noticed


def test_a_server_killed_mid_run_loses_no_generation(
    engine: VllmServerEngine, servers: list[VllmServer], torch_engine: TorchEngine
) -> None:
    """Runs last: it kills the servers. The prompts are loops the planner runs for
    their whole budget (probed on the torch engine), and the victim is frozen once
    its generations are routed to it, so it dies with them mid-stream (the tiny
    planner can stream a whole budget before a test's third step)."""
    prompts = list(islice(running_prompts(torch_engine, range(60), 960, 300), 8))
    assert len(prompts) == 8, "fewer than 8 of 60 looping prompts run 300 ids"
    params = SamplingParams(max_tokens=300)
    expected = drive(torch_engine, prompts, params)
    out = {g: list(p) for g, p in enumerate(prompts, start=40)}
    for gen_id, prompt in out.items():
        engine.add(gen_id, list(prompt), params)
    live = list(out)
    by_server = {g: engine.server_of(g) for g in live}
    assert len(set(by_server.values())) == 2  # least loaded first: both servers used
    victim = servers[1]
    assert len(set(by_server.values()) - {victim.url}) == 1
    victim.pause()
    for iteration in range(10_000):
        if not live:
            break
        if iteration == 3:
            victim.kill()
        for o in engine.step(live):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
    assert list(out.values()) == expected
    moved = [g for g, url in by_server.items() if url == victim.url]
    # those it was still streaming resumed on the other server (a generation it had
    # streamed to its end before dying needed nothing more)
    assert moved and any(engine.generation_failovers.get(g, 0) >= 1 for g in moved)
    assert not any(engine.generation_failovers.get(g, 0) for g in out if g not in moved)
    # the last server gone too: a generation's error names both, and nothing hangs
    servers[0].kill()
    engine.add(60, prompts[0], params)
    with pytest.raises(EngineError, match="no vLLM server answers") as err:
        for _ in range(100):
            engine.step([60])
    assert all(s.url in str(err.value) for s in servers[:2])
