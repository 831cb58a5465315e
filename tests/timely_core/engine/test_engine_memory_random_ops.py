"""Random sequences of engine operations keep the KV accounting exact: blocks in
use always equal the blocks held by live generations and pinned prefixes, and
everything returns to the pools at the end. Errors are only the documented ones."""

from __future__ import annotations

from pathlib import Path

from engine_testkit import check_memory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timely_core.engine.protocol import (
    FIXED_STRATEGIES,
    HandlingStrategy,
    OutOfKvMemory,
    SamplingParams,
)
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

PREFIXES = {
    "a": [(3 * i) % 500 + 4 for i in range(21)],
    "b": [(5 * i) % 500 + 4 for i in range(16)],
}
BLOCK_BYTES = 2 * 2 * 8 * 2 * 16 * 4  # layers, k/v, block_size, kv_heads, head_dim, fp32
OPERATIONS = ("add", "add", "step", "step", "suspend", "resume", "abort", "register", "unregister")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), device_blocks=st.sampled_from([12, 40]), host_blocks=st.sampled_from([0, 8]))
def test_engine_random_operations_keep_accounting_exact(
    qwen2_path: Path, data: st.DataObject, device_blocks: int, host_blocks: int
) -> None:
    config = EngineConfig(
        block_size=8,
        device_kv_bytes=device_blocks * BLOCK_BYTES,
        host_kv_bytes=host_blocks * BLOCK_BYTES,
        preemption_strategy=HandlingStrategy.SWAP,
    )
    engine = TorchEngine(qwen2_path, config)
    for prefix_id, ids in PREFIXES.items():
        engine.register_prefix(prefix_id, ids)
    running: set[int] = set()
    suspended: set[int] = set()
    next_id = 0
    for _ in range(data.draw(st.integers(10, 40), label="operations")):
        op = data.draw(st.sampled_from(OPERATIONS), label="op")
        if op == "add":
            pinned = sorted(engine.blocks.prefixes)
            prefix = data.draw(st.sampled_from([None, *pinned]), label="prefix")
            tail = list(range(100, 100 + data.draw(st.integers(1, 30), label="tail")))
            prompt = (PREFIXES[prefix] if prefix else []) + tail
            try:
                engine.add(next_id, prompt, SamplingParams(max_tokens=6), prefix_id=prefix)
                running.add(next_id)
            except OutOfKvMemory:
                assert not engine.can_admit(len(prompt), prefix)
            next_id += 1
        elif op == "step":
            for out in engine.step(sorted(running)):
                if out.finished:
                    running.discard(out.gen_id)
        elif op == "suspend" and running:
            gen = data.draw(st.sampled_from(sorted(running)), label="suspend")
            engine.suspend(gen, data.draw(st.sampled_from(list(FIXED_STRATEGIES))))
            running.discard(gen)
            suspended.add(gen)
        elif op == "resume" and suspended:
            gen = data.draw(st.sampled_from(sorted(suspended)), label="resume")
            try:
                engine.resume(gen)
                suspended.discard(gen)
                running.add(gen)
            except OutOfKvMemory:
                pass
        elif op == "abort" and running | suspended:
            gen = data.draw(st.sampled_from(sorted(running | suspended)), label="abort")
            engine.abort(gen)
            running.discard(gen)
            suspended.discard(gen)
        elif op == "register":
            prefix_id = data.draw(st.sampled_from(sorted(PREFIXES)), label="register")
            before = engine.blocks.prefixes.get(prefix_id)
            try:
                engine.register_prefix(prefix_id, PREFIXES[prefix_id])
            except OutOfKvMemory:  # the previous registration, if any, stays
                assert engine.blocks.prefixes.get(prefix_id) is before
        elif op == "unregister" and engine.blocks.prefixes:
            engine.unregister_prefix(data.draw(st.sampled_from(sorted(engine.blocks.prefixes))))
        check_memory(engine)
    for gen in running | suspended:
        engine.abort(gen)
    for prefix_id in list(engine.blocks.prefixes):
        engine.unregister_prefix(prefix_id)
    report = engine.memory()
    assert report.device_blocks_free == report.device_blocks_total
    assert report.host_blocks_free == report.host_blocks_total
