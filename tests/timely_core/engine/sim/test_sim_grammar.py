"""The simulator takes a grammar like any engine and ignores it: its output is a
replayed script, and a grammar must not change it or the virtual time it costs."""

from __future__ import annotations

from timely_core.clock import VirtualClock
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel

EOS = 0
LATENCY = LatencyModel(iteration_s=0.01, prefill_token_s=0.001, decode_s=0.002)


def run(params: SamplingParams) -> tuple[list[int], float]:
    clock = VirtualClock()
    engine = SimulatedEngine(
        clock, LATENCY, lambda prompt: [7, 8, 9], SimulatedEngineConfig(eos_token_id=EOS)
    )
    engine.add(1, [5, 6, 7], params)
    out: list[int] = []
    while not out or out[-1] != EOS:
        out += [o.token_id for o in engine.step([1])]
    return out, clock.now()


def test_the_simulator_accepts_and_ignores_a_grammar() -> None:
    plain = run(SamplingParams())
    constrained = run(SamplingParams(grammar='%llguidance {}\nstart: "tp();"\n'))
    assert constrained == plain == ([7, 8, 9, EOS], plain[1])
    assert plain[1] > 0
