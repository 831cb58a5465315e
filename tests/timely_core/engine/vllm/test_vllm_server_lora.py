"""Fleet variants on vLLM servers (`VllmServerEngine`): a real `vllm serve` started
with the shipped LoRA adapters serves base and variant generations side by side with
the torch engine's greedy tokens; an adapter the server was not started with, and an
unknown variant, are refused naming what to do; its /v1/models listing and its 404
for a LoRA it does not serve are read as the router expects (the routing itself:
test_vllm_server_variants.py, against stand-in servers)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from vllm_fake_server_testkit import FakeVllmServer, expected
from vllm_testkit import (
    SERVED,
    VARIANTS,
    VllmServer,
    assert_variants_equal_torch,
    robot_prompts,
)

from timely_core.engine.protocol import AdapterError, EngineError, SamplingParams, UnknownVariant
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_engine import VllmServerEngine

GREEDY = SamplingParams(max_tokens=24)


@pytest.fixture(scope="module")
def lora_server(planner: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    log = tmp_path_factory.mktemp("vllm-lora-server") / "server.log"
    # one slot more than the adapters: vLLM's CPU LoRA ops send base rows to the last
    # slot (docs/fleet-variants.md), which must stay empty
    modules = [f"{name}={VARIANTS / name}" for name in SERVED]
    flags = ("--enable-lora", "--max-loras", "3", "--max-lora-rank", "8", "--lora-modules")
    server = VllmServer(planner, log, 8, (*flags, *modules))
    try:
        server.wait_ready(400)
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def lora_engine(planner: Path, lora_server: VllmServer) -> Iterator[VllmServerEngine]:
    engine = VllmServerEngine(planner, VllmServerConfig(urls=[lora_server.url]))
    for name in SERVED:
        engine.load_adapter(name, VARIANTS / name)
    yield engine
    engine.close()


def test_variants_and_base_side_by_side_equal_the_torch_engine(
    planner: Path, lora_engine: VllmServerEngine
) -> None:
    assert_variants_equal_torch(planner, lora_engine)


def test_a_prefix_holds_one_variants_kv(lora_engine: VllmServerEngine) -> None:
    prefixes, _ = robot_prompts()
    prefix = prefixes["drone"]
    lora_engine.register_prefix("drone@warehouse", prefix, variant="warehouse-drone")
    with pytest.raises(EngineError, match="runs variant 'base' but prefix 'drone@warehouse'"):
        lora_engine.add(100, [*prefix, 5], GREEDY, prefix_id="drone@warehouse")
    lora_engine.unregister_prefix("drone@warehouse")


def test_adapters_the_server_lacks_and_unknown_variants_are_named(
    lora_engine: VllmServerEngine, lora_server: VllmServer
) -> None:
    with pytest.raises(AdapterError, match=f"{lora_server.url} does not serve LoRA 'packing-arm'"):
        lora_engine.load_adapter("packing-arm", VARIANTS / "packing-arm")
    with pytest.raises(AdapterError, match="already loaded"):
        lora_engine.load_adapter("heavy-drone", VARIANTS / "heavy-drone")
    with pytest.raises(UnknownVariant, match="unknown variant 'packing-arm'"):
        lora_engine.add(200, [1, 2, 3], GREEDY, variant="packing-arm")
    weights = lora_engine.resident_weights()
    assert weights.names() == list(SERVED)
    assert weights.total_bytes == weights.base_bytes + weights.variant_bytes


def test_a_real_servers_404_for_a_lora_sends_the_generation_where_it_is_served(
    planner: Path, lora_server: VllmServer, fakes: Callable[..., FakeVllmServer]
) -> None:
    """The real server's listing names its adapters; told it also lists packing-arm
    (as before an unload at run time), it gets that variant's first request, answers
    vLLM's 404, and the generation runs on the stand-in server that serves it."""
    other = fakes(loras=("packing-arm",))
    engine = VllmServerEngine(planner, VllmServerConfig(urls=[lora_server.url, other.url]))
    try:
        engine.load_adapter("packing-arm", VARIANTS / "packing-arm")
        real = engine.router.servers[0]
        assert real.loras == frozenset(SERVED) and real.listed
        engine.router.set_loras(real, real.loras | {"packing-arm"})
        prompt = [5, 6, 7]
        engine.add(0, prompt, SamplingParams(max_tokens=8), variant="packing-arm")
        assert engine.server_of(0) == lora_server.url
        out: list[int] = []
        for _ in range(100):
            step = engine.step([0])
            out += [o.token_id for o in step]
            if any(o.finished for o in step):
                break
        assert out == expected(prompt, 8)
        assert other.requests == [("packing-arm", prompt)]
        assert real.loras == frozenset(SERVED) and real.down_until == 0
        assert engine.generation_failovers.get(0) == 1
    finally:
        engine.close()
