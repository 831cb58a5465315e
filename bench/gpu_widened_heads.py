"""The planner with its heads widened for FlashInfer, checked on a GPU host.

vLLM's FlashInfer attention serves heads 64+ wide; the GPU image widens the
planner's 32-wide heads by zero padding (robot_models/checkpoints/widen_heads.py).
This checks, on the host's GPU:

1. `plans`: HF transformers (the reference implementation) plans the LRTrace tasks
   greedily on the original and the widened planner, in each dtype: how many tasks
   get the same tokens, and the largest logit difference over the prompts. In
   bfloat16 the original's own drift from float32 is given beside it: the widening
   should add nothing beyond what bfloat16 itself changes.
2. `flashinfer`: FlashInfer's paged decode and prefill wrappers (what vLLM's
   FlashInfer backend runs) at the widened planner's shape, and at the original's 32
   (which vLLM refuses to select), against a float32 torch reference on the same
   paged cache. Said, not skipped silently, where flashinfer is not installed.
3. `machine`: the device, torch's version and its matmul peak (bfloat16 on a GPU).

    PYTHONPATH=. python bench/gpu_widened_heads.py [--device cuda] [--tasks 11]

Writes bench/results/gpu_widened_heads.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.checkpoints.widen_heads import widen
from robot_models.dataset import LRTRACE_TASKS
from robot_models.prompts import format_request, prompt_prefix
from timely_core.engine.vllm.config import VllmConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_machine import gpu_matmul_tflops, matmul_gflops

RESULTS = Path(__file__).resolve().parent / "results"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# the planner's attention: 6 query heads sharing 2 KV heads, in pages of the vLLM
# engine's block size
QO_HEADS, KV_HEADS = 6, 2
PAGE = VllmConfig().block_size


def prompts(path: Path, count: int) -> list[list[int]]:
    """The first `count` LRTrace tasks' prompts (prefix + request, each encoded alone)."""
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    return [
        tokenizer.encode(prompt_prefix(t.robot_type)).ids
        + tokenizer.encode(format_request(t.scene, t.instruction)).ids
        for t in LRTRACE_TASKS[:count]
    ]


def _load(path: Path, dtype: torch.dtype, device: str) -> Any:
    from transformers import LlamaForCausalLM

    model: Any = LlamaForCausalLM.from_pretrained(path, dtype=dtype)
    return model.to(device).eval()


def _greedy(model: Any, ids: list[int], new_tokens: int, device: str) -> list[int]:
    inputs = torch.tensor([ids], device=device)
    eos, pad = model.config.eos_token_id, model.config.pad_token_id
    with torch.no_grad():
        out = model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            max_new_tokens=new_tokens,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=pad,
        )
    return [int(t) for t in out[0, len(ids) :].tolist()]


def _logits(model: Any, ids: list[int], device: str) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids], device=device)).logits[0].float()


def compare_plans(
    original: Path, widened: Path, dtypes: list[str], count: int, new_tokens: int, device: str
) -> list[dict[str, Any]]:
    """Per dtype: tasks planned alike by the widened and the original planner (and, for
    a half dtype, by the original in it and in float32), and the logit differences."""
    tasks = prompts(original, count)
    reference = _load(original, torch.float32, device)
    ref_plans = [_greedy(reference, ids, new_tokens, device) for ids in tasks]
    ref_logits = [_logits(reference, ids, device) for ids in tasks]
    rows = []
    for name in dtypes:
        narrow, wide = _load(original, DTYPES[name], device), _load(widened, DTYPES[name], device)
        narrow_plans = [_greedy(narrow, ids, new_tokens, device) for ids in tasks]
        wide_plans = [_greedy(wide, ids, new_tokens, device) for ids in tasks]
        gap = drift = 0.0
        for ids, base in zip(tasks, ref_logits, strict=True):
            narrow_logits, wide_logits = _logits(narrow, ids, device), _logits(wide, ids, device)
            gap = max(gap, (wide_logits - narrow_logits).abs().max().item())
            drift = max(drift, (narrow_logits - base).abs().max().item())
        rows.append(
            {
                "dtype": name,
                "tasks": len(tasks),
                "widened_same_plan": sum(
                    a == b for a, b in zip(wide_plans, narrow_plans, strict=True)
                ),
                "original_same_as_float32": sum(
                    a == b for a, b in zip(narrow_plans, ref_plans, strict=True)
                ),
                "widened_same_as_float32": sum(
                    a == b for a, b in zip(wide_plans, ref_plans, strict=True)
                ),
                "max_logit_gap_widened_vs_original": gap,
                "max_logit_drift_original_vs_float32": drift,
                "plan_tokens": sum(len(p) for p in narrow_plans),
            }
        )
        del narrow, wide
    return rows


def _paged(lengths: list[int], head_dim: int, dtype: torch.dtype, device: str) -> dict[str, Any]:
    """A paged KV cache (NHD, pages shuffled) holding `lengths` tokens per sequence."""
    pages = [math.ceil(n / PAGE) for n in lengths]
    order = torch.randperm(sum(pages), device=device).int()
    cache = torch.randn(sum(pages), 2, PAGE, KV_HEADS, head_dim, device=device).to(dtype)
    indptr = torch.tensor([0, *torch.tensor(pages).cumsum(0).tolist()], device=device).int()
    last = torch.tensor([n - (p - 1) * PAGE for n, p in zip(lengths, pages, strict=True)])
    return {"cache": cache, "indices": order, "indptr": indptr, "last": last.int().to(device)}


def _reference(
    q: torch.Tensor, kv: dict[str, Any], lengths: list[int], q_lengths: list[int]
) -> torch.Tensor:
    """Causal GQA attention in float32, each sequence's queries its last tokens."""
    outs, start = [], 0
    for i, (n, m) in enumerate(zip(lengths, q_lengths, strict=True)):
        rows = kv["indices"][kv["indptr"][i] : kv["indptr"][i + 1]].long()
        k = kv["cache"][rows, 0].flatten(0, 1)[:n].float()  # [n, kv, d]
        v = kv["cache"][rows, 1].flatten(0, 1)[:n].float()
        group = QO_HEADS // KV_HEADS
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        queries = q[start : start + m].float()  # [m, qo, d]
        scores = torch.einsum("mhd,nhd->hmn", queries, k) / math.sqrt(q.shape[-1])
        visible = (
            torch.arange(n, device=q.device)[None, :]
            <= (n - m + torch.arange(m, device=q.device))[:, None]
        )
        scores = scores.masked_fill(~visible, float("-inf"))
        outs.append(torch.einsum("hmn,nhd->mhd", scores.softmax(-1), v))
        start += m
    return torch.cat(outs)


def flashinfer_attention(head_dim: int, dtype: torch.dtype, device: str) -> dict[str, Any]:
    """FlashInfer's batch decode and causal prefill on a paged cache vs the reference."""
    import flashinfer

    torch.manual_seed(head_dim)
    lengths, q_lengths = [1, 37, 300, 1100], [1, 5, 40, 64]
    kv = _paged(lengths, head_dim, dtype, device)
    workspace = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device=device)
    result: dict[str, Any] = {
        "head_dim": head_dim,
        "page_size": PAGE,
        "flashinfer": flashinfer.__version__,
    }
    started = time.perf_counter()
    decode = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
    decode.plan(
        kv["indptr"], kv["indices"], kv["last"], QO_HEADS, KV_HEADS, head_dim, PAGE,
        q_data_type=dtype, kv_data_type=dtype,
    )  # fmt: skip
    q = torch.randn(len(lengths), QO_HEADS, head_dim, device=device).to(dtype)
    out = decode.run(q, kv["cache"])
    expected = _reference(q, kv, lengths, [1] * len(lengths))
    result["decode_max_error"] = (out.float() - expected).abs().max().item()
    prefill = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD")
    qo_indptr = torch.tensor([0, *torch.tensor(q_lengths).cumsum(0).tolist()], device=device)
    prefill.plan(
        qo_indptr.int(), kv["indptr"], kv["indices"], kv["last"], QO_HEADS, KV_HEADS,
        head_dim, PAGE, causal=True, q_data_type=dtype, kv_data_type=dtype,
    )  # fmt: skip
    q = torch.randn(sum(q_lengths), QO_HEADS, head_dim, device=device).to(dtype)
    out = prefill.run(q, kv["cache"])
    expected = _reference(q, kv, lengths, q_lengths)
    result["prefill_max_error"] = (out.float() - expected).abs().max().item()
    result["seconds_with_jit_builds"] = time.perf_counter() - started
    return result


def flashinfer_checks(dtype: torch.dtype, device: str) -> list[dict[str, Any]]:
    """Each head width's check, or what stopped it (not installed, not built, refused)."""
    rows = []
    for head_dim in (64, 32):
        try:
            rows.append(flashinfer_attention(head_dim, dtype, device))
        except Exception as exc:  # each failure is the finding: recorded, the next tried
            rows.append({"head_dim": head_dim, "error": f"{type(exc).__name__}: {exc}"[:600]})
    return rows


def machine(device: str) -> dict[str, Any]:
    """The device, torch's version and the matmul peak (bf16 8192^3 on a GPU)."""
    info: dict[str, Any] = {"device": device, "torch": torch.__version__}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(device)
        info["matmul_tflops_bf16"] = gpu_matmul_tflops(device)
    else:
        info["matmul_gflops_fp32"] = matmul_gflops()
    return info


def show(result: dict[str, Any]) -> None:
    console = Console()
    table = Table(title="LRTrace plans, widened (64) vs original (32) heads, HF greedy")
    for column in ("dtype", "same plan", "orig = fp32", "wide = fp32", "logit gap", "bf16 drift"):
        table.add_column(column)
    for row in result["plans"]:
        n = row["tasks"]
        table.add_row(
            row["dtype"],
            f"{row['widened_same_plan']}/{n}",
            f"{row['original_same_as_float32']}/{n}",
            f"{row['widened_same_as_float32']}/{n}",
            f"{row['max_logit_gap_widened_vs_original']:.2e}",
            f"{row['max_logit_drift_original_vs_float32']:.2e}",
        )
    console.print(table)
    attention = Table(
        title=f"FlashInfer paged attention vs float32 reference ({result['attention_dtype']})"
    )
    for column in ("head dim", "decode max err", "prefill max err", "or"):
        attention.add_column(column)
    for row in result["flashinfer"]:
        attention.add_row(
            str(row["head_dim"]),
            f"{row['decode_max_error']:.2e}" if "decode_max_error" in row else "-",
            f"{row['prefill_max_error']:.2e}" if "prefill_max_error" in row else "-",
            row.get("error", ""),
        )
    console.print(attention)
    console.print(result["machine"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cuda = torch.cuda.is_available()
    parser.add_argument("--device", default="cuda" if cuda else "cpu")
    parser.add_argument("--dtypes", default="float32,bfloat16" if cuda else "float32")
    parser.add_argument("--tasks", type=int, default=len(LRTRACE_TASKS))
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_widened_heads.json")
    args = parser.parse_args(argv)
    dtypes = args.dtypes.split(",")
    unknown = sorted(set(dtypes) - DTYPES.keys())
    if unknown:
        parser.error(f"--dtypes: {', '.join(unknown)} not among {', '.join(DTYPES)}")
    original = default_planner_path()
    attention_dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    result: dict[str, Any] = {"machine": machine(args.device), "attention_dtype": attention_dtype}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        widened = widen(original, Path(folder) / "planner-hd64", 64)
        result["plans"] = compare_plans(
            original, widened, dtypes, args.tasks, args.new_tokens, args.device
        )
    args.out.write_text(json.dumps(result, indent=2) + "\n")  # kept if the JIT builds run long
    result["flashinfer"] = flashinfer_checks(DTYPES[attention_dtype], args.device)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    show(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
