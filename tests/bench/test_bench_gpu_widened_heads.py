"""bench/gpu_widened_heads.py: its float32 attention reference on a shuffled paged
cache is causal GQA attention (what FlashInfer is held to on a GPU), and on a host
without a GPU it still compares the plans and says why FlashInfer did not run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from gpu_widened_heads import KV_HEADS, PAGE, QO_HEADS, _paged, _reference, main  # noqa: E402


def test_the_reference_is_causal_gqa_attention_over_the_paged_cache() -> None:
    torch.manual_seed(0)
    lengths, q_lengths = [3, 40, 17], [1, 9, 17]
    kv = _paged(lengths, 64, torch.float32, "cpu")
    assert not torch.equal(kv["indices"], torch.arange(len(kv["indices"])).int())  # shuffled
    q = torch.randn(sum(q_lengths), QO_HEADS, 64)
    got = _reference(q, kv, lengths, q_lengths)
    start = 0
    for i, (n, m) in enumerate(zip(lengths, q_lengths, strict=True)):
        pages = kv["indices"][kv["indptr"][i] : kv["indptr"][i + 1]].long()
        assert len(pages) == -(-n // PAGE)
        k, v = (kv["cache"][pages, j].flatten(0, 1)[:n].transpose(0, 1) for j in (0, 1))
        queries = q[start : start + m].transpose(0, 1)  # [heads, m, d]
        mask = torch.ones(m, n, dtype=torch.bool).tril(n - m)
        expected = F.scaled_dot_product_attention(
            queries, k, v, attn_mask=mask, enable_gqa=QO_HEADS != KV_HEADS
        ).transpose(0, 1)
        assert torch.allclose(got[start : start + m], expected, atol=1e-5)
        start += m


def test_without_a_gpu_plans_are_compared_and_flashinfer_says_why_not(tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    assert main(["--device", "cpu", "--tasks", "2", "--new-tokens", "12", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (plans,) = result["plans"]
    assert plans["dtype"] == "float32" and plans["tasks"] == 2
    assert plans["widened_same_plan"] == 2 and plans["plan_tokens"] > 12
    assert 0 < plans["max_logit_gap_widened_vs_original"] < 1e-3
    assert [row["head_dim"] for row in result["flashinfer"]] == [64, 32]
    assert all("error" in row for row in result["flashinfer"])  # no GPU kernels on a CPU
    assert result["machine"]["matmul_gflops_fp32"] > 0
