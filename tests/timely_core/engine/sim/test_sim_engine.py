"""SimulatedEngine: virtual time from the latency model, scripted tokens, and paged
KV accounting with preserve / swap / discard."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from timely_core.clock import VirtualClock
from timely_core.engine.protocol import (
    Engine,
    EngineError,
    GenerationsFailed,
    HandlingStrategy,
    OutOfKvMemory,
    SamplingParams,
    UnknownGeneration,
)
from timely_core.engine.sim.engine import (
    SimulatedEngine,
    SimulatedEngineConfig,
)
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090, LatencyModel

EOS = 0
OUTPUT = [7, 8, 9]
GREEDY = SamplingParams()
LATENCY = LatencyModel(iteration_s=0.01, prefill_token_s=0.001, decode_s=0.002)


def script(prompt: Sequence[int]) -> list[int]:
    return [*OUTPUT, prompt[-1]]  # depends on the prompt, as a replayed plan does


def engine(
    latency: LatencyModel = LATENCY, **config: int | float | HandlingStrategy
) -> tuple[SimulatedEngine, VirtualClock]:
    clock = VirtualClock()
    settings: dict[str, int | float | HandlingStrategy] = {
        "eos_token_id": EOS,
        "block_size": 4,
        "device_blocks": 16,
        "host_blocks": 16,
    }
    settings.update(config)
    config_model = SimulatedEngineConfig.model_validate(settings)
    return SimulatedEngine(clock, latency, script, config_model), clock


def run_to_end(sim: SimulatedEngine, gen_ids: list[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {g: [] for g in gen_ids}
    live = list(gen_ids)
    for _ in range(100):
        if not live:
            return out
        for step in sim.step(live):
            out[step.gen_id].append(step.token_id)
            if step.finished:
                live.remove(step.gen_id)
    raise AssertionError("generations did not finish")


def test_implements_the_engine_protocol() -> None:
    sim, _ = engine()
    assert isinstance(sim, Engine)
    assert sim.eos_token_id == EOS


def test_emits_the_script_then_eos_and_advances_virtual_time() -> None:
    sim, clock = engine()
    sim.add(1, [1, 2, 3, 4, 5], GREEDY)
    first = sim.step([1])
    assert [(o.token_id, o.finished) for o in first] == [(7, False)]
    assert clock.now() == pytest.approx(0.01 + 5 * 0.001)  # prefill of 5 tokens
    second = sim.step([1])
    assert second[0].token_id == 8
    assert clock.now() == pytest.approx(0.015 + 0.01 + 0.002)  # one decode
    rest = run_to_end(sim, [1])[1]
    assert rest == [9, 5, EOS]
    with pytest.raises(UnknownGeneration):
        sim.token_ids(1)  # finished generations are freed
    assert sim.memory().device_blocks_free == 16


def test_max_tokens_and_stop_tokens_end_a_generation() -> None:
    sim, _ = engine()
    sim.add(1, [1, 2], SamplingParams(max_tokens=2))
    sim.add(2, [1, 2], SamplingParams(stop_token_ids=(8,)))
    out = run_to_end(sim, [1, 2])
    assert out == {1: [7, 8], 2: [7, 8]}


def test_chunked_prefill_within_the_token_budget() -> None:
    sim, _ = engine(max_batched_tokens=4)
    sim.add(1, list(range(1, 11)), GREEDY)
    assert sim.step([1]) == [] and sim.step([1]) == []
    assert sim.step([1])[0].token_id == 7
    assert sim.stats.prefill_tokens == 10


def test_registered_prefix_blocks_are_shared_and_not_recomputed() -> None:
    sim, clock = engine()
    sim.register_prefix("drone", [1, 2, 3, 4, 5, 6, 7, 8, 9])  # 2 full blocks + 1 partial
    registered_at = clock.now()
    assert sim.memory().pinned_prefix_blocks == 3
    assert sim.can_admit(12, "drone") and not sim.can_admit(12 + 16 * 4, "drone")
    sim.add(1, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], GREEDY, prefix_id="drone")
    sim.step([1])
    # the prefix once, then only the request's token: the prefix's partial last block is
    # copied, not recomputed (as TorchEngine does)
    assert sim.stats.prefill_tokens == 9 + 1
    assert clock.now() - registered_at == pytest.approx(0.01 + 1 * 0.001)
    with pytest.raises(ValueError, match="does not start with"):
        sim.add(2, [9, 9, 9], GREEDY, prefix_id="drone")
    with pytest.raises(EngineError, match="no registered prefix"):
        sim.add(3, [1, 2], GREEDY, prefix_id="arm")


def test_preserve_keeps_blocks_and_resumes_for_free() -> None:
    sim, clock = engine()
    sim.add(1, list(range(1, 9)), GREEDY)
    sim.step([1])
    free = sim.memory().device_blocks_free
    sim.suspend(1, HandlingStrategy.PRESERVE)
    with pytest.raises(EngineError, match="suspended"):
        sim.step([1])
    assert sim.memory().device_blocks_free == free
    sim.resume(1)
    before = clock.now()
    sim.step([1])
    assert clock.now() - before == pytest.approx(0.01 + 0.002)


def test_swap_moves_blocks_to_the_host_and_charges_the_transfer() -> None:
    bytes_per_block = SimulatedEngineConfig(eos_token_id=EOS).bytes_per_block
    sim, clock = engine(LATENCY.model_copy(update={"swap_bytes_per_s": bytes_per_block / 0.005}))
    sim.add(1, list(range(1, 9)), GREEDY)  # 8 tokens: 2 blocks, then a third on decode
    sim.step([1])
    own = 16 - sim.memory().device_blocks_free
    sim.suspend(1, HandlingStrategy.SWAP)
    memory = sim.memory()
    assert memory.device_blocks_free == 16 and memory.host_blocks_free == 16 - own
    sim.resume(1)
    before = clock.now()
    out = sim.step([1])
    assert out[0].token_id == 8
    # swap out + swap in of `own` blocks, then one decode
    assert clock.now() - before == pytest.approx(2 * own * 0.005 + 0.01 + 0.002)
    assert sim.stats.swapped_out_blocks == sim.stats.swapped_in_blocks == own


def test_discard_frees_blocks_and_recomputes_what_the_cache_lost() -> None:
    sim, clock = engine(device_blocks=3)
    sim.add(1, list(range(1, 9)), GREEDY)
    sim.step([1])
    sim.suspend(1, HandlingStrategy.DISCARD)
    assert sim.memory().device_blocks_free == 3
    sim.add(2, [20, 21, 22, 23, 24], GREEDY)  # 2 blocks: one of 1's is reallocated
    sim.abort(2)
    sim.resume(1)
    before = clock.now()
    out = sim.step([1])
    assert out[0].token_id == 8  # same continuation: ids were kept
    # its first block was still cached; the second block's 4 tokens are recomputed
    # with the one sampled before the discard
    assert sim.stats.recomputed_tokens == 4
    assert clock.now() - before == pytest.approx(0.01 + 5 * 0.001)


def test_out_of_memory_on_add_and_resume() -> None:
    sim, _ = engine(device_blocks=4, host_blocks=0)
    with pytest.raises(OutOfKvMemory):
        sim.add(1, list(range(1, 30)), GREEDY)
    sim.add(2, list(range(1, 9)), GREEDY)  # 2 blocks
    sim.step([2])
    sim.suspend(2, HandlingStrategy.SWAP)  # no host room: discarded
    sim.add(3, list(range(21, 33)), GREEDY)  # 3 of the 4 blocks
    with pytest.raises(OutOfKvMemory, match="resume"):
        sim.resume(2)
    sim.abort(3)
    sim.resume(2)
    assert run_to_end(sim, [2])[2] == [8, 9, 8, EOS]


def test_growth_past_memory_preempts_the_latest_and_loses_no_token() -> None:
    # 2 blocks each fill the device; both grow to 3: the first decode evicts the
    # later-listed, latest-admitted generation, which comes back once 1 finishes
    sim, _ = engine(device_blocks=4, host_blocks=0, preemption_strategy=HandlingStrategy.DISCARD)
    sim.add(1, [1, 2, 3, 4, 5, 6, 7, 8], GREEDY)
    sim.add(2, [1, 2, 3, 4, 5, 6, 7, 9], GREEDY)
    out = run_to_end(sim, [1, 2])
    assert out == {1: [7, 8, 9, 8, EOS], 2: [7, 8, 9, 9, EOS]}
    assert sim.stats.preemptions == 1
    # nothing recomputed: 2's first block held the same content as 1's (shared when
    # it came back) and its second was still cached
    assert sim.stats.recomputed_tokens == 0
    assert sim.memory().device_blocks_free == 4


def test_abort_frees_at_once_and_unknown_ids_are_errors() -> None:
    sim, _ = engine()
    sim.add(1, list(range(1, 9)), GREEDY)
    sim.abort(1)
    assert sim.memory().device_blocks_free == 16
    with pytest.raises(UnknownGeneration):
        sim.abort(1)
    with pytest.raises(UnknownGeneration):
        sim.step([1])
    with pytest.raises(EngineError, match="already live"):
        sim.add(2, [1], GREEDY)
        sim.add(2, [1], GREEDY)


def test_paper_profile_matches_table_1() -> None:
    model = PAPER_LLAMA3_8B_RTX4090
    assert model.iteration_seconds(2884, 0, 0) == pytest.approx(0.328, rel=1e-6)
    assert model.iteration_seconds(0, 1, 2900) == pytest.approx(0.022, rel=0.01)
    assert model.iteration_seconds(0, 0, 0) == 0.0


def test_latency_model_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="decode_s"):
        LatencyModel(decode_s=-1.0)


def test_a_preserved_generation_is_swapped_out_rather_than_stall_the_batch() -> None:
    """The device held by a generation suspended with `preserve` (its robot moving):
    the running one that must grow swaps it out, with the transfer charged, and it
    resumes from the host with its output unchanged."""
    sim, _ = engine(device_blocks=4)
    sim.add(1, [1, 2, 3, 4, 5, 6, 7, 8], GREEDY)  # 2 blocks each: the device is full
    sim.add(2, [1, 2, 3, 4, 5, 6, 7, 9], GREEDY)
    first = {o.gen_id: o.token_id for o in sim.step([1, 2])}
    sim.suspend(1, HandlingStrategy.PRESERVE)
    out = {1: [first[1]], 2: [first[2]]}
    for _ in range(10):  # bounded: without evicting 1, these steps ran nothing
        for o in sim.step([2]):
            out[2].append(o.token_id)
        if out[2][-1] == EOS:
            break
    assert out[2] == [7, 8, 9, 9, EOS]
    assert sim.stats.swapped_out_blocks == 2
    sim.resume(1)
    assert sim.stats.swapped_in_blocks == 2
    out[1] += run_to_end(sim, [1])[1]
    assert out[1] == [7, 8, 9, 8, EOS]
    assert sim.memory().device_blocks_free == 4
    assert sim.memory().host_blocks_free == 16


def test_resume_evicts_suspended_generations_never_runnable_ones() -> None:
    sim, _ = engine(device_blocks=3)
    sim.add(1, [1, 2, 3, 4, 5, 6, 7, 8], GREEDY)  # 2 blocks each
    sim.step([1])
    sim.suspend(1, HandlingStrategy.SWAP)
    sim.add(2, [1, 2, 3, 4, 5, 6, 7, 9], GREEDY)
    sim.step([2])
    with pytest.raises(OutOfKvMemory, match="resume"):  # 2 is runnable
        sim.resume(1)
    assert sim.memory().device_blocks_free == 1  # nothing was evicted
    sim.suspend(2, HandlingStrategy.PRESERVE)
    sim.resume(1)  # swaps 2 out
    assert sim.stats.swapped_out_blocks == 4
    assert run_to_end(sim, [1])[1] == [8, 9, 8, EOS]


def test_a_generation_outgrowing_the_device_fails_instead_of_idling() -> None:
    sim, _ = engine(device_blocks=2)
    sim.add(1, [1, 2, 3, 4, 5, 6, 7, 8], GREEDY)  # 2 blocks; the first decode needs 3
    sim.step([1])
    with pytest.raises(GenerationsFailed, match="generation 1 does not fit") as failed:
        sim.step([1])
    assert list(failed.value.failures) == [1]
    assert sim.memory().device_blocks_free == 2  # ended: its KV is free


def test_a_preempted_generation_comes_back_by_evicting_a_suspended_one() -> None:
    """The replay livelock: 2 was preempted, then 1 was suspended holding the device;
    a step of 2 must swap 1 out and bring 2 back, not return nothing forever."""
    sim, clock = engine(device_blocks=4)
    sim.add(1, [1, 2, 3, 4, 5, 6, 7, 8], GREEDY)
    sim.add(2, [1, 2, 3, 4, 5, 6, 7, 9], GREEDY)
    sim.step([1, 2])
    (o,) = sim.step([1, 2])  # 1 grows to 3 blocks: 2, listed last, is swapped out
    assert o.gen_id == 1 and sim.stats.preemptions == 1
    sim.suspend(1, HandlingStrategy.PRESERVE)
    before = clock.now()
    assert [o.token_id for o in sim.step([2])] == [8]
    assert clock.now() > before
    assert run_to_end(sim, [2])[2] == [9, 9, EOS]
    sim.resume(1)
    assert run_to_end(sim, [1])[1] == [9, 8, EOS]


def test_add_swaps_out_suspended_generations_never_runnable_ones() -> None:
    sim, _ = engine(device_blocks=4)
    sim.add(1, [1, 2, 3, 4, 5, 6, 7, 8], GREEDY)  # 2 blocks each
    sim.add(2, [1, 2, 3, 4, 5, 6, 7, 9], GREEDY)
    sim.step([1, 2])
    assert not sim.can_admit(8)  # both runnable
    with pytest.raises(OutOfKvMemory):
        sim.add(3, [1, 2, 3, 4, 5, 6, 7, 7], GREEDY)
    assert sim.stats.preemptions == 0
    sim.suspend(1, HandlingStrategy.PRESERVE)
    assert sim.can_admit(8) and not sim.can_admit(12)
    sim.add(3, [1, 2, 3, 4, 5, 6, 7, 7], GREEDY)
    assert sim.stats.swapped_out_blocks == 2
    assert run_to_end(sim, [3])[3] == [7, 8, 9, 7, EOS]


def test_a_prompt_the_script_does_not_know_is_refused_holding_nothing() -> None:
    def strict(prompt: Sequence[int]) -> list[int]:
        if prompt[0] == 99:
            raise ValueError("no plan for this prompt")
        return list(OUTPUT)

    sim = SimulatedEngine(
        VirtualClock(), LATENCY, strict, SimulatedEngineConfig(eos_token_id=EOS, block_size=4)
    )
    before = sim.memory()
    with pytest.raises(ValueError, match="no plan"):
        sim.add(1, [99, 1, 2, 3, 4], GREEDY)
    assert sim.memory() == before
    with pytest.raises(UnknownGeneration):
        sim.token_ids(1)
    sim.add(1, [1, 2, 3], GREEDY)  # the id is free again
    assert run_to_end(sim, [1])[1] == [*OUTPUT, EOS]
