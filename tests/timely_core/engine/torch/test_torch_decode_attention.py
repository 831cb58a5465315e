"""Decode attention: the cascade over shared prefix blocks equals plain attention."""

from __future__ import annotations

from pathlib import Path

import torch

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.model.decode_attention import DecodeGroup, decode_attention
from timely_core.engine.torch.model_runner import Chunk


def test_engine_cascade_over_shared_blocks_equals_plain_attention() -> None:
    torch.manual_seed(0)
    kv_heads, heads, dim, slots = 2, 8, 16, 64
    k_cache, v_cache = torch.randn(kv_heads, slots, dim), torch.randn(kv_heads, slots, dim)
    q = torch.randn(3, heads, dim)
    shared = torch.arange(10, 30)  # 20 slots every generation reads first
    private = [torch.tensor([40, 41, 42]), torch.tensor([50]), torch.tensor([60, 61])]
    width = max(len(p) for p in private)
    padded = torch.stack([torch.cat([p, p.new_zeros(width - len(p))]) for p in private])
    valid = torch.arange(width)[None, :] < torch.tensor([len(p) for p in private])[:, None]
    mask = torch.zeros(valid.shape).masked_fill_(~valid, -torch.inf)[:, None, :]
    cascade = decode_attention(
        q, k_cache, v_cache, DecodeGroup(3, width, padded, None, mask, shared, 10)
    )
    full = [torch.cat([shared, p]) for p in private]
    full_width = max(len(f) for f in full)
    full_padded = torch.stack([torch.cat([f, f.new_zeros(full_width - len(f))]) for f in full])
    full_valid = torch.arange(full_width)[None, :] < torch.tensor([len(f) for f in full])[:, None]
    full_mask = torch.zeros(full_valid.shape).masked_fill_(~full_valid, -torch.inf)[:, None, :]
    plain = decode_attention(
        q, k_cache, v_cache, DecodeGroup(3, full_width, full_padded, None, full_mask)
    )
    reference = torch.nn.functional.scaled_dot_product_attention(
        q[:, :, None, :],
        k_cache[:, full[0]].unsqueeze(0),
        v_cache[:, full[0]].unsqueeze(0),
        enable_gqa=True,
    )[0, :, 0]
    assert torch.allclose(cascade, plain, atol=1e-5)
    assert torch.allclose(plain[0], reference, atol=1e-5)


def test_engine_decodes_sharing_a_prefix_use_the_cascade(qwen2_path: Path) -> None:
    engine = TorchEngine(
        qwen2_path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    prefix = [(13 * i) % 500 + 4 for i in range(40)]
    engine.register_prefix("robot", prefix)
    for i in range(3):
        engine.add(i, [*prefix, 100 + i, 7], SamplingParams(max_tokens=8), prefix_id="robot")
    engine.step([0, 1, 2])
    states = [engine.generation(i) for i in range(3)]
    group = engine.runner._decode_group([Chunk(s, s.num_computed, 1) for s in states])
    assert group.shared_slots is not None and group.shared_slots.shape[0] == 40
    assert group.context_slots is not None
    assert group.context_slots.shape == (3, 3)  # 2 prompt tokens + the new one each


def test_engine_lone_decode_over_runs_equals_gathered_attention() -> None:
    """A lone decode reads a context of several runs of blocks as views, one softmax
    over all of them: the same attention as gathering every slot."""
    torch.manual_seed(1)
    kv_heads, heads, dim = 2, 6, 16
    k_cache, v_cache = torch.randn(kv_heads, 200, dim), torch.randn(kv_heads, 200, dim)
    q = torch.randn(1, heads, dim)
    runs = ((0, 32), (96, 16), (48, 5))  # a shared prefix, then private blocks
    slots = torch.cat([torch.arange(s, s + n) for s, n in runs])
    length = slots.shape[0]
    pieces = decode_attention(
        q, k_cache, v_cache, DecodeGroup(1, length, None, None, None, runs=runs)
    )
    gathered = decode_attention(
        q, k_cache, v_cache, DecodeGroup(1, length, slots[None, :], None, None)
    )
    assert torch.allclose(pieces, gathered, atol=1e-6)


def test_engine_freed_blocks_come_back_in_order(qwen2_path: Path) -> None:
    """Blocks are freed last first, so the free stack hands them out again in
    ascending order: a rerun of the same prompt decodes over two runs of blocks
    (its cached prompt blocks, then fresh ones back to back), every time."""
    engine = TorchEngine(
        qwen2_path, EngineConfig(block_size=4, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    groups: list[DecodeGroup] = []
    decode_group = engine.runner._decode_group

    def recording(decodes: list[Chunk]) -> DecodeGroup:
        groups.append(decode_group(decodes))
        return groups[-1]

    engine.runner._decode_group = recording  # type: ignore[method-assign]
    prompt = [(7 * i) % 300 + 4 for i in range(30)]
    for gen_id in range(4):
        engine.add(gen_id, prompt, SamplingParams(max_tokens=14))
        for _ in range(14):
            engine.step([gen_id])
        runs = [None if g.runs is None else len(g.runs) for g in groups]
        assert all(n is not None and n <= (1 if gen_id == 0 else 2) for n in runs), runs
        groups.clear()


def test_engine_decodes_of_two_prefixes_attend_one_part_each(qwen2_path: Path) -> None:
    """Generations of two robot prefixes, interleaved, plus two without a prefix:
    one part per prefix, each with its own shared blocks (rows in a part need not
    be contiguous), one for the two that share nothing, and every token equals the
    generation decoded alone."""
    engine = TorchEngine(
        qwen2_path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    prefixes = {
        "drone": [(13 * i) % 500 + 4 for i in range(40)],
        "arm": [(17 * i) % 500 + 9 for i in range(48)],
    }
    for name, prefix in prefixes.items():
        engine.register_prefix(name, prefix)
    robots = ["drone", "arm", "drone", "arm", "drone", None, None]
    prompts = [[*(prefixes[r] if r else [3, 5, 8]), 100 + i, 7 + i] for i, r in enumerate(robots)]
    params = SamplingParams(max_tokens=10)
    for i, (robot, prompt) in enumerate(zip(robots, prompts, strict=True)):
        engine.add(i, prompt, params, prefix_id=robot)
    engine.step(list(range(len(robots))))
    states = [engine.generation(i) for i in range(len(robots))]
    group = engine.runner._decode_group([Chunk(s, s.num_computed, 1) for s in states])
    shared = sorted(
        p.group.shared_slots.shape[0] for p in group.parts if p.group.shared_slots is not None
    )
    assert shared == [40, 48]
    rows = sorted(
        tuple(range(len(robots))[p.rows]) if isinstance(p.rows, slice) else tuple(p.rows.tolist())
        for p in group.parts
    )
    assert rows == [(0, 2, 4), (1, 3), (5, 6)]
    together = {i: list(prompts[i]) for i in range(len(robots))}
    live = list(range(len(robots)))
    for i in live:  # the first tokens came from the prefill step above
        together[i].append(engine.token_ids(i)[-1])
    while live:
        for out in engine.step(live):
            together[out.gen_id].append(out.token_id)
            if out.finished:
                live.remove(out.gen_id)
    alone = TorchEngine(
        qwen2_path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    for i, prompt in enumerate(prompts):
        alone.add(100 + i, prompt, params)
        tokens = list(prompt)
        while True:
            (out,) = alone.step([100 + i])
            tokens.append(out.token_id)
            if out.finished:
                break
        assert tokens == together[i], robots[i]
