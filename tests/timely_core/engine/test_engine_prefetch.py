"""`prefetch`: a suspended, swapped-out generation's KV brought back into free device
blocks before its resume, the host copy kept; the resume then copies nothing, any
pressure gives the prefetched KV up first at no copy, and the output is the same
as without it (simulator, and the torch engine greedy)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_testkit import check_memory, random_prompts

from timely_core.clock import VirtualClock
from timely_core.engine.protocol import (
    EngineError,
    HandlingStrategy,
    KvPrefetching,
    SamplingParams,
)
from timely_core.engine.sequence import KvLocation
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

EOS = 0
OUTPUT = list(range(100, 140))
SWAP = HandlingStrategy.SWAP


def sim(device_blocks: int = 64, host_blocks: int = 64) -> SimulatedEngine:
    config = SimulatedEngineConfig(
        eos_token_id=EOS, block_size=4, device_blocks=device_blocks, host_blocks=host_blocks
    )
    return SimulatedEngine(VirtualClock(), PAPER_LLAMA3_8B_RTX4090, lambda ids: OUTPUT, config)


def run(e: SimulatedEngine | TorchEngine, gen_id: int, steps: int) -> list[int]:
    return [o.token_id for _ in range(steps) for o in e.step([gen_id])]


def test_a_prefetched_generation_resumes_without_a_swap_in_and_the_same() -> None:
    e = sim()
    assert isinstance(e, KvPrefetching)
    e.add(1, list(range(1, 30)), SamplingParams(max_tokens=40))
    head = run(e, 1, 10)
    e.suspend(1, SWAP)
    host_free = e.memory().host_blocks_free
    device_free = e.memory().device_blocks_free
    cost = e.prefetch_cost(1)
    assert cost is not None and cost > 0
    assert e.prefetch(1)
    assert e.generation(1).kv is KvLocation.DEVICE and e.generation(1).prefetched
    assert e.memory().device_blocks_free == device_free - cost
    assert e.memory().host_blocks_free == host_free  # the host copy is kept
    assert e.prefetch_cost(1) is None and not e.prefetch(1)  # nothing left to bring back
    swapped_in = e.stats.swapped_in_blocks
    e.resume(1)
    assert e.stats.swapped_in_blocks == swapped_in  # the resume copied nothing
    assert e.memory().host_blocks_free == host_free + cost  # host copy released
    assert e.prefetch_counts() == {"prefetches": 1, "prefetch_hits": 1, "prefetch_given_up": 0}
    assert head + run(e, 1, 30) == OUTPUT[:40]


def test_the_simulator_charges_a_prefetch_as_a_swap_in() -> None:
    """Two engines in the same state; one prefetches: its next step takes exactly
    the swap-in's time longer (virtual clock)."""
    engines = [sim(), sim()]
    for e in engines:
        e.add(1, list(range(1, 30)), SamplingParams(max_tokens=40))
        e.add(2, list(range(50, 60)), SamplingParams(max_tokens=40))
        run(e, 1, 4)
        e.suspend(1, SWAP)
        run(e, 2, 1)
    cost = engines[1].prefetch_cost(1)
    assert cost is not None and engines[1].prefetch(1)
    before = [e.clock.now() for e in engines]
    for e in engines:
        run(e, 2, 1)
    took = [e.clock.now() - t for e, t in zip(engines, before, strict=True)]
    swap_s = PAPER_LLAMA3_8B_RTX4090.swap_seconds(cost, engines[1].bytes_per_block)
    assert swap_s > 0
    assert took[1] == pytest.approx(took[0] + swap_s)


def test_prefetch_refuses_what_is_not_swapped_out_and_what_does_not_fit() -> None:
    e = sim(device_blocks=12)
    e.add(1, list(range(1, 30)), SamplingParams(max_tokens=40))  # 8 blocks
    run(e, 1, 2)
    with pytest.raises(EngineError, match="not suspended"):
        e.prefetch(1)
    e.suspend(1, HandlingStrategy.PRESERVE)
    assert e.prefetch_cost(1) is None and not e.prefetch(1)  # on the device already
    e.resume(1)
    e.suspend(1, SWAP)
    e.add(2, list(range(50, 70)), SamplingParams(max_tokens=40))  # 5 of the 12 blocks
    free = e.memory().device_blocks_free
    cost = e.prefetch_cost(1)
    assert cost is not None and cost > free
    assert not e.prefetch(1)  # no preemption for a prefetch: nothing changed
    assert e.generation(1).kv is KvLocation.HOST and e.memory().device_blocks_free == free
    e.abort(2)
    e.resume(1)
    assert e.prefetch_counts()["prefetches"] == 0


def test_a_prefetched_kv_is_given_up_first_and_without_a_copy() -> None:
    """Two suspended generations hold device KV: 1 preserved and ranked last, 2
    prefetched and ranked first. A new one that needs memory takes 2's prefetched
    blocks, not 1's (which a preemption would have to swap out): 2 is on the host
    again from its kept copy, and resumes to the same output."""
    e = sim(device_blocks=20)
    e.add(1, list(range(1, 30)), SamplingParams(max_tokens=40))  # 8 blocks
    e.add(2, list(range(31, 60)), SamplingParams(max_tokens=40))
    head1, head2 = run(e, 1, 4), run(e, 2, 4)
    e.suspend(1, HandlingStrategy.PRESERVE)
    e.suspend(2, SWAP)
    assert e.prefetch(2)
    e.set_ranking([2, 3, 1])  # 2 most urgent, 1 least: still 2's prefetch goes first
    swapped_out = e.stats.swapped_out_blocks
    assert e.memory().device_blocks_free == 4  # 3 needs 8
    e.add(3, list(range(61, 90)), SamplingParams(max_tokens=40))
    assert e.stats.swapped_out_blocks == swapped_out  # no copy at all
    assert e.generation(2).kv is KvLocation.HOST and not e.generation(2).prefetched
    assert e.generation(1).kv is KvLocation.DEVICE  # the preserved KV stays
    assert e.prefetch_counts()["prefetch_given_up"] == 1
    assert e.stats.preemptions == 0
    e.abort(3)
    e.resume(1)
    e.resume(2)
    assert head1 + run(e, 1, 36) == OUTPUT[:40]
    assert head2 + run(e, 2, 36) == OUTPUT[:40]


def test_a_decode_short_of_a_block_takes_the_prefetched_kv_first() -> None:
    e = sim(device_blocks=17)
    e.add(1, list(range(1, 33)), SamplingParams(max_tokens=40))  # 8 full blocks
    e.add(2, list(range(41, 73)), SamplingParams(max_tokens=40))  # 8 full blocks
    run(e, 1, 1)
    run(e, 2, 1)
    e.suspend(2, SWAP)
    assert e.prefetch(2)
    assert e.memory().device_blocks_free == 1
    run(e, 1, 1)  # its 33rd token's KV takes the last free block
    run(e, 1, 4)  # the 37th needs one more: the prefetched KV goes, not a swap
    assert e.generation(2).kv is KvLocation.HOST
    assert e.generation(1).kv is KvLocation.DEVICE
    assert e.prefetch_counts()["prefetch_given_up"] == 1 and e.stats.preemptions == 0


@pytest.mark.parametrize("given_up", [False, True])
def test_torch_greedy_output_is_the_same_with_and_without_prefetch(
    qwen2_path: Path, given_up: bool
) -> None:
    """Uninterrupted, swapped and resumed, and swapped, prefetched (and given up
    again under pressure, then swapped in from the kept copy) and resumed: the
    same greedy tokens."""
    prompt = random_prompts(5, 1, 40)[0]
    params = SamplingParams(max_tokens=12)

    def engine() -> TorchEngine:
        config = EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
        return TorchEngine(qwen2_path, config)

    plain = engine()
    plain.add(1, prompt, params)
    reference = run(plain, 1, 12)

    outputs = []
    for prefetch in (False, True):
        e = engine()
        e.add(1, prompt, params)
        tokens = run(e, 1, 5)
        e.suspend(1, SWAP)
        if prefetch:
            assert e.prefetch(1)
            if given_up:
                e.blocks.give_up_prefetch(e.generation(1))
                assert e.generation(1).kv is KvLocation.HOST
        e.resume(1)
        tokens += run(e, 1, 7)
        check_memory(e)
        outputs.append(tokens)
        if prefetch:
            counts = e.prefetch_counts()
            assert counts["prefetches"] == 1
            assert counts["prefetch_hits" if not given_up else "prefetch_given_up"] == 1
    assert outputs[0] == outputs[1] == reference
