"""`engine: vllm-server` with servers serving different sets of fleet variants (LoRA
adapters), against stand-in servers on 127.0.0.1 (vllm_fake_server_testkit.py:
they list their adapters in /v1/models as vLLM does, load and unload them at run
time, and answer vLLM's 404 for a model they do not serve): a variant's generations
and prefixes are routed only among the servers listing it, with affinity and load
counted among those; a server that answers 404 for a variant is counted as not
serving it and the generation goes on on one that does, from its kept ids, token for
token; with no server serving it, that generation alone fails, naming the variant
and what each server serves. Each test bounds its waits and asserts no durations."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import pytest
from engine_testkit import drive_to_end
from vllm_fake_server_testkit import FakeVllmServer, expected
from vllm_testkit import PLANNER, VARIANTS, eventually

from timely_core.engine.protocol import (
    AdapterError,
    HandlingStrategy,
    SamplingParams,
)
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_engine import VllmServerEngine
from timely_core.engine.vllm.server_router import Router, ServerState

HEAVY, WAREHOUSE = "heavy-drone", "warehouse-drone"  # shipped adapters (checked on load)
PROMPTS = [[7 + i, 40 + i, 300 + i] for i in range(8)]
PREFIX = list(range(100, 140))


def _engine(*urls: str, variants: tuple[str, ...] = (), **config: float) -> VllmServerEngine:
    """Servers left out for long once failed; a silent one after 0.5 s (unless said);
    `variants` loaded."""
    settings = {"urls": list(urls), "retry_after_s": 600, "token_timeout_s": 0.5} | config
    engine = VllmServerEngine(PLANNER, VllmServerConfig.model_validate(settings))
    for name in variants:
        engine.load_adapter(name, VARIANTS / name)
    return engine


def _eventually(condition: Callable[[], bool]) -> bool:
    return eventually(condition, 30, 0.01)


def test_variants_are_routed_only_to_servers_listing_them_balanced_among_those(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """A serves heavy, B heavy and warehouse, C no adapter. Streams are held after
    their first token, so each stays counted in its server's load: heavy ones
    alternate between A and B, warehouse ones all go to B, base ones to the least
    loaded of all (C). No server is ever asked for a model it lacks, and every plan
    is the uninterrupted one."""
    a = fakes(loras=(HEAVY,), hold_after=1)
    b = fakes(loras=(HEAVY, WAREHOUSE), hold_after=1)
    c = fakes(hold_after=1)
    engine = _engine(a.url, b.url, c.url, variants=(HEAVY, WAREHOUSE), token_timeout_s=120)
    try:
        variants = [HEAVY, HEAVY, HEAVY, HEAVY, WAREHOUSE, WAREHOUSE, None, None]
        for gen_id, (prompt, variant) in enumerate(zip(PROMPTS, variants, strict=True)):
            engine.add(gen_id, list(prompt), SamplingParams(max_tokens=12), variant=variant)
        routed = [engine.server_of(g) for g in range(len(PROMPTS))]
        assert routed == [a.url, b.url, a.url, b.url, b.url, b.url, c.url, c.url]
        for fake in (a, b, c):
            fake.let_go()
        out, raised = drive_to_end(engine, list(range(len(PROMPTS))))
        assert not raised
        assert out == {g: expected(p, 12) for g, p in enumerate(PROMPTS)}
        assert sorted(m for m, _ in a.requests) == [HEAVY, HEAVY]
        assert sorted(m for m, _ in b.requests) == [HEAVY, HEAVY, WAREHOUSE, WAREHOUSE]
        assert [m for m, _ in c.requests] == [c.model, c.model]
        assert a.not_found == b.not_found == c.not_found == 0
        assert not engine.generation_failovers
    finally:
        engine.close()


def test_a_variants_prefix_lives_on_a_server_serving_it(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """The first server serves no adapter, so the heavy prefix's home is the second
    (though both hold no prefix and no load), and its generations stay there; the
    base prefix then goes where the fewest prefixes live: the first."""
    plain, heavy = fakes(), fakes(loras=(HEAVY,))
    engine = _engine(plain.url, heavy.url, variants=(HEAVY,))
    try:
        engine.register_prefix("drone@heavy", PREFIX, variant=HEAVY)
        engine.register_prefix("drone", PREFIX)
        home = engine.router.home_of("drone@heavy")
        assert home is not None and home.url == heavy.url
        base_home = engine.router.home_of("drone")
        assert base_home is not None and base_home.url == plain.url
        for gen_id in range(3):
            engine.add(
                gen_id, [*PREFIX, 5 + gen_id], SamplingParams(max_tokens=6), "drone@heavy", HEAVY
            )
            assert engine.server_of(gen_id) == heavy.url
        out, raised = drive_to_end(engine, [0, 1, 2])
        assert not raised and out == {g: expected([*PREFIX, 5 + g], 6) for g in range(3)}
        assert plain.not_found == heavy.not_found == 0
    finally:
        engine.close()


def test_a_404_for_the_variant_fails_over_to_a_server_serving_it(
    fakes: Callable[..., FakeVllmServer], caplog: pytest.LogCaptureFixture
) -> None:
    """A heavy plan whose prefix lives on A runs five tokens there and is suspended;
    A unloads the adapter (still listed as serving it); the resume goes home to A,
    which answers 404: A is listed again, counted as not serving heavy (not down: it
    serves the rest), and the plan goes on on B from prompt + its five kept ids,
    token for token the uninterrupted plan; the prefix's home moves with it."""
    a, b = fakes(loras=(HEAVY,)), fakes(loras=(HEAVY,))
    engine = _engine(a.url, b.url, variants=(HEAVY,))
    prompt = [*PREFIX, 5]
    try:
        engine.register_prefix("drone@heavy", PREFIX, variant=HEAVY)
        engine.add(0, list(prompt), SamplingParams(max_tokens=30), "drone@heavy", HEAVY)
        assert engine.server_of(0) == a.url
        got = [engine.step([0])[0].token_id for _ in range(5)]
        engine.suspend(0, HandlingStrategy.PRESERVE)
        a.unload_lora(HEAVY)
        with caplog.at_level(logging.WARNING):
            engine.resume(0)
            assert engine.server_of(0) == a.url  # its prefix's home, still listed
            out, raised = drive_to_end(engine, [0])
        assert not raised
        assert got + out[0] == expected(prompt, 30)
        assert a.not_found == 1 and b.requests == [(HEAVY, [*prompt, *got])]
        assert engine.generation_failovers.get(0) == 1
        home = engine.router.home_of("drone@heavy")
        assert home is not None and home.url == b.url
        state_a = engine.router.servers[0]
        assert HEAVY not in state_a.loras and state_a.listed
        assert state_a.down_until == 0 and not state_a.last_error
        warned = [r.getMessage() for r in caplog.records if a.url in r.getMessage()]
        assert len(warned) == 1 and f"does not serve LoRA {HEAVY!r}" in warned[0]
        engine.add(1, list(PROMPTS[1]), SamplingParams(max_tokens=4), variant=HEAVY)
        assert engine.server_of(1) == b.url  # A is no longer asked for it
        engine.add(2, list(PROMPTS[2]), SamplingParams(max_tokens=4))
        assert engine.server_of(2) == a.url  # but serves the base as before
        drive_to_end(engine, [1, 2])
        assert a.not_found == 1
    finally:
        engine.close()


def test_a_404_error_event_mid_stream_keeps_the_tokens_received(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """A server that still lists the adapter ends a heavy stream with a 404 error
    event after one token: it counts as not serving heavy, and the plan goes on on
    the other server from that token."""
    prompt = PROMPTS[3]
    a = fakes(loras=(HEAVY,), refuse_first=prompt[0], refuse_in_stream=True, refuse_code=404)
    b = fakes(loras=(HEAVY,))
    engine = _engine(a.url, b.url, variants=(HEAVY,))
    try:
        engine.add(0, list(prompt), SamplingParams(max_tokens=20), variant=HEAVY)
        assert engine.server_of(0) == a.url
        out, raised = drive_to_end(engine, [0])
        assert not raised and out[0] == expected(prompt, 20)
        assert a.refused == 1 and b.requests == [(HEAVY, [*prompt, expected(prompt, 1)[0]])]
        assert HEAVY not in engine.router.servers[0].loras  # though A lists it
        assert engine.generation_failovers.get(0) == 1
    finally:
        engine.close()


def test_a_variant_no_server_serves_fails_alone_naming_what_each_serves(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """A unloads heavy, the only server that had it; B serves warehouse only. The
    heavy plan, routed to A, gets 404, then finds no server serving heavy (their
    listings read again): it fails alone with an error naming the variant, each
    server and what it serves, while the warehouse plan in the same step goes on to
    its end."""
    a, b = fakes(loras=(HEAVY,)), fakes(loras=(WAREHOUSE,))
    engine = _engine(a.url, b.url, variants=(HEAVY, WAREHOUSE))
    try:
        engine.add(0, list(PROMPTS[0]), SamplingParams(max_tokens=40), variant=WAREHOUSE)
        assert engine.server_of(0) == b.url
        assert _eventually(lambda: engine.received_ahead(0) >= 5)
        a.unload_lora(HEAVY)
        engine.add(1, list(PROMPTS[1]), SamplingParams(max_tokens=40), variant=HEAVY)
        assert engine.server_of(1) == a.url  # still listed as serving it
        assert _eventually(lambda: engine._streams[1].error is not None)
        out, raised = drive_to_end(engine, [0, 1])
        assert len(raised) == 1 and list(raised[0].failures) == [1]
        assert {o.gen_id for o in raised[0].outputs} == {0}  # its step's token kept
        reason = raised[0].failures[1]
        assert f"no vLLM server that answers serves variant {HEAVY!r}" in reason
        assert f"{a.url} serves no LoRA" in reason
        assert f"{b.url} serves {WAREHOUSE}" in reason
        assert re.search(rf"--lora-modules {HEAVY}=\S*{HEAVY}", reason)
        assert out[0] == expected(PROMPTS[0], 40)
        assert a.not_found == 1 and b.not_found == 0  # B was never asked for heavy
        assert all(s.down_until == 0 for s in engine.router.servers)
    finally:
        engine.close()


def test_a_variant_loaded_at_run_time_is_found_before_failing(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """A unloads heavy and B loads it at run time (B was listed without it): the
    404 from A sends the plan to B, found by reading the listings again."""
    a, b = fakes(loras=(HEAVY,)), fakes()
    engine = _engine(a.url, b.url, variants=(HEAVY,))
    try:
        a.unload_lora(HEAVY)
        b.load_lora(HEAVY)
        engine.add(0, list(PROMPTS[0]), SamplingParams(max_tokens=10), variant=HEAVY)
        out, raised = drive_to_end(engine, [0])
        assert not raised and out[0] == expected(PROMPTS[0], 10)
        assert a.not_found == 1 and [m for m, _ in b.requests] == [HEAVY]
        assert engine.generation_failovers.get(0) == 1
    finally:
        engine.close()


def test_load_adapter_needs_one_server_listing_it(
    fakes: Callable[..., FakeVllmServer],
) -> None:
    """An adapter one server lists is loaded; one no server lists is refused, naming
    each server and what it serves; once a server loads it at run time it loads."""
    a, b = fakes(loras=(HEAVY,)), fakes(loras=(WAREHOUSE,))
    engine = _engine(a.url, b.url, variants=(HEAVY, WAREHOUSE))
    try:
        with pytest.raises(AdapterError) as err:
            engine.load_adapter("packing-arm", VARIANTS / "packing-arm")
        message = str(err.value)
        assert message.startswith("no vLLM server serves LoRA 'packing-arm'")
        assert f"{a.url} does not serve LoRA 'packing-arm' (it serves: {HEAVY})" in message
        assert f"{b.url} does not serve LoRA 'packing-arm' (it serves: {WAREHOUSE})" in message
        assert "--lora-modules packing-arm=" in message
        b.load_lora("packing-arm")
        engine.load_adapter("packing-arm", VARIANTS / "packing-arm")
        assert engine.resident_weights().names() == [HEAVY, WAREHOUSE, "packing-arm"]
    finally:
        engine.close()


def test_a_servers_listing_is_read_again_once_it_failed() -> None:
    """Listed, a server serves only its adapters; once it failed (it may come back
    restarted with others) it may serve any variant until listed again; a 404
    leaves a variant out whatever its listing said."""
    server = ServerState("http://a", known=True)
    router = Router([server], 0, 0)
    router.set_loras(server, frozenset({HEAVY}))
    assert router.up(variant=HEAVY) == [server] and router.up(variant=WAREHOUSE) == []
    assert router.pick(None, variant=WAREHOUSE) is None
    router.mark_down(server, "stream failed")
    assert not server.listed and router.up(variant=WAREHOUSE) == [server]
    assert "http://a serves heavy-drone (as last listed)" in router.describe_loras()
    router.set_loras(server, frozenset({HEAVY, WAREHOUSE}))
    router.lacks(server, HEAVY)
    assert router.up(variant=HEAVY) == [] and router.up(variant=WAREHOUSE) == [server]
    assert router.up() == [server]  # the base is served by all
