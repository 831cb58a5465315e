"""`rehandle`: a preserved, suspended generation swapped out or discarded later (the
service's re-decision), never brought back before `resume`; the output is the
same as if it had never been suspended."""

from __future__ import annotations

import pytest

from timely_core.clock import VirtualClock
from timely_core.engine.protocol import (
    EngineError,
    HandlingStrategy,
    KvRehandling,
    OutOfKvMemory,
    SamplingParams,
)
from timely_core.engine.sequence import KvLocation
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090

EOS = 0
OUTPUT = list(range(100, 140))


def engine(host_blocks: int = 64) -> SimulatedEngine:
    config = SimulatedEngineConfig(
        eos_token_id=EOS, block_size=4, device_blocks=64, host_blocks=host_blocks
    )
    return SimulatedEngine(VirtualClock(), PAPER_LLAMA3_8B_RTX4090, lambda ids: OUTPUT, config)


def run(e: SimulatedEngine, gen_id: int, steps: int) -> list[int]:
    return [o.token_id for _ in range(steps) for o in e.step([gen_id])]


@pytest.mark.parametrize("later", [HandlingStrategy.SWAP, HandlingStrategy.DISCARD])
def test_a_preserved_generation_is_released_later_and_resumes_the_same(
    later: HandlingStrategy,
) -> None:
    e = engine()
    assert isinstance(e, KvRehandling)
    e.add(1, list(range(1, 30)), SamplingParams(max_tokens=40))
    head = run(e, 1, 10)
    e.suspend(1, HandlingStrategy.PRESERVE)
    free = e.memory().device_blocks_free
    assert e.rehandle(1, later)
    assert e.memory().device_blocks_free > free
    expected = KvLocation.HOST if later is HandlingStrategy.SWAP else KvLocation.NONE
    assert e.generation(1).kv is expected and e.generation(1).strategy is later
    assert not e.rehandle(1, HandlingStrategy.DISCARD)  # off the device already: no change
    assert e.generation(1).kv is expected
    e.resume(1)
    assert head + run(e, 1, 30) == OUTPUT[:40]


def test_rehandle_refuses_what_is_not_a_release() -> None:
    e = engine()
    e.add(1, list(range(1, 10)), SamplingParams(max_tokens=40))
    run(e, 1, 2)
    with pytest.raises(EngineError, match="not suspended"):
        e.rehandle(1, HandlingStrategy.SWAP)
    e.suspend(1, HandlingStrategy.PRESERVE)
    with pytest.raises(EngineError, match="preserve is not a change"):
        e.rehandle(1, HandlingStrategy.PRESERVE)
    with pytest.raises(EngineError, match="resolved by the service"):
        e.rehandle(1, HandlingStrategy.AUTO)


def test_a_full_host_pool_turns_a_late_swap_into_a_discard() -> None:
    e = engine(host_blocks=1)
    e.add(1, list(range(1, 30)), SamplingParams(max_tokens=40))
    head = run(e, 1, 5)
    e.suspend(1, HandlingStrategy.PRESERVE)
    assert e.rehandle(1, HandlingStrategy.SWAP)
    assert e.generation(1).kv is KvLocation.NONE
    assert e.generation(1).strategy is HandlingStrategy.DISCARD
    e.resume(1)
    assert head + run(e, 1, 35) == OUTPUT[:40]


def test_admission_never_takes_a_more_urgent_generations_kept_kv() -> None:
    """Device of 16 blocks: an urgent and a normal generation wait preserved; a new
    normal one (ranked between them) may take the normal one's blocks only."""
    config = SimulatedEngineConfig(eos_token_id=EOS, block_size=4, device_blocks=16)
    e = SimulatedEngine(VirtualClock(), PAPER_LLAMA3_8B_RTX4090, lambda ids: OUTPUT, config)
    e.add(1, list(range(1, 25)), SamplingParams(max_tokens=40))  # 6 blocks: urgent
    e.add(2, list(range(30, 54)), SamplingParams(max_tokens=40))  # 6 blocks: normal
    run(e, 1, 1)
    run(e, 2, 1)
    e.suspend(1, HandlingStrategy.PRESERVE)
    e.suspend(2, HandlingStrategy.PRESERVE)
    e.set_ranking([1, 3, 2, 4])
    e.add(3, list(range(60, 84)), SamplingParams(max_tokens=40))  # 7 blocks: takes 2's
    assert e.generation(2).kv is not KvLocation.DEVICE
    assert e.generation(1).kv is KvLocation.DEVICE
    with pytest.raises(OutOfKvMemory):  # only the urgent one's blocks are left
        e.add(4, list(range(90, 114)), SamplingParams(max_tokens=40))
    assert e.generation(1).kv is KvLocation.DEVICE


def test_victims_sharing_blocks_are_discarded_when_swapping_them_frees_too_little() -> None:
    """Two kept generations share their prompt's blocks (prefix cache): swapping
    them out would keep those on device, so an admission that needs them discards
    the victims instead (it once ran out of victims: IndexError)."""
    config = SimulatedEngineConfig(eos_token_id=EOS, block_size=4, device_blocks=16)
    e = SimulatedEngine(VirtualClock(), PAPER_LLAMA3_8B_RTX4090, lambda ids: OUTPUT, config)
    prompt = list(range(1, 25))  # 6 full blocks
    e.add(1, prompt, SamplingParams(max_tokens=40))
    run(e, 1, 2)
    e.add(2, prompt, SamplingParams(max_tokens=40))  # shares the 6 blocks
    run(e, 2, 2)
    e.suspend(1, HandlingStrategy.PRESERVE)
    e.suspend(2, HandlingStrategy.PRESERVE)
    e.add(3, list(range(200, 248)), SamplingParams(max_tokens=40))  # 12 blocks: 5 short
    assert e.generation(1).kv is KvLocation.NONE and e.generation(2).kv is KvLocation.NONE
    e.abort(3)
    e.resume(1)
    assert run(e, 1, 38) == OUTPUT[2:40]
