"""The in-process target: the PlanningService on the real TorchEngine with the
planner checkpoint, on the monotonic clock, with simulated robots. This measures
the real engine (times are wall-clock); the engine is loaded once and reused by
every policy of the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from lrtrace.errors import LrtraceError
from lrtrace.replay.fleet import NETWORK_LATENCY_S, ExecutionSampler
from lrtrace.replay.targets.common import (
    InProcessTarget,
    ReplayServiceOptions,
    load_tokenizer,
    load_tokenizer_file,
    no_prefix_cache_tag,
)
from lrtrace.replay.targets.variant_source import VariantSource
from lrtrace.results_format import Target
from lrtrace.trace_format import TraceFile
from lrtrace.variants import trace_variants
from timely_core.clock import MonotonicClock
from timely_core.engine.protocol import Engine
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig

if TYPE_CHECKING:  # torch is imported only when the engine is built
    from timely_core.engine.torch.config import EngineConfig


def torch_engine_config(threads: int | None, prefix_cache: bool = True) -> EngineConfig:
    """The TorchEngine's config for `--threads` (None: torch's setting), or one line
    naming the flag when it is not a thread count."""
    from timely_core.engine.torch.config import EngineConfig

    try:
        return EngineConfig(num_threads=threads, enable_prefix_caching=prefix_cache)
    except ValidationError as err:
        msg = str(err.errors()[0]["msg"])
        raise LrtraceError(f"--threads {threads}: {msg}") from None


class ServiceTarget(InProcessTarget):
    kind: Target = "service"
    simulated = False
    profile = ""
    real_clock = True

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        sampler: ExecutionSampler,
        name: str,
        network_latency_s: float = NETWORK_LATENCY_S,
        service_config: ServiceConfig | None = None,
    ) -> None:
        super().__init__(tokenizer, sampler, network_latency_s, service_config)
        self.engine = name + no_prefix_cache_tag(self._config)
        self._engine = engine
        self._variants = VariantSource()

    @classmethod
    def from_checkpoint(
        cls,
        model: Path | None,
        threads: int | None,
        network_latency_s: float = NETWORK_LATENCY_S,
        options: ReplayServiceOptions | None = None,
        variants: VariantSource | None = None,
    ) -> ServiceTarget:
        """`options` (default: the service's config): without the prefix cache,
        neither the service's stored prefixes nor the engine's content-hash cache, so
        every prompt is prefilled whole. `variants`: where the fleet variants the
        trace's agents name are loaded from (default: the shipped variant folders); a
        block zoo also gives the base model (then `model` must be None)."""
        options = options or ReplayServiceOptions()
        variants = variants or VariantSource()
        from lrtrace.replay.exec_sampler import ExecTimeSampler
        from robot_models.checkpoints import default_planner_path
        from timely_core.engine.torch.engine import TorchEngine
        from timely_core.engine.torch.loader import CheckpointError
        from timely_core.engine.torch.zoo_model import ZooModel

        config = torch_engine_config(threads, prefix_cache=options.prefix_cache)
        if variants.zoo is not None:
            if model is not None:
                raise LrtraceError("give --model or --zoo, not both (a zoo holds the base)")
            try:
                base = ZooModel.open(variants.zoo, variants.zoo_base)
                tokenizer_file = base.required_file("tokenizer.json")
                engine = TorchEngine(base, config)
            except CheckpointError as err:
                raise LrtraceError(f"--zoo: {err}") from None
            tokenizer = load_tokenizer_file(tokenizer_file)
            name = f"torch:zoo:{variants.zoo_base}"
        else:
            path = model or default_planner_path()
            if not (path / "config.json").is_file():
                raise LrtraceError(f"no checkpoint at {path} (config.json missing)")
            engine = TorchEngine(path, config)
            tokenizer, name = load_tokenizer(path), f"torch:{path.name}"
        target = cls(
            engine, tokenizer, ExecTimeSampler(), name, network_latency_s, options.service_config()
        )
        target._variants = variants
        return target

    def check(self, trace: TraceFile) -> None:
        """As every in-process target's, then the variants the trace's agents name
        loaded into the engine (once: the engine serves every policy's run)."""
        super().check(trace)
        from timely_core.engine.protocol import AdapterError

        engine: Any = self._engine
        for name in trace_variants(trace):
            if name in engine.adapters or name in engine.block_variants:
                continue
            try:
                if self._variants.zoo is not None:
                    engine.load_zoo_variant(name)
                else:
                    engine.load_adapter(name, self._variants.folder(name))
            except AdapterError as err:
                raise LrtraceError(f"variant {name!r} of the trace's agents: {err}") from None

    def _max_generations(self) -> int:
        return self._engine.max_generations

    def _new_service(self, trace: TraceFile, policy: str, config: ServiceConfig) -> PlanningService:
        return PlanningService(
            self._engine,
            self._tokenizer,
            policy,
            clock=MonotonicClock(),
            config=config,
            languages=self._languages,
        )
