"""What the in-process targets share: the planner's tokenizer and plan languages, and
one policy run through an in-process service (`InProcessTarget`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from lrtrace.errors import LrtraceError
from lrtrace.replay.drive import Pacer, RealPacer, ServiceDriver, VirtualPacer
from lrtrace.replay.fleet import ExecutionSampler
from lrtrace.replay.task_check import check_robot_types
from lrtrace.results_format import TaskRecord
from lrtrace.trace_format import TraceFile
from timely_core.engine.protocol import HandlingStrategy
from timely_core.language.plan_language import PlanLanguage
from timely_core.scheduling.policies.base import CallPolicy
from timely_core.scheduling.policies.registry import make_policy
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.stats import ServiceStats


def load_tokenizer(checkpoint: Path | None) -> Any:
    """The checkpoint's `tokenizers.Tokenizer` (default: the embedded planner)."""
    from tokenizers import Tokenizer

    from robot_models.checkpoints import default_planner_path

    path = (checkpoint or default_planner_path()) / "tokenizer.json"
    if not path.is_file():
        raise LrtraceError(f"no tokenizer at {path}: is the planner checkpoint there?")
    return Tokenizer.from_file(str(path))


def planner_tokenizer() -> tuple[Any, str]:
    """The planner checkpoint's tokenizer, or, while no checkpoint is installed, the same
    tokenizer rebuilt with robot_models' training recipe (deterministic BPE on the
    training corpus), so simulated token counts match the planner's. Returns the
    tokenizer and where it came from."""
    from robot_models.checkpoints import default_planner_path

    path = default_planner_path() / "tokenizer.json"
    if path.is_file():
        return load_tokenizer_file(path), f"planner checkpoint ({path})"
    from robot_models.training.loop import TrainConfig, training_data, training_tokenizer

    recipe = TrainConfig()
    tokenizer = training_tokenizer(
        training_data(recipe), recipe.numbers, recipe.words, recipe.vocab_size
    )
    return tokenizer, "rebuilt with robot_models' training recipe"


def load_tokenizer_file(path: Path) -> Any:
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises its own Exception type for bad files
        raise LrtraceError(f"cannot load tokenizer {path}: {err}") from None


@dataclass(frozen=True)
class ReplayServiceOptions:
    """What `lrtrace replay` may change in the replay service's config (sim, service
    targets): the prefix cache, the KV handling strategy and KV prefetch (None: the
    service's default)."""

    prefix_cache: bool = True
    handling_strategy: str | None = None
    kv_prefetch: bool | None = None

    def changed(self) -> list[str]:
        """The command-line flags that differ from the service's defaults."""
        flags = [] if self.prefix_cache else ["--no-prefix-cache"]
        if self.handling_strategy is not None:
            flags.append("--handling-strategy")
        if self.kv_prefetch is not None:
            flags.append("--kv-prefetch")
        return flags

    def service_config(self) -> ServiceConfig:
        update: dict[str, object] = {"prefix_cache": self.prefix_cache}
        if self.handling_strategy is not None:
            update["handling_strategy"] = self.handling_strategy
        if self.kv_prefetch is not None:
            update["kv_prefetch"] = self.kv_prefetch
        return ServiceConfig.model_validate(update)


def no_prefix_cache_tag(config: ServiceConfig) -> str:
    """Appended to a target's engine name in results: a replay without the prefix
    cache is a different setting, and its results say so."""
    return "" if config.prefix_cache else " (no prefix cache)"


def load_languages(robot_types: set[str]) -> dict[str, PlanLanguage]:
    from robot_models.language import load_language

    try:
        # RobotPlanLanguage implements the PlanLanguage protocol (its parser's return type
        # is a concrete class, which mypy does not match structurally)
        return {t: cast(PlanLanguage, load_language(t)) for t in sorted(robot_types)}
    except (KeyError, ValueError) as err:
        raise LrtraceError(f"no plan language for a robot type of the trace: {err}") from None


class InProcessTarget:
    """A `PlanningService` in this process, driven through a trace with simulated
    robots: what the `service` (real engine, monotonic clock) and `sim` (simulated
    engine, virtual clock) targets share. A subclass builds the service for one policy
    run (`_new_service`); `real_clock` says whether it runs on its own thread (arrivals
    submitted as their time comes) or is stepped in virtual time (all handed over up
    front with `submit_at`, so arrivals are exact)."""

    real_clock: bool

    def __init__(
        self,
        tokenizer: Any,
        sampler: ExecutionSampler,
        network_latency_s: float,
        service_config: ServiceConfig | None,
    ) -> None:
        self._tokenizer = tokenizer
        self._sampler = sampler
        self._latency = network_latency_s
        self._config = service_config or ServiceConfig()
        self._languages: dict[str, PlanLanguage] = {}
        self.last_stats: ServiceStats | None = None  # the last run's service, at its end

    def _new_service(self, trace: TraceFile, policy: str, config: ServiceConfig) -> PlanningService:
        raise NotImplementedError

    def _config_update(self, trace: TraceFile) -> dict[str, object]:
        """Service settings this target needs for `trace`, beyond the shared ones."""
        return {}

    def _default_batch_cap(self) -> int:
        return self._config.max_batch_size

    def _max_generations(self) -> int:
        """Generations the engine runs per iteration (the service clamps its cap to it)."""
        raise NotImplementedError

    def batch_cap(self, max_batch: int | None) -> int:
        """The cap a run asked for `max_batch` uses: as the service takes it, within
        what the engine runs per iteration (`timely_core.serving.state.batch_cap`)."""
        asked = self._default_batch_cap() if max_batch is None else max_batch
        return min(asked, self._max_generations())

    def check(self, trace: TraceFile) -> None:
        """A real engine answers any request, but not a task on a robot of another
        type than its catalog task's (`check_robot_types`, as every target)."""
        check_robot_types(trace)

    def kv_settings(self, policy: str) -> tuple[HandlingStrategy | None, bool | None]:
        """The service config's, except the strategy of a policy that brings its own
        (lamps, infercept, vllm-like: `CallPolicy`)."""
        own = make_policy(policy)
        if isinstance(own, CallPolicy):
            return HandlingStrategy(own.handling_strategy), self._config.kv_prefetch
        return HandlingStrategy(self._config.handling_strategy), self._config.kv_prefetch

    def run(
        self,
        trace: TraceFile,
        policy: str,
        max_batch: int | None,
        records: list[TaskRecord],
        on_task_done: Callable[[TaskRecord], None],
        stop: threading.Event,
    ) -> float | None:
        self._languages = languages_for(trace, self._languages)
        update: dict[str, object] = {"dispatch_latency_s": self._latency}
        update.update(self._config_update(trace))
        update["max_batch_size"] = self.batch_cap(max_batch)
        service = self._new_service(trace, policy, self._config.model_copy(update=update))
        for agent in trace.agents:  # prefixes are prefilled before the replay clock starts
            service.register_robot(
                agent.agent_id, robot_type=agent.robot_type, variant=agent.variant or None
            )
        pacer: Pacer = RealPacer(service) if self.real_clock else VirtualPacer(service)
        driver = ServiceDriver(
            service,
            pacer,
            self._sampler,
            self._latency,
            on_task_done,
            stop,
            presubmit=not self.real_clock,
        )
        if self.real_clock:
            service.start()
        try:
            driver.run(trace, records)
        finally:
            if self.real_clock:
                service.stop()
        self.last_stats = service.stats()
        return self.last_stats.engine_busy_s


def robot_types(trace: TraceFile) -> set[str]:
    return {a.robot_type for a in trace.agents}


def languages_for(trace: TraceFile, cache: Mapping[str, PlanLanguage]) -> dict[str, PlanLanguage]:
    missing = robot_types(trace) - set(cache)
    return {**cache, **load_languages(missing)} if missing else dict(cache)
