"""The API mix on the real torch engine (a random tiny Llama over the test
tokenizer), forced to the trace's tokens, in virtual time moved by the measured
engine calls: every request gets the same reply as on the simulator, after its
calls, and the clock moved by no less than the engine's measured time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lrtrace.api_mix import compose_api_mix, run_api_mix
from lrtrace.api_mix_torch import MeasuredTorchEngine
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import Script, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.engine.torch.config import EngineConfig


def test_the_real_engine_serves_the_trace_replies_after_their_calls(
    llama_for_tokenizer: Path, tokenizer: Any
) -> None:
    mix = compose_api_mix(2.0, 3, seed=5)  # math, chatbot, qa: 10 calls in all
    engines: list[MeasuredTorchEngine] = []

    def factory(clock: VirtualClock, script: Script) -> MeasuredTorchEngine:
        config = EngineConfig(device_kv_bytes=2**22, host_kv_bytes=2**22, num_threads=1)
        engine = MeasuredTorchEngine(llama_for_tokenizer, config, clock, script)
        engines.append(engine)
        return engine

    eos = int(tokenizer.token_to_id("<eos>"))
    sim_config = SimulatedEngineConfig(eos_token_id=eos)
    real = run_api_mix(
        mix, "lamps", PAPER_LLAMA3_8B_RTX4090, sim_config, tokenizer, engine_factory=factory
    )
    sim = run_api_mix(mix, "lamps", PAPER_LLAMA3_8B_RTX4090, sim_config, tokenizer)
    assert len(engines) == 1 and real.engine is engines[0]
    for ours, theirs in zip(real.outcomes, sim.outcomes, strict=True):
        assert ours.result is not None and ours.result.success, ours.result
        assert theirs.result is not None
        assert ours.result.plan_text == theirs.result.plan_text  # the trace's reply
        assert ours.result.segment_count == len(ours.request.sentences)
        assert ours.done_s is not None
        assert ours.done_s - ours.request.arrival_s >= sum(ours.request.call_s)
    engine = engines[0]
    assert engine.measured_s > 0 and engine.timings.steps > 0
    # the clock moved by the engine's measured calls plus the calls' waits
    assert real.service.clock.now() >= engine.measured_s
    # lamps swaps every wait longer than a few milliseconds; memory is ample: each
    # swapped KV that waited while the engine ran came back early
    counts = engine.prefetch_counts()
    assert real.counts.get("swap", 0) > 0 and counts["prefetch_hits"] > 0
