"""The cost of one engine iteration, as the simulator charges it: one linear model
with one set of names, used by the simulated engine and, extended with where it
came from, by LRTrace's latency profiles.

`seconds = iteration_s + service_overhead_s + prefill_token_s * prefill_tokens
           + decode_s * decodes + context_token_s * context_tokens`

for a non-empty iteration (`context_tokens`: the KV entries the iteration's
generations attend to; `service_overhead_s`: the planning service's own time per
iteration, which the engine waits through). KV swaps cost their bytes over
`swap_bytes_per_s`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from timely_core.engine.block_manager import DEFAULT_BLOCK_SIZE


class LatencyModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    iteration_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)  # fixed per iteration
    prefill_token_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    decode_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)  # per decoded token
    context_token_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    service_overhead_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    swap_bytes_per_s: float = Field(default=17.9e9, gt=0, allow_inf_nan=False)

    def iteration_seconds(self, prefill_tokens: int, decodes: int, context_tokens: int) -> float:
        """Seconds for one iteration computing `prefill_tokens` prompt tokens and
        `decodes` decode tokens over `context_tokens` tokens of KV (0 if empty)."""
        if prefill_tokens == 0 and decodes == 0:
            return 0.0
        return (
            self.iteration_s
            + self.service_overhead_s
            + self.prefill_token_s * prefill_tokens
            + self.decode_s * decodes
            + self.context_token_s * context_tokens
        )

    def swap_seconds(self, blocks: int, bytes_per_block: int) -> float:
        """Seconds to copy `blocks` KV blocks between device and host."""
        return blocks * (bytes_per_block / self.swap_bytes_per_s)


@dataclass(frozen=True)
class LatencyKvCosts:
    """A `LatencyModel`'s costs of handling KV, as scheduling/kv_strategy.py's
    waste equations need them (its `KvCostModel`)."""

    latency: LatencyModel
    bytes_per_token: float

    def forward_s(self, tokens: int) -> float:
        """T_fwd: seconds an iteration gains by recomputing `tokens` tokens (marginal:
        the recompute rides in an iteration that runs anyway, chunked prefill)."""
        return tokens * (self.latency.prefill_token_s + self.latency.context_token_s)

    def swap_s(self, tokens: int) -> float:
        """T_swap: seconds to copy `tokens` tokens of KV one way."""
        return tokens * self.bytes_per_token / self.latency.swap_bytes_per_s


# The paper's setting, Llama3-8B fp16 on an RTX 4090 (TimelyLLM Table 1): prefill of
# 2884 tokens 328 ms, then about 22 ms per decoded token. The split into coefficients
# uses the model's shape: KV per token = 32 layers x 8 KV heads x 128 dims x 2 (K, V) x
# 2 bytes = 128 KiB, read once per decode at the card's 1008 GB/s -> 1.3e-7 s per
# context token; a decode step of one sequence at ~2.9k context is then 21.5 ms fixed
# (weights streamed once per iteration) + one token's compute; the per-token compute is
# what prefill costs per token beyond that fixed part: (328 - 21.5) ms / 2884. Swap:
# §4.1, 170 MB restored in 9.5 ms.
# The serving configuration is the one TimelyLLM's code gives vLLM for every policy,
# the vLLM baseline included (rtengine/vllm_llm_scheduler.py in
# github.com/MarkoMile/TimelyLLM, a port that keeps upstream's values, hard-coded for
# the 24 GB RTX 4090: EngineArgs max_num_seqs=8, gpu_memory_utilization=0.8,
# max_model_len=4000, enable_prefix_caching=True): at most 8 sequences per iteration;
# KV capacity = 0.8 x 24 GiB minus 16.1 GB of weights minus ~1.5 GB of activations
# and runtime, over 128 KiB per token; without chunked prefill vLLM batches
# max(max_model_len, 2048) = 4000 tokens per iteration. This is the one definition;
# lrtrace's `paper-llama3-8b-rtx4090` latency profile is built from it.
PAPER_KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2
PAPER_KV_BYTES_PER_BLOCK = PAPER_KV_BYTES_PER_TOKEN * DEFAULT_BLOCK_SIZE
PAPER_KV_CAPACITY_TOKENS = int((0.8 * 24 * 2**30 - 16.1e9 - 1.5e9) / PAPER_KV_BYTES_PER_TOKEN)
PAPER_SWAP_BYTES_PER_S = 170e6 / 9.5e-3
PAPER_MAX_BATCHED_TOKENS = 4000
PAPER_MAX_NUM_SEQS = 8
PAPER_LLAMA3_8B_RTX4090 = LatencyModel(
    iteration_s=0.0215,
    prefill_token_s=(0.328 - 0.0215) / 2884,
    decode_s=(0.328 - 0.0215) / 2884,
    context_token_s=PAPER_KV_BYTES_PER_TOKEN / 1008e9,
    swap_bytes_per_s=PAPER_SWAP_BYTES_PER_S,
)
