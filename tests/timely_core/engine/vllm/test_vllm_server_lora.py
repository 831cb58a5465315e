"""Fleet variants on vLLM servers (`VllmServerEngine`): a real `vllm serve` started
with the shipped LoRA adapters serves base and variant generations side by side with
the torch engine's greedy tokens; an adapter the server was not started with, and an
unknown variant, are refused naming what to do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
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
