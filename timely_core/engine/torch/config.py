"""Configuration of the torch engine: KV budgets and per-iteration limits."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from timely_core.engine.block_manager import DEFAULT_BLOCK_SIZE
from timely_core.engine.protocol import HandlingStrategy
from timely_core.engine.sim.latency import LatencyModel

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


# The per-token prefill, context and swap coefficients of
# lrtrace/profiles/measured-torch-planner-cpu.json.
CPU_KV_COST_PROFILE = LatencyModel(
    prefill_token_s=1.29e-4, context_token_s=1.31e-7, swap_bytes_per_s=2.75e9
)


class EngineConfig(BaseModel):
    """How much KV memory the engine may use and how much work one `step` may do.

    Budgets are in bytes so the same config fits any checkpoint: the engine turns
    them into block counts from the model's layer count, KV heads and head size.
    Thread counts apply only inside engine calls and are restored after; block
    copies (swap, copy-on-write) always run on `small_step_threads`: they are
    memory-bound, and a second thread only adds a barrier.
    `preemption_strategy` is what `step` does to a running generation when a decode
    needs a block and none is free (swap falls back to discard when the host pool
    is full); it never crashes and never drops tokens.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    block_size: int = Field(default=DEFAULT_BLOCK_SIZE, ge=1, le=1024)
    # both pools are allocated (and resident) at construction
    device_kv_bytes: int = Field(default=128 * 2**20, gt=0)
    host_kv_bytes: int = Field(default=64 * 2**20, ge=0)
    max_batched_tokens: int = Field(default=2048, ge=1)
    max_generations: int = Field(default=64, ge=1)
    enable_prefix_caching: bool = True  # reuse KV of identical leading blocks by content hash
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    num_threads: int | None = Field(default=None, ge=1)  # None: torch's current setting
    # Iterations of at most `small_step_tokens` tokens (decodes) run on this many
    # threads: their ops are too small to amortise a thread barrier, which costs
    # the most on a shared, busy machine.
    small_step_threads: int | None = Field(default=1, ge=1)
    small_step_tokens: int = Field(default=64, ge=0)
    preemption_strategy: Literal[HandlingStrategy.SWAP, HandlingStrategy.DISCARD] = (
        HandlingStrategy.SWAP
    )
    # Rows under a grammar keep their unmasked choice (greedy argmax, or a draw when
    # top_p is 1) when the grammar allows it, the same token or the same distribution
    # (grammar_mask.py), so the mask is computed only for a refused one.
    grammar_unmasked_first: bool = True
    # What recomputing and swapping KV cost on this engine, for the service's choice
    # of each suspended generation's strategy (scheduling/kv_strategy.py). None: the
    # planner checkpoint's CPU profile (`lrtrace profile-engine`,
    # lrtrace/profiles/measured-torch-planner-cpu.json); give a GPU's own profile.
    kv_cost_profile: LatencyModel | None = None

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]
