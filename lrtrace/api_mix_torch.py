"""The API mix on the real torch engine, in virtual time (bench/lamps.py --real).

`MeasuredTorchEngine` is the torch engine computing every prefill, decode and KV
copy for real, with two changes that let a trace whose calls last tens of seconds
run in the compute's time only:

- the tokens are the trace's (forced decoding): the model's forward runs over
  each chunk and samples, and the sample is replaced by the script's next id, so
  every request's reply, and so its segments and calls, are the trace's (the
  same as the simulator's);
- every engine call (step, add, resume, suspend, rehandle, prefetch, abort,
  register_prefix) advances the service's `VirtualClock` by the wall time it
  took, so the clock moves by the measured compute and copies, and the calls'
  durations pass in virtual time, without sleeping. The service's own
  bookkeeping between engine calls is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from timely_core.clock import VirtualClock
from timely_core.engine.iteration_scheduler import Chunk
from timely_core.engine.observed import Span
from timely_core.engine.protocol import HandlingStrategy, SamplingParams, StepOutput
from timely_core.engine.sequence import Sequence as EngineSequence
from timely_core.engine.sim.engine import Script
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine


class ForcedTorchEngine(TorchEngine):
    """The torch engine, every forward computed, its samples replaced by `script`'s
    ids (forced decoding); on its own, for a service on the real clock
    (api_mix_plugins.py)."""

    def __init__(self, model_path: str | Path, config: EngineConfig, script: Script) -> None:
        self.script = script
        self._scripts: dict[int, list[int]] = {}
        super().__init__(model_path, config)

    def _prepare(self, state: EngineSequence) -> None:
        super()._prepare(state)
        self._scripts[state.gen_id] = list(self.script(list(state.token_ids)))

    def _forget(self, gen_id: int) -> None:
        super()._forget(gen_id)
        self._scripts.pop(gen_id, None)

    def _rewritten(
        self, state: EngineSequence, token_ids: list[int], appended: int, observed: list[Span]
    ) -> None:
        super()._rewritten(state, token_ids, appended, observed)
        if appended:  # as the simulator: the script goes on from the whole new context
            generated = token_ids[state.prompt_len :]
            self._scripts[state.gen_id] = generated + list(self.script(token_ids))

    def _forward(self, chunks: list[Chunk]) -> list[tuple[Chunk, int]]:
        sampled = super()._forward(chunks)  # the real forward and sampling
        return [(chunk, self._next_token(chunk.state)) for chunk, _ in sampled]

    def _next_token(self, state: EngineSequence) -> int:
        script = self._scripts[state.gen_id]
        index = state.num_generated
        return script[index] if index < len(script) else self.eos_token_id


class MeasuredTorchEngine(ForcedTorchEngine):
    """Forced decoding, and `clock` (virtual) moved by each engine call's wall time."""

    def __init__(
        self, model_path: str | Path, config: EngineConfig, clock: VirtualClock, script: Script
    ) -> None:
        self.clock = clock
        self.measured_s = 0.0  # wall time of all engine calls: what the clock moved by
        super().__init__(model_path, config, script)

    @contextmanager
    def _measured(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self.measured_s += elapsed
            self.clock.advance(elapsed)

    # ---- timed protocol calls ----------------------------------------------
    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        with self._measured():
            return super().step(gen_ids)

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
        variant: str | None = None,
    ) -> None:
        with self._measured():
            super().add(gen_id, prompt_token_ids, params, prefix_id, variant)

    def resume(self, gen_id: int) -> None:
        with self._measured():
            super().resume(gen_id)

    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        with self._measured():
            super().suspend(gen_id, strategy)

    def rehandle(self, gen_id: int, strategy: HandlingStrategy) -> bool:
        with self._measured():
            return super().rehandle(gen_id, strategy)

    def prefetch(self, gen_id: int) -> bool:
        with self._measured():
            return super().prefetch(gen_id)

    def abort(self, gen_id: int) -> None:
        with self._measured():
            super().abort(gen_id)

    def register_prefix(
        self, prefix_id: str, token_ids: list[int], variant: str | None = None
    ) -> None:
        with self._measured():
            super().register_prefix(prefix_id, token_ids, variant)
