"""Configuration of the in-process vLLM engine, checked before vLLM is imported."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from timely_core.engine.protocol import HandlingStrategy

# vLLM's CPU attention needs blocks of a multiple of 32 tokens
VLLM_CPU_BLOCK_SIZE = 32
# the strategies a vLLM engine accepts unless told otherwise; with a host tier
# (kv_offload_gib) swap too
KEPT_OR_DROPPED = frozenset({HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD})
# the LoRA ranks vLLM can hold in its slots (vllm.config.lora)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


class VllmConfig(BaseModel):
    """How vLLM is built for the planner: dtype, KV space, limits per iteration.

    `kv_cache_space_gib` is what the CPU build reads from `VLLM_CPU_KVCACHE_SPACE`
    (set for the process when the engine is built; a different value already in
    the environment is replaced, with a warning); on a GPU vLLM sizes its KV from
    `gpu_memory_utilization` instead. `suspend_strategies` are the
    handling strategies this engine accepts, preserve always among them; swap needs
    `kv_offload_gib` (vLLM's KV offloading to host memory), which only GPU hosts have:
    the engine refuses it on vLLM's CPU build before vLLM builds anything."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    kv_cache_space_gib: int = Field(default=1, ge=1, le=1024)  # whole GiB, as vLLM reads it
    # GPU hosts: the share of the GPU's memory vLLM takes (weights, activations, then
    # KV in what is left); None: vLLM's own default. The CPU build does not read it.
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    # GPU hosts: vLLM's KV offloading to host memory, this many GiB (its
    # kv_offloading_size): every request's full blocks are also written there, so a
    # resume whose blocks left the GPU loads them instead of recomputing; needed by
    # swap. None: no host tier (vLLM's CPU build has none).
    kv_offload_gib: float | None = Field(default=None, gt=0, le=4096)
    block_size: int = Field(default=VLLM_CPU_BLOCK_SIZE, ge=16, le=1024)
    max_model_len: int = Field(default=2048, ge=16)
    max_num_seqs: int = Field(default=64, ge=1)
    # generations one step may list (vLLM queues those beyond max_num_seqs in its own
    # scheduler, by scheduling_policy); None: max_num_seqs, so vLLM never queues
    max_requests: int | None = Field(default=None, ge=1)
    # vLLM's own order for its waiting queue and preemption: "priority" takes each
    # request's priority (the policy's ranking); "fcfs" is vLLM's default, arrival order
    scheduling_policy: Literal["priority", "fcfs"] = "priority"
    max_num_batched_tokens: int = Field(default=2048, ge=16)
    enable_prefix_caching: bool = True
    # no torch.compile warm-up (about 25 s per start on the CPU build)
    enforce_eager: bool = True
    num_threads: int | None = Field(default=None, ge=1)  # OMP threads; None: torch's
    seed: int = 0
    # vLLM's attention backend by name (FLASHINFER on GPU hosts); None: vLLM's choice
    attention_backend: str | None = None
    # Fleet variants (LoRA adapters): how many the engine loads, all batched together
    # in slots of `max_lora_rank` that vLLM preallocates (one spare: variants.py says
    # why); 0 builds vLLM without its LoRA layers, and then no adapter can be loaded.
    max_loras: int = Field(default=0, ge=0, le=64)
    max_lora_rank: int = 16
    suspend_strategies: frozenset[HandlingStrategy] = KEPT_OR_DROPPED

    @model_validator(mode="before")
    @classmethod
    def _swap_with_offload(cls, data: Any) -> Any:
        """Strategies not given: a host tier (kv_offload_gib) adds swap to the default."""
        if (
            isinstance(data, dict)
            and data.get("kv_offload_gib") is not None
            and "suspend_strategies" not in data
        ):
            return {**data, "suspend_strategies": KEPT_OR_DROPPED | {HandlingStrategy.SWAP}}
        return data

    @field_validator("block_size")
    @classmethod
    def _cpu_block_size(cls, value: int) -> int:
        if value % VLLM_CPU_BLOCK_SIZE:
            raise ValueError(
                f"block_size={value}: vLLM's CPU attention needs a multiple of "
                f"{VLLM_CPU_BLOCK_SIZE}"
            )
        return value

    @field_validator("max_lora_rank")
    @classmethod
    def _lora_rank(cls, value: int) -> int:
        if value not in VLLM_LORA_RANKS:
            raise ValueError(
                f"max_lora_rank={value}: vLLM holds LoRA ranks "
                f"{', '.join(map(str, VLLM_LORA_RANKS))}; give the smallest at least as "
                "large as the adapters' r"
            )
        return value

    @model_validator(mode="after")
    def _requests_cover_seqs(self) -> VllmConfig:
        if self.max_requests is not None and self.max_requests < self.max_num_seqs:
            raise ValueError(
                f"max_requests={self.max_requests} is less than max_num_seqs="
                f"{self.max_num_seqs}: vLLM could never fill its batch"
            )
        return self

    @model_validator(mode="after")
    def _swap_needs_offload(self) -> VllmConfig:
        if HandlingStrategy.SWAP in self.suspend_strategies and self.kv_offload_gib is None:
            raise ValueError(
                "handling strategy 'swap' needs kv_offload_gib: vLLM swaps KV to host "
                "memory only through its KV offloading, which runs on CUDA and XPU GPUs "
                "(not on vLLM's CPU build, where 'preserve' or 'discard' remain)"
            )
        return self

    @field_validator("suspend_strategies")
    @classmethod
    def _fixed_with_preserve(
        cls, value: frozenset[HandlingStrategy]
    ) -> frozenset[HandlingStrategy]:
        chosen = sorted(s.value for s in value if not s.is_fixed)
        if chosen:
            raise ValueError(
                f"{', '.join(chosen)}: chosen per suspension by the service, never given "
                "to an engine; list fixed strategies (preserve, discard; swap with "
                "kv_offload_gib)"
            )
        if HandlingStrategy.PRESERVE not in value:
            raise ValueError(
                "suspend_strategies must include 'preserve': the service suspends with it "
                "while a tool answers and to roll a plan back"
            )
        return value
