"""Prefill cascade: prompts opening with the same cached blocks attend them together,
with the same result as attending each prompt's whole context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from engine_testkit import check_memory, drive, hf_greedy, random_prompts

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.torch.model.attention import AttentionBatch
from timely_core.engine.torch.model.prefill_cascade import (
    CascadeSpan,
    SharedPrefill,
    shared_prefill_attention,
)
from timely_core.engine.torch.model_runner import Chunk

NEW = 8


def _reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor, first: int
) -> torch.Tensor:
    """Causal attention of queries at positions first.. over `slots` (positions 0..)."""
    length = q.shape[0]
    visible = torch.arange(slots.shape[0])[None, :] <= torch.arange(first, first + length)[:, None]
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1).unsqueeze(0),
        k[:, slots].unsqueeze(0),
        v[:, slots].unsqueeze(0),
        attn_mask=visible,
        enable_gqa=True,
    )
    return out[0].transpose(0, 1)


def _folded_mask(first: int, length: int, private_from: int, end: int, group: int) -> torch.Tensor:
    visible = (
        torch.arange(private_from, end)[None, :] <= torch.arange(first, first + length)[:, None]
    )
    mask = torch.zeros(visible.shape).masked_fill_(~visible, -torch.inf)
    return mask.repeat_interleave(group, dim=0)


@pytest.mark.parametrize(("heads", "kv_heads"), [(6, 2), (4, 4)])
@pytest.mark.parametrize("shared_is_run", [True, False])
def test_engine_cascade_equals_attention_over_each_whole_context(
    heads: int, kv_heads: int, shared_is_run: bool
) -> None:
    torch.manual_seed(1)
    dim, slots, group = 16, 200, heads // kv_heads
    k_cache, v_cache = torch.randn(kv_heads, slots, dim), torch.randn(kv_heads, slots, dim)
    shared = torch.arange(20, 52) if shared_is_run else torch.randperm(100)[:32] + 100
    # chunk 1: 5 cached private tokens, then 7 new ones; chunk 2: 3 new tokens only
    privates = [
        torch.tensor([60, 61, 62, 63, 64, 70, 71, 72, 73, 74, 75, 76]),
        torch.tensor([90, 91, 92]),
    ]
    news = [7, 3]
    q = torch.randn(2 + sum(news), heads, dim)  # two rows of something else first
    spans, row = [], 2
    for private, new in zip(privates, news, strict=True):
        end = 32 + private.shape[0]
        first = end - new
        spans.append(CascadeSpan(row, new, private, None, _folded_mask(first, new, 32, end, group)))
        row += new
    batch = SharedPrefill(2, row, shared, 20 if shared_is_run else None, tuple(spans))

    got = shared_prefill_attention(q, k_cache, v_cache, batch)

    for span, private in zip(spans, privates, strict=True):
        context = torch.cat([shared, private])
        first = context.shape[0] - span.length
        want = _reference(
            q[span.start : span.start + span.length], k_cache, v_cache, context, first
        )
        rows = slice(span.start - 2, span.start - 2 + span.length)
        assert torch.allclose(got[rows], want, atol=1e-5)


def _engine(path: Path, **kw: Any) -> TorchEngine:
    return TorchEngine(
        path, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22, **kw)
    )


def _spy_batches(engine: TorchEngine, monkeypatch: pytest.MonkeyPatch) -> list[AttentionBatch]:
    seen: list[AttentionBatch] = []
    forward = engine.model.forward

    def spy(*args: Any) -> torch.Tensor:
        seen.append(args[3])
        return forward(*args)

    monkeypatch.setattr(engine.model, "forward", spy)
    return seen


def test_engine_burst_over_two_prefixes_forms_two_cascades_and_matches_hf(
    qwen2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of drone and arm prompts, a cold prompt and running decodes in one
    iteration: one cascade per prefix, and every output token as transformers'."""
    drone = [(7 * i + 5) % 500 + 4 for i in range(37)]  # partial last block
    arm = [(11 * i + 3) % 500 + 4 for i in range(40)]  # block-aligned
    tails = random_prompts(5, 6, 20)
    prompts = [drone + tails[0], arm + tails[1], drone + tails[2], arm + tails[3]]
    prompts += [drone + tails[4], tails[5]]  # arrives early and decodes; a cold prompt
    engine = _engine(qwen2_path)
    engine.register_prefix("drone", drone)
    engine.register_prefix("arm", arm)
    batches = _spy_batches(engine, monkeypatch)
    params = SamplingParams(max_tokens=NEW)
    live: dict[int, list[int]] = {}
    engine.add(4, prompts[4], params, prefix_id="drone")
    live[4] = list(prompts[4])
    for o in engine.step([4]):
        live[4].append(o.token_id)
    for i in (0, 1, 2, 3, 5):
        prefix = None if i == 5 else ("drone" if i % 2 == 0 else "arm")
        engine.add(i, prompts[i], params, prefix_id=prefix)
        live[i] = list(prompts[i])
    while any(i in engine._gens for i in live):
        for o in engine.step([i for i in live if i in engine._gens]):
            live[o.gen_id].append(o.token_id)
    burst = batches[1]
    assert burst.decode is not None and burst.decode.size == 1
    assert len(burst.shared) == 2
    assert sorted(s.shared_slots.shape[0] for s in burst.shared) == [32, 40]
    assert [len(s.spans) for s in burst.shared] == [2, 2]
    assert len(burst.spans) == 1  # the cold prompt, attended on its own
    assert [live[i] for i in range(6)] == [hf_greedy(qwen2_path, p, NEW) for p in prompts]
    check_memory(engine)


def test_engine_cascade_logits_equal_one_by_one_logits(llama_path: Path) -> None:
    prefix = [(13 * i) % 500 + 4 for i in range(64)]
    prompts = [prefix + tail for tail in random_prompts(8, 5, 30)]
    logits = []
    for cascade in (True, False):
        engine = _engine(llama_path)
        engine.runner._cascade = cascade
        engine.register_prefix("arm", prefix)
        for i, p in enumerate(prompts):
            engine.add(i, p, SamplingParams(max_tokens=NEW), prefix_id="arm")
        states = [engine.generation(i) for i in range(len(prompts))]
        chunks = [Chunk(s, s.num_computed, len(s.token_ids) - s.num_computed) for s in states]
        with torch.inference_mode():
            logits.append(engine.runner.run(chunks)[1])
    assert torch.allclose(logits[0], logits[1], atol=1e-5)


def test_engine_lone_prompt_after_a_prefix_is_attended_on_its_own(
    qwen2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = [(3 * i + 1) % 500 + 4 for i in range(40)]
    engine = _engine(qwen2_path)
    engine.register_prefix("drone", prefix)
    batches = _spy_batches(engine, monkeypatch)
    prompts = [prefix + random_prompts(2, 1, 20)[0]]
    got = drive(engine, prompts, SamplingParams(max_tokens=NEW), prefix_id="drone")
    assert got == [hf_greedy(qwen2_path, prompts[0], NEW)]
    assert batches[0].shared == () and len(batches[0].spans) == 1
