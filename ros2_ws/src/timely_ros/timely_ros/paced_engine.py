"""The SimulatedEngine paced to the wall clock, for the planner's `simulated` engine.

The SimulatedEngine costs each iteration with a latency model on a virtual clock;
the planner serves real robots on real time, so after each call that moved the
virtual clock we sleep for as long as it moved. The service then sees the modelled
GPU's latency (TimelyLLM's Llama3-8B on an RTX 4090 by default) without the GPU.
"""

from __future__ import annotations

import time

from timely_core.clock import VirtualClock
from timely_core.engine.protocol import HandlingStrategy, MemoryReport, SamplingParams, StepOutput
from timely_core.engine.sim.engine import Script, SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import LatencyModel


class PacedSimulatedEngine:
    def __init__(
        self, latency: LatencyModel, script: Script, config: SimulatedEngineConfig
    ) -> None:
        self.script = script
        self.clock = VirtualClock()
        self.inner = SimulatedEngine(self.clock, latency, script, config)

    def _paced(self, before: float) -> None:
        delay = self.clock.now() - before
        if delay > 0:
            time.sleep(delay)

    def knows(self, robot_type: str, scene: str, instruction: str) -> bool:
        """Whether the script has a plan for this request (if it can tell)."""
        knows = getattr(self.script, "knows", None)
        return True if knows is None else bool(knows(robot_type, scene, instruction))

    @property
    def eos_token_id(self) -> int:
        return self.inner.eos_token_id

    @property
    def max_generations(self) -> int:
        return self.inner.max_generations

    def set_ranking(self, gen_ids: list[int]) -> None:
        self.inner.set_ranking(gen_ids)

    def register_prefix(self, prefix_id: str, token_ids: list[int]) -> None:
        before = self.clock.now()
        self.inner.register_prefix(prefix_id, token_ids)
        self._paced(before)

    def unregister_prefix(self, prefix_id: str) -> None:
        self.inner.unregister_prefix(prefix_id)

    def can_admit(self, num_tokens: int, prefix_id: str | None = None) -> bool:
        return self.inner.can_admit(num_tokens, prefix_id)

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
    ) -> None:
        self.inner.add(gen_id, prompt_token_ids, params, prefix_id)

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        before = self.clock.now()
        try:
            return self.inner.step(gen_ids)
        finally:  # paced too when it ended some generations alone (GenerationsFailed)
            self._paced(before)

    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        before = self.clock.now()
        self.inner.suspend(gen_id, strategy)
        self._paced(before)

    def resume(self, gen_id: int) -> None:
        before = self.clock.now()
        self.inner.resume(gen_id)
        self._paced(before)

    def abort(self, gen_id: int) -> None:
        self.inner.abort(gen_id)

    def rewrite(
        self,
        gen_id: int,
        keep_generated: int,
        append_ids: list[int],
        observed: tuple[int, int] | None = None,
    ) -> None:
        """`RewritableEngine.rewrite` (plans that react; tools' observations)."""
        self.inner.rewrite(gen_id, keep_generated, append_ids, observed)

    def token_ids(self, gen_id: int) -> list[int]:
        return self.inner.token_ids(gen_id)

    def memory(self) -> MemoryReport:
        return self.inner.memory()
