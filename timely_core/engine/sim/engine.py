"""SimulatedEngine: the `Engine` protocol in virtual time, for deterministic
scheduling tests and for replaying traces against a calibrated cost model.

Each `step` advances a `VirtualClock` by what a `LatencyModel` says the iteration
costs (prefill tokens, decodes, context), plus the KV transfers it caused. Output
tokens come from a script, a callable that maps a prompt's ids to the output ids
it will produce (the trace tool replays known plans this way); EOS follows them.
KV is accounted like a paged cache: fixed-size blocks on the device and the host,
a registered prefix's full blocks shared by every generation that starts with it
(its partial last block copied, so no prefix token is recomputed), and preserve /
swap / discard on suspension with their transfer and recompute costs, so handling
strategies cost in the simulator what they cost in an engine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from timely_core.clock import VirtualClock
from timely_core.engine.protocol import (
    HandlingStrategy,
    MemoryReport,
    OutOfKvMemory,
    SamplingParams,
    StepOutput,
    UnknownGeneration,
)

Script = Callable[[Sequence[int]], Sequence[int]]


class LatencyModel(Protocol):
    def iteration_s(self, prefill_tokens: int, decodes: int, context_tokens: int) -> float:
        """Seconds for one iteration computing `prefill_tokens` prompt tokens and
        `decodes` decode tokens over `context_tokens` tokens of KV in total."""


@dataclass(frozen=True)
class LinearLatencyModel:
    """`fixed + per_prefill_token * prefill + per_decode * decodes + per_context_token *
    context` for a non-empty iteration. The trace tool fits these to profiles."""

    fixed_s: float = 0.0
    per_prefill_token_s: float = 0.0
    per_decode_s: float = 0.0
    per_context_token_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("fixed_s", "per_prefill_token_s", "per_decode_s", "per_context_token_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"LinearLatencyModel.{name} must be finite and >= 0, got {value}")

    @classmethod
    def paper_llama3_8b_rtx4090(cls) -> LinearLatencyModel:
        """TimelyLLM Table 1 (Llama3-8B fp16, RTX 4090); see `PAPER_LLAMA3_8B_RTX4090`."""
        return PAPER_LLAMA3_8B_RTX4090

    def iteration_s(self, prefill_tokens: int, decodes: int, context_tokens: int) -> float:
        if prefill_tokens == 0 and decodes == 0:
            return 0.0
        return (
            self.fixed_s
            + self.per_prefill_token_s * prefill_tokens
            + self.per_decode_s * decodes
            + self.per_context_token_s * context_tokens
        )


# The paper's setting, Llama3-8B fp16 on an RTX 4090 (TimelyLLM Table 1): prefill of
# 2884 tokens 328 ms, then about 22 ms per decoded token. The split into coefficients
# uses the model's shape: KV per token = 32 layers x 8 KV heads x 128 dims x 2 (K, V) x
# 2 bytes = 128 KiB, read once per decode at the card's 1008 GB/s -> 1.3e-7 s per
# context token; a decode step of one sequence at ~2.9k context is then 21.5 ms fixed
# (weights streamed once per iteration) + one token's compute; the per-token compute is
# what prefill costs per token beyond that fixed part: (328 - 21.5) ms / 2884 =
# 0.1063 ms. Swap: §4.1, 170 MB restored in 9.5 ms.
# The serving configuration is the one TimelyLLM's code gives vLLM for every policy,
# the vLLM baseline included (rtengine/vllm_llm_scheduler.py in
# github.com/MarkoMile/TimelyLLM, a port that keeps upstream's values, hard-coded for
# the 24 GB RTX 4090: EngineArgs max_num_seqs=8, gpu_memory_utilization=0.8,
# max_model_len=4000, enable_prefix_caching=True): at most 8 sequences per iteration;
# KV capacity = 0.8 x 24 GiB minus 16.1 GB of weights minus ~1.5 GB of activations
# and runtime -> ~3.0 GB / 128 KiB; without chunked prefill vLLM batches
# max(max_model_len, 2048) = 4000 tokens per iteration. This is the one definition;
# lrtrace's `paper-llama3-8b-rtx4090` latency profile is built from it.
PAPER_KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2
PAPER_KV_CAPACITY_TOKENS = int((0.8 * 24 * 2**30 - 16.1e9 - 1.5e9) / PAPER_KV_BYTES_PER_TOKEN)
PAPER_SWAP_BYTES_PER_S = 170e6 / 9.5e-3
PAPER_MAX_BATCHED_TOKENS = 4000
PAPER_MAX_NUM_SEQS = 8
PAPER_LLAMA3_8B_RTX4090 = LinearLatencyModel(
    fixed_s=0.0215,
    per_prefill_token_s=(0.328 - 0.0215) / 2884,
    per_decode_s=(0.328 - 0.0215) / 2884,
    per_context_token_s=PAPER_KV_BYTES_PER_TOKEN / 1008e9,
)


class SimulatedEngineConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    eos_token_id: int = Field(ge=0)
    block_size: int = Field(default=16, ge=1)
    device_blocks: int = Field(default=4096, ge=1)
    host_blocks: int = Field(default=4096, ge=0)
    bytes_per_block: int = Field(default=2 * 2**20, ge=1)  # Llama3-8B fp16: 128 KiB/token
    max_batched_tokens: int = Field(default=4096, ge=1)  # per iteration (chunked prefill)
    swap_s_per_block: float = Field(default=0.11e-3, ge=0)  # paper: 170 MB in 9.5 ms
    preemption_strategy: HandlingStrategy = HandlingStrategy.SWAP


class _Kv(str, Enum):
    DEVICE = "device"
    HOST = "host"
    NONE = "none"


@dataclass
class _Prefix:
    token_ids: list[int]
    blocks: int
    shared_tokens: int  # tokens in full blocks: reused, never recomputed


@dataclass
class _Generation:
    gen_id: int
    token_ids: list[int]
    prompt_len: int
    script: list[int]
    params: SamplingParams
    admitted_seq: int
    shared_tokens: int  # in the prefix's full blocks (memory)
    prefix_id: str | None
    num_computed: int = 0
    # KV taken from the prefix, its partial last block included (copied, as
    # TorchEngine does): never computed for this generation
    cached_tokens: int = 0
    blocks: int = 0  # own blocks, where `kv` says
    kv: _Kv = _Kv.DEVICE
    suspended: bool = False

    @property
    def num_generated(self) -> int:
        return len(self.token_ids) - self.prompt_len


@dataclass
class SimulatedEngineStats:
    """What the simulated engine did, for tests and cost accounting."""

    iterations: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    swapped_out_blocks: int = 0
    swapped_in_blocks: int = 0
    recomputed_tokens: int = 0
    preemptions: int = 0
    suspensions: int = 0
    resumptions: int = 0
    busy_s: float = 0.0
    history: list[float] = field(default_factory=list)  # iteration durations


class SimulatedEngine:
    def __init__(
        self,
        clock: VirtualClock,
        latency: LatencyModel,
        script: Script,
        config: SimulatedEngineConfig,
    ) -> None:
        self.clock = clock
        self.latency = latency
        self.script = script
        self.config = config
        self.stats = SimulatedEngineStats()
        self._prefixes: dict[str, _Prefix] = {}
        self._gens: dict[int, _Generation] = {}
        self._device_free = config.device_blocks
        self._host_free = config.host_blocks
        self._pending_transfer_s = 0.0
        self._admitted = 0

    # ------------------------------------------------------------------ protocol

    @property
    def eos_token_id(self) -> int:
        return self.config.eos_token_id

    def register_prefix(self, prefix_id: str, token_ids: list[int]) -> None:
        if not token_ids:
            raise ValueError(f"prefix {prefix_id!r} is empty")
        if prefix_id in self._prefixes:
            self.unregister_prefix(prefix_id)
        blocks = self._blocks_for(len(token_ids))
        if blocks > self._device_free:
            raise OutOfKvMemory(
                f"prefix {prefix_id!r} needs {blocks} blocks, {self._device_free} free"
            )
        self._device_free -= blocks
        full = len(token_ids) // self.config.block_size * self.config.block_size
        self._prefixes[prefix_id] = _Prefix(list(token_ids), blocks, full)
        self._advance(self.latency.iteration_s(len(token_ids), 0, 0))
        self.stats.prefill_tokens += len(token_ids)

    def unregister_prefix(self, prefix_id: str) -> None:
        prefix = self._prefixes.pop(prefix_id, None)
        if prefix is None:
            raise KeyError(f"no registered prefix {prefix_id!r}")
        self._device_free += prefix.blocks

    def can_admit(self, num_tokens: int, prefix_id: str | None = None) -> bool:
        """Whether `add` would succeed: free blocks plus those of suspended generations
        it may swap out."""
        shared = self._prefixes[prefix_id].shared_tokens if prefix_id in self._prefixes else 0
        reclaimable = sum(
            g.blocks for g in self._gens.values() if g.suspended and g.kv is _Kv.DEVICE
        )
        return self._blocks_for(max(num_tokens - shared, 0)) <= self._device_free + reclaimable

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
    ) -> None:
        if gen_id in self._gens:
            raise ValueError(f"generation {gen_id} already exists")
        if not prompt_token_ids:
            raise ValueError(f"generation {gen_id}: empty prompt")
        shared = cached = 0
        if prefix_id is not None:
            prefix = self._prefixes.get(prefix_id)
            if prefix is None:
                raise KeyError(f"generation {gen_id}: no registered prefix {prefix_id!r}")
            if prompt_token_ids[: len(prefix.token_ids)] != prefix.token_ids:
                raise ValueError(f"generation {gen_id}: prompt does not start with {prefix_id!r}")
            shared = prefix.shared_tokens
            cached = min(len(prefix.token_ids), len(prompt_token_ids) - 1)
        blocks = self._blocks_for(len(prompt_token_ids) - shared)
        if not self._make_room(gen_id, blocks, [], [], runnable=False):
            raise OutOfKvMemory(
                f"generation {gen_id} needs {blocks} blocks, {self._device_free} free"
            )
        self._device_free -= blocks
        self._admitted += 1
        self._gens[gen_id] = _Generation(
            gen_id=gen_id,
            token_ids=list(prompt_token_ids),
            prompt_len=len(prompt_token_ids),
            script=list(self.script(list(prompt_token_ids))),
            params=params,
            admitted_seq=self._admitted,
            shared_tokens=shared,
            prefix_id=prefix_id,
            num_computed=cached,
            cached_tokens=cached,
            blocks=blocks,
        )

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        batch = [self._get(g) for g in gen_ids]
        for gen in batch:
            if gen.suspended:
                raise ValueError(f"generation {gen.gen_id} is suspended; resume it first")
        budget = self.config.max_batched_tokens
        prefill = decodes = 0
        sampled: list[_Generation] = []
        scheduled: list[_Generation] = []
        # Decodes first (one token each), then prefill chunks, in the given order.
        ordered = sorted(batch, key=lambda g: not self._is_decode(g))
        for position, gen in enumerate(ordered):
            if budget == 0:
                break
            later = ordered[position + 1 :]
            if gen.kv is not _Kv.DEVICE:
                if not self._make_room(gen.gen_id, self._restore_blocks(gen), later, scheduled):
                    continue
                self._restore(gen)
            pending = len(gen.token_ids) - gen.num_computed
            chunk = min(pending, budget)
            grow = self._blocks_for(gen.num_computed + chunk - gen.shared_tokens) - gen.blocks
            if not self._make_room(gen.gen_id, grow, later, scheduled):
                continue
            if grow > 0:
                self._device_free -= grow
                gen.blocks += grow
            scheduled.append(gen)
            budget -= chunk
            gen.num_computed += chunk
            if self._is_decode_chunk(gen, chunk):
                decodes += 1
            else:
                prefill += chunk
            if gen.num_computed == len(gen.token_ids):
                sampled.append(gen)
        if batch and not scheduled:
            # Only when the first generation cannot fit even with every other one
            # evicted: no later step could run it either, so say so instead of
            # returning an empty iteration forever.
            raise OutOfKvMemory(
                f"generation {ordered[0].gen_id} does not fit in device KV memory "
                f"({self.config.device_blocks} blocks) even with every other generation evicted"
            )
        context = sum(g.num_computed for g in scheduled)
        duration = self.latency.iteration_s(prefill, decodes, context)
        self._advance(duration)
        self.stats.iterations += 1
        self.stats.prefill_tokens += prefill
        self.stats.decode_tokens += decodes
        return [self._sample(gen) for gen in sampled]

    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        gen = self._get(gen_id)
        gen.suspended = True
        self.stats.suspensions += 1
        if strategy is HandlingStrategy.PRESERVE or gen.kv is not _Kv.DEVICE:
            return
        self._evict(gen, strategy)

    def resume(self, gen_id: int) -> None:
        gen = self._get(gen_id)
        if not gen.suspended:
            raise ValueError(f"generation {gen_id} is not suspended")
        if gen.kv is not _Kv.DEVICE and not (
            self._make_room(gen.gen_id, self._restore_blocks(gen), [], [], runnable=False)
            and self._restore(gen)
        ):
            raise OutOfKvMemory(f"generation {gen_id} does not fit in device memory to resume")
        gen.suspended = False
        self.stats.resumptions += 1

    def abort(self, gen_id: int) -> None:
        self._free(self._get(gen_id))

    def token_ids(self, gen_id: int) -> list[int]:
        return list(self._get(gen_id).token_ids)

    def memory(self) -> MemoryReport:
        return MemoryReport(
            block_size=self.config.block_size,
            bytes_per_block=self.config.bytes_per_block,
            device_blocks_total=self.config.device_blocks,
            device_blocks_free=self._device_free,
            host_blocks_total=self.config.host_blocks,
            host_blocks_free=self._host_free,
            pinned_prefix_blocks=sum(p.blocks for p in self._prefixes.values()),
        )

    # ------------------------------------------------------------------ internals

    def _get(self, gen_id: int) -> _Generation:
        gen = self._gens.get(gen_id)
        if gen is None:
            raise UnknownGeneration(f"unknown generation {gen_id}")
        return gen

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.config.block_size)

    def _advance(self, seconds: float) -> None:
        seconds += self._pending_transfer_s
        self._pending_transfer_s = 0.0
        if seconds > 0:
            self.clock.advance(seconds)
            self.stats.busy_s += seconds
            self.stats.history.append(seconds)

    @staticmethod
    def _is_decode(gen: _Generation) -> bool:
        return gen.num_generated > 0 and len(gen.token_ids) - gen.num_computed == 1

    @staticmethod
    def _is_decode_chunk(gen: _Generation, chunk: int) -> bool:
        return chunk == 1 and gen.num_generated > 0

    def _make_room(
        self,
        gen_id: int,
        need: int,
        later: list[_Generation],
        scheduled: list[_Generation],
        runnable: bool = True,
    ) -> bool:
        """Evict until `need` device blocks are free; False, evicting nobody, if they
        cannot be. Victims, as in TorchEngine's iteration scheduler: runnable
        generations outside this step (only if `runnable`), then suspended ones
        (they wait on their robot anyway: a preserved cache is not worth a stalled
        batch), most recently admitted first, then the last-listed generations of
        this step (only if `runnable`); never one already scheduled in it."""
        if need <= self._device_free:
            return True
        in_step = {g.gen_id for g in later} | {g.gen_id for g in scheduled}
        outside = [
            g
            for g in self._gens.values()
            if g.gen_id != gen_id
            and g.gen_id not in in_step
            and g.kv is _Kv.DEVICE
            and g.blocks
            and (runnable or g.suspended)
        ]
        outside.sort(key=lambda g: (g.suspended, -g.admitted_seq))
        victims = outside
        if runnable:
            victims += [g for g in reversed(later) if g.kv is _Kv.DEVICE and g.blocks]
        if sum(g.blocks for g in victims) < need - self._device_free:
            return False
        while need > self._device_free:
            self._preempt(victims.pop(0))
        return True

    def _preempt(self, gen: _Generation) -> None:
        self.stats.preemptions += 1
        self._evict(gen, self.config.preemption_strategy)

    def _evict(self, gen: _Generation, strategy: HandlingStrategy) -> None:
        if strategy is HandlingStrategy.SWAP and gen.blocks <= self._host_free:
            self._host_free -= gen.blocks
            self._device_free += gen.blocks
            self._pending_transfer_s += gen.blocks * self.config.swap_s_per_block
            self.stats.swapped_out_blocks += gen.blocks
            gen.kv = _Kv.HOST
            return
        self._device_free += gen.blocks
        gen.blocks = 0
        gen.num_computed = gen.cached_tokens
        gen.kv = _Kv.NONE

    def _restore_blocks(self, gen: _Generation) -> int:
        """Device blocks bringing `gen`'s KV back takes."""
        if gen.kv is _Kv.HOST:
            return gen.blocks
        return self._blocks_for(len(gen.token_ids) - gen.shared_tokens)

    def _restore(self, gen: _Generation) -> bool:
        """Bring a swapped or discarded generation's KV back to the device."""
        blocks = self._restore_blocks(gen)
        if blocks > self._device_free:
            return False
        self._device_free -= blocks
        if gen.kv is _Kv.HOST:
            self._host_free += blocks
            self._pending_transfer_s += blocks * self.config.swap_s_per_block
            self.stats.swapped_in_blocks += blocks
        else:  # discarded: prompt + generated ids are recomputed by the next prefill
            gen.blocks = blocks
            self.stats.recomputed_tokens += len(gen.token_ids) - gen.cached_tokens
        gen.kv = _Kv.DEVICE
        return True

    def _sample(self, gen: _Generation) -> StepOutput:
        index = gen.num_generated
        token = gen.script[index] if index < len(gen.script) else self.config.eos_token_id
        gen.token_ids.append(token)
        finished = (
            token == self.config.eos_token_id
            or token in gen.params.stop_token_ids
            or gen.num_generated >= gen.params.max_tokens
        )
        if finished:
            self._free(gen)
        return StepOutput(gen.gen_id, token, finished)

    def _free(self, gen: _Generation) -> None:
        if gen.kv is _Kv.DEVICE:
            self._device_free += gen.blocks
        elif gen.kv is _Kv.HOST:
            self._host_free += gen.blocks
        gen.blocks = 0
        self._gens.pop(gen.gen_id, None)
