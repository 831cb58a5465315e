"""SimulatedEngine: the `Engine` protocol in virtual time, for deterministic
scheduling tests and for replaying traces against a calibrated cost model.

It keeps exactly the torch engine's paged-KV books (paged_engine.py: the same
block manager, prefix sharing and content-hash cache, preemption victims and
handling strategies), so a strategy or a memory limit costs in the simulator what
it costs in the engine. Only the compute is modelled: each `step` advances a
`VirtualClock` by what a `LatencyModel` says the iteration costs (prefill tokens,
decodes, context), plus the KV swaps it caused. Output tokens come from a script,
a callable that maps a prompt's ids to the output ids it will produce (the trace
tool replays known plans this way); EOS follows them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from timely_core.clock import VirtualClock
from timely_core.engine.block_manager import DEFAULT_BLOCK_SIZE
from timely_core.engine.iteration_scheduler import Chunk
from timely_core.engine.observed import Span
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.protocol import HandlingStrategy
from timely_core.engine.sequence import Sequence as EngineSequence
from timely_core.engine.sim.latency import (
    PAPER_KV_BYTES_PER_BLOCK,
    LatencyKvCosts,
    LatencyModel,
)

Script = Callable[[Sequence[int]], Sequence[int]]


class SimulatedEngineConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    eos_token_id: int = Field(ge=0)
    block_size: int = Field(default=DEFAULT_BLOCK_SIZE, ge=1)
    device_blocks: int = Field(default=4096, ge=1)
    host_blocks: int = Field(default=4096, ge=0)
    bytes_per_block: int = Field(default=PAPER_KV_BYTES_PER_BLOCK, ge=1)  # the paper's model
    max_batched_tokens: int = Field(default=4096, ge=1)  # per iteration (chunked prefill)
    max_generations: int = Field(default=1024, ge=1)  # per iteration
    enable_prefix_caching: bool = True  # reuse KV of identical leading blocks by content
    preemption_strategy: HandlingStrategy = HandlingStrategy.SWAP


@dataclass
class SimulatedEngineStats:
    """What the simulated engine did, for tests and cost accounting."""

    iterations: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    swapped_out_blocks: int = 0
    swapped_in_blocks: int = 0  # prefetches' swap-ins included
    prefetches: int = 0  # swap-ins ahead of a resume (charged like any swap-in)
    prefetch_hits: int = 0
    prefetch_given_up: int = 0
    recomputed_tokens: int = 0
    preemptions: int = 0
    suspensions: int = 0
    resumptions: int = 0
    busy_s: float = 0.0
    history: list[float] = field(default_factory=list)  # iteration durations


class _TransferMeter:
    """The simulator's `BlockCopier`: no data, only the time KV swaps take, charged
    to the next iteration."""

    def __init__(self, latency: LatencyModel, bytes_per_block: int) -> None:
        self._latency = latency
        self._bytes_per_block = bytes_per_block
        self.pending_s = 0.0

    def copy_device(self, src: list[int], dst: list[int]) -> None:
        """A copy-on-write of a block inside the device: negligible next to a swap."""

    def swap_out(self, device_blocks: list[int], host_blocks: list[int]) -> None:
        self.pending_s += self._latency.swap_seconds(len(device_blocks), self._bytes_per_block)

    def swap_in(self, host_blocks: list[int], device_blocks: list[int]) -> None:
        self.pending_s += self._latency.swap_seconds(len(host_blocks), self._bytes_per_block)


class SimulatedEngine(PagedEngine):
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
        self._meter = _TransferMeter(latency, config.bytes_per_block)
        super().__init__(
            block_size=config.block_size,
            num_device_blocks=config.device_blocks,
            num_host_blocks=config.host_blocks,
            bytes_per_block=config.bytes_per_block,
            copier=self._meter,
            max_batched_tokens=config.max_batched_tokens,
            max_generations=config.max_generations,
            preemption_strategy=config.preemption_strategy,
            prefix_caching=config.enable_prefix_caching,
            eos_ids=(config.eos_token_id,),
        )
        self._stats = SimulatedEngineStats()
        self._scripts: dict[int, list[int]] = {}

    @property
    def stats(self) -> SimulatedEngineStats:
        stats = self._stats
        stats.swapped_out_blocks = self.blocks.swapped_out_blocks
        stats.swapped_in_blocks = self.blocks.swapped_in_blocks
        stats.recomputed_tokens = self.recomputed_tokens
        stats.prefetches = self.blocks.prefetches
        stats.prefetch_hits = self.blocks.prefetch_hits
        stats.prefetch_given_up = self.blocks.prefetch_given_up
        stats.preemptions = self.scheduler.preemptions
        stats.suspensions, stats.resumptions = self.suspensions, self.resumptions
        return stats

    def kv_costs(self) -> LatencyKvCosts:
        """Its own costs of recomputing and swapping KV (`KvCostSource`)."""
        return LatencyKvCosts(self.latency, self.config.bytes_per_block / self.config.block_size)

    # ---- hooks -----------------------------------------------------------
    def _prepare(self, state: EngineSequence) -> None:
        self._scripts[state.gen_id] = list(self.script(list(state.token_ids)))

    def _forget(self, gen_id: int) -> None:
        self._scripts.pop(gen_id, None)

    def _rewritten(
        self, state: EngineSequence, token_ids: list[int], appended: int, observed: list[Span]
    ) -> None:
        """A rollback keeps the script (the generation writes the same again); after
        appended ids the script is asked what follows the whole new context."""
        if appended:
            generated = token_ids[state.prompt_len :]
            self._scripts[state.gen_id] = generated + list(self.script(token_ids))

    def _forward(self, chunks: list[Chunk]) -> list[tuple[Chunk, int]]:
        prefill = decodes = 0
        for chunk in chunks:
            if chunk.length == 1 and chunk.state.num_generated > 0:
                decodes += 1
            else:
                prefill += chunk.length
        context = sum(c.start + c.length for c in chunks)
        self._advance(self.latency.iteration_seconds(prefill, decodes, context))
        self._stats.iterations += 1
        self._stats.prefill_tokens += prefill
        self._stats.decode_tokens += decodes
        return [(c, self._next_token(c.state)) for c in chunks if c.sample]

    def _compute_prefix(self, state: EngineSequence) -> None:
        tokens = state.num_pending
        self._advance(self.latency.iteration_seconds(tokens, 0, 0))
        self._stats.prefill_tokens += tokens

    # ---- internals -------------------------------------------------------
    def _next_token(self, state: EngineSequence) -> int:
        script = self._scripts[state.gen_id]
        index = state.num_generated
        return script[index] if index < len(script) else self.config.eos_token_id

    def _advance(self, seconds: float) -> None:
        seconds += self._meter.pending_s
        self._meter.pending_s = 0.0
        if seconds > 0:
            self.clock.advance(seconds)
            self._stats.busy_s += seconds
            self._stats.history.append(seconds)
