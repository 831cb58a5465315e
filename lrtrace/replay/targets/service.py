"""The in-process target: the PlanningService on the real TorchEngine with the
planner checkpoint, on the monotonic clock, with simulated robots. This measures
the real engine (times are wall-clock); the engine is loaded once and reused by
every policy of the run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lrtrace.errors import LrtraceError
from lrtrace.replay.drive import RealPacer
from lrtrace.replay.fleet import NETWORK_LATENCY_S, ExecutionSampler
from lrtrace.replay.targets.common import languages_for, load_tokenizer, run_policy
from lrtrace.results_format import Target, TaskRecord
from lrtrace.trace_format import TraceFile
from timely_core.clock import MonotonicClock
from timely_core.engine.protocol import Engine
from timely_core.plan_language import PlanLanguage
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig


class ServiceTarget:
    kind: Target = "service"
    simulated = False
    profile = ""

    def __init__(
        self,
        engine: Engine,
        tokenizer: Any,
        sampler: ExecutionSampler,
        name: str,
        network_latency_s: float = NETWORK_LATENCY_S,
        service_config: ServiceConfig | None = None,
    ) -> None:
        self.engine = name
        self._engine = engine
        self._tokenizer = tokenizer
        self._sampler = sampler
        self._latency = network_latency_s
        self._config = service_config or ServiceConfig()
        self._languages: dict[str, PlanLanguage] = {}

    @classmethod
    def from_checkpoint(
        cls,
        model: Path | None,
        threads: int | None,
        network_latency_s: float = NETWORK_LATENCY_S,
        service_config: ServiceConfig | None = None,
    ) -> ServiceTarget:
        from lrtrace.replay.exec_sampler import ExecTimeSampler
        from robot_models.checkpoints import default_planner_path
        from timely_core.engine.config import EngineConfig
        from timely_core.engine.torch_engine import TorchEngine

        path = model or default_planner_path()
        if not (path / "config.json").is_file():
            raise LrtraceError(f"no checkpoint at {path} (config.json missing)")
        engine = TorchEngine(path, EngineConfig(num_threads=threads))
        return cls(
            engine,
            load_tokenizer(path),
            ExecTimeSampler(),
            f"torch:{path.name}",
            network_latency_s,
            service_config,
        )

    def run(
        self,
        trace: TraceFile,
        policy: str,
        max_batch: int | None,
        records: list[TaskRecord],
        on_task_done: Callable[[TaskRecord], None],
        stop: threading.Event,
    ) -> None:
        self._languages = languages_for(trace, self._languages)
        update: dict[str, object] = {"dispatch_latency_s": self._latency}
        if max_batch is not None:
            update["max_batch_size"] = max_batch
        service = PlanningService(
            self._engine,
            self._tokenizer,
            policy,
            clock=MonotonicClock(),
            config=self._config.model_copy(update=update),
            languages=self._languages,
        )
        for agent in trace.agents:  # prefixes are prefilled before the clock starts
            service.register_robot(agent.agent_id, robot_type=agent.robot_type)
        service.start()
        try:
            run_policy(
                service,
                RealPacer(service),
                trace,
                self._sampler,
                self._latency,
                records,
                on_task_done,
                stop,
                presubmit=False,
            )
        finally:
            service.stop()
