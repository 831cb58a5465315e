"""`TorchEngine`: the embedded paged-KV, continuous-batching `Engine` backend.

Memory policy (never a crash): `add`, `resume` and `register_prefix` reserve device
blocks for every known token up front, `add` and `resume` preempting suspended
generations if they must, and raise `OutOfKvMemory` (changing nothing) when even
that is not enough; `suspend(SWAP)` falls back to discard when the host pool is
full; inside `step`, a decode short of a block preempts by the configured strategy
(see iteration_scheduler.py). A preempted generation stays runnable: the next step
that lists it swaps it back in or re-prefills it once memory allows; until then it
produces no token. Only a step none of whose generations fits with every other one
preempted raises `OutOfKvMemory` (no later step could run them either).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from timely_core.engine.block_manager import BlockManager, PinnedPrefix
from timely_core.engine.iteration_scheduler import IterationScheduler
from timely_core.engine.protocol import (
    EngineError,
    HandlingStrategy,
    MemoryReport,
    OutOfKvMemory,
    SamplingParams,
    StepOutput,
    UnknownGeneration,
)
from timely_core.engine.sequence import KvLocation, Sequence
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.kv_cache import KvCache
from timely_core.engine.torch.loader import load_model
from timely_core.engine.torch.model_runner import Chunk, ModelRunner
from timely_core.engine.torch.sampler import make_generator, sample, validate_params


@dataclass
class StepTimings:
    """Cumulative wall time of `step` calls, split at the model forward + sampling."""

    steps: int = 0
    total_s: float = 0.0
    forward_s: float = 0.0

    @property
    def overhead_s(self) -> float:
        return self.total_s - self.forward_s


def _eos_ids(model_path: Path, from_config: tuple[int, ...]) -> tuple[int, ...]:
    ids = list(from_config)
    generation_config = model_path / "generation_config.json"
    if generation_config.is_file():
        eos = json.loads(generation_config.read_text()).get("eos_token_id")
        extra = eos if isinstance(eos, list) else [] if eos is None else [eos]
        ids.extend(i for i in extra if i not in ids)
    return tuple(ids)


class TorchEngine:
    """Runs a local Hugging Face Llama/Qwen2 checkpoint on CPU (or any torch device's
    dtype) behind the `Engine` protocol."""

    def __init__(self, model_path: str | Path, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        path = Path(model_path)
        self.model = load_model(path, self.config.torch_dtype)
        mc = self.model.config
        self._eos = _eos_ids(path, mc.eos_token_ids)
        size = self.config.block_size
        self.bytes_per_block = KvCache.bytes_per_block(
            mc.num_hidden_layers, mc.num_key_value_heads, mc.head_dim, size, self.config.torch_dtype
        )
        num_device = self.config.device_kv_bytes // self.bytes_per_block
        if num_device < 1:
            raise ValueError(
                f"device_kv_bytes={self.config.device_kv_bytes} is less than one KV block "
                f"({self.bytes_per_block} bytes for this model and block_size={size})"
            )
        num_host = self.config.host_kv_bytes // self.bytes_per_block
        self.cache = KvCache(
            mc.num_hidden_layers,
            mc.num_key_value_heads,
            mc.head_dim,
            size,
            num_device,
            num_host,
            self.config.torch_dtype,
        )
        self.blocks = BlockManager(
            size, num_device, num_host, self.cache, self.config.enable_prefix_caching
        )
        self.runner = ModelRunner(self.model, self.cache, size)
        self.scheduler = IterationScheduler(self.config, self.blocks)
        self.timings = StepTimings()
        self._gens: dict[int, Sequence] = {}
        self._admissions = itertools.count()

    # ---- protocol: identity and memory -----------------------------------
    @property
    def eos_token_id(self) -> int:
        """The model's (first) EOS id; -1 if the checkpoint names none."""
        return self._eos[0] if self._eos else -1

    def memory(self) -> MemoryReport:
        return MemoryReport(
            block_size=self.config.block_size,
            bytes_per_block=self.bytes_per_block,
            device_blocks_total=self.blocks.num_device_blocks,
            device_blocks_free=self.blocks.num_free_device,
            host_blocks_total=self.blocks.num_host_blocks,
            host_blocks_free=self.blocks.num_free_host,
            pinned_prefix_blocks=self.blocks.num_pinned_blocks,
        )

    def token_ids(self, gen_id: int) -> list[int]:
        return list(self._state(gen_id).token_ids)

    def generation(self, gen_id: int) -> Sequence:
        """The engine's state of a live generation (read it, do not change it)."""
        return self._state(gen_id)

    # ---- protocol: prefixes ----------------------------------------------
    def register_prefix(self, prefix_id: str, token_ids: list[int]) -> None:
        """Raises OutOfKvMemory if the prefix does not fit; a previous registration
        of the same id then stays as it was."""
        self._check_tokens(token_ids, f"prefix {prefix_id!r}")
        state = Sequence(-1, list(token_ids), len(token_ids), SamplingParams(), -1)
        self.blocks.admit(state, None, compute_all=True)
        with torch.inference_mode(), self._threads(len(token_ids)):
            while state.num_pending > 0:
                length = min(state.num_pending, self.config.max_batched_tokens)
                self.runner.run([Chunk(state, state.num_computed, length)])
                state.num_computed += length
        self.blocks.register_full_blocks(state)
        if prefix_id in self.blocks.prefixes:
            self.blocks.unpin(prefix_id)
        self.blocks.pin(prefix_id, state)

    def unregister_prefix(self, prefix_id: str) -> None:
        self._prefix(prefix_id)
        self.blocks.unpin(prefix_id)

    # ---- protocol: admission ---------------------------------------------
    def can_admit(self, num_tokens: int, prefix_id: str | None = None) -> bool:
        prefix = self._prefix(prefix_id) if prefix_id is not None else None
        cost = self.blocks.admission_cost(num_tokens, prefix)
        free = self.blocks.num_free_device
        return cost <= free or cost <= free + self.scheduler.reclaimable(self._gens.values())

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
    ) -> None:
        if gen_id in self._gens:
            raise EngineError(f"generation {gen_id} is already live")
        self._check_tokens(prompt_token_ids, f"prompt of generation {gen_id}")
        validate_params(params)
        prefix = None
        if prefix_id is not None:
            prefix = self._prefix(prefix_id)
            if prompt_token_ids[: len(prefix.token_ids)] != prefix.token_ids:
                raise ValueError(
                    f"prompt of generation {gen_id} does not start with prefix {prefix_id!r}"
                )
        state = Sequence(
            gen_id=gen_id,
            token_ids=list(prompt_token_ids),
            prompt_len=len(prompt_token_ids),
            params=params,
            admitted_seq=next(self._admissions),
            prefix_id=prefix_id,
            generator=make_generator(params),
        )
        with self._threads(0):
            self.scheduler.reclaim(
                state,
                self.blocks.admission_cost(len(prompt_token_ids), prefix),
                self._gens.values(),
            )
            self.blocks.admit(state, prefix)
        self._gens[gen_id] = state

    # ---- protocol: lifecycle ---------------------------------------------
    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        """Swap falls back to discard (recorded in `generation(id).strategy`) when the
        host pool cannot hold the generation's blocks."""
        state = self._state(gen_id)
        if state.suspended:
            raise EngineError(f"generation {gen_id} is already suspended")
        strategy = HandlingStrategy(strategy)
        state.suspended, state.strategy = True, strategy
        if strategy is HandlingStrategy.SWAP and state.kv is KvLocation.DEVICE:
            with self._threads(0):
                swapped = self.blocks.swap_out(state)
            if not swapped:
                self.blocks.free(state)
                state.strategy = HandlingStrategy.DISCARD
        elif strategy is HandlingStrategy.DISCARD:
            self.blocks.free(state)

    def resume(self, gen_id: int) -> None:
        state = self._state(gen_id)
        if not state.suspended:
            raise EngineError(f"generation {gen_id} is not suspended")
        with self._threads(0):
            self.scheduler.resume(state, self._gens.values())
        state.suspended = False

    def abort(self, gen_id: int) -> None:
        self.blocks.free(self._state(gen_id))
        del self._gens[gen_id]

    # ---- protocol: one iteration -----------------------------------------
    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        started = time.perf_counter()
        if len(set(gen_ids)) != len(gen_ids):
            raise EngineError(f"step lists a generation twice: {gen_ids}")
        states = [self._runnable(g) for g in gen_ids][: self.config.max_generations]
        with self._threads(0):  # preemption swaps and swap-ins are block copies
            chunks = self.scheduler.schedule(states, self._gens.values())
        if states and not chunks:
            # The first generation does not fit even with every other one preempted:
            # no later step could run it either, so say so rather than idle forever.
            raise OutOfKvMemory(
                f"generation {states[0].gen_id} does not fit in device KV memory "
                f"({self.blocks.num_device_blocks} blocks) even with every other "
                "generation preempted"
            )
        outputs: dict[int, StepOutput] = {}
        if chunks:
            forward_started = time.perf_counter()
            tokens_in_step = sum(c.length for c in chunks)
            with torch.inference_mode(), self._threads(tokens_in_step):
                sampled, logits = self.runner.run(chunks)
                tokens = sample(
                    logits,
                    [c.state.params for c in sampled],
                    [c.state.generator for c in sampled],
                )
            self.timings.forward_s += time.perf_counter() - forward_started
            for chunk in chunks:
                chunk.state.num_computed = chunk.start + chunk.length
                self.blocks.register_full_blocks(chunk.state)
            for chunk, token in zip(sampled, tokens, strict=True):
                outputs[chunk.state.gen_id] = self._append(chunk.state, token)
        self.timings.steps += 1
        self.timings.total_s += time.perf_counter() - started
        return [outputs[g] for g in gen_ids if g in outputs]

    # ---- internals -------------------------------------------------------
    @contextmanager
    def _threads(self, num_tokens: int) -> Iterator[None]:
        """Run a forward of `num_tokens` tokens on the configured thread count."""
        small = num_tokens <= self.config.small_step_tokens
        wanted = self.config.small_step_threads if small else self.config.num_threads
        previous = torch.get_num_threads()
        if wanted is None or wanted == previous:
            yield
            return
        torch.set_num_threads(wanted)
        try:
            yield
        finally:
            torch.set_num_threads(previous)

    def _append(self, state: Sequence, token: int) -> StepOutput:
        state.token_ids.append(token)
        finished = (
            token in self._eos
            or token in state.params.stop_token_ids
            or state.num_generated >= state.params.max_tokens
        )
        if finished:
            self.blocks.free(state)
            del self._gens[state.gen_id]
        return StepOutput(gen_id=state.gen_id, token_id=token, finished=finished)

    def _state(self, gen_id: int) -> Sequence:
        state = self._gens.get(gen_id)
        if state is None:
            raise UnknownGeneration(f"no live generation {gen_id}")
        return state

    def _runnable(self, gen_id: int) -> Sequence:
        state = self._state(gen_id)
        if state.suspended:
            raise EngineError(f"generation {gen_id} is suspended; resume it before stepping")
        return state

    def _prefix(self, prefix_id: str | None) -> PinnedPrefix:
        prefix = self.blocks.prefixes.get(prefix_id or "")
        if prefix is None:
            raise EngineError(f"no registered prefix {prefix_id!r}")
        return prefix

    def _check_tokens(self, token_ids: list[int], what: str) -> None:
        if not token_ids:
            raise ValueError(f"{what} is empty")
        vocab = self.model.config.vocab_size
        bad = next((i for i, t in enumerate(token_ids) if not 0 <= t < vocab), None)
        if bad is not None:
            raise ValueError(
                f"{what}: token {token_ids[bad]} at index {bad} is outside [0, {vocab})"
            )
