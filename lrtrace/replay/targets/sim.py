"""The simulator target: the real PlanningService (every policy's own code) on the
SimulatedEngine in virtual time, costed by a latency profile. Plans are the tasks'
golden plans, tokenized with the planner's tokenizer, so token counts and segment
boundaries are those the real planner produces; paper-scale workloads take seconds.
It is a capacity planner, and every output says it is a simulation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lrtrace.catalog import Catalog, load_catalog
from lrtrace.errors import LrtraceError
from lrtrace.profiles import LatencyProfile, load
from lrtrace.replay.fleet import NETWORK_LATENCY_S, ExecutionSampler
from lrtrace.replay.targets.common import (
    InProcessTarget,
    ReplayServiceOptions,
    languages_for,
    load_tokenizer_file,
    no_prefix_cache_tag,
    planner_tokenizer,
)
from lrtrace.replay.task_check import check_robot_types
from lrtrace.results_format import Target
from lrtrace.trace_format import TraceFile
from lrtrace.variants import trace_variants
from timely_core.clock import VirtualClock
from timely_core.engine.block_manager import DEFAULT_BLOCK_SIZE
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.language.plan_language import PlanLanguage
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_core.serving.robots import encode_request


def engine_config(
    profile: LatencyProfile, eos_token_id: int, prefix_caching: bool = True
) -> SimulatedEngineConfig:
    """The profiled setting's KV pool (host pool four times the device's) and
    tokens per iteration, in blocks of the engines' default size; `prefix_caching`
    False models a server without a prefix cache."""
    blocks = max(1, profile.kv_capacity_tokens // DEFAULT_BLOCK_SIZE)
    return SimulatedEngineConfig(
        eos_token_id=eos_token_id,
        block_size=DEFAULT_BLOCK_SIZE,
        device_blocks=blocks,
        host_blocks=blocks * 4,
        bytes_per_block=profile.kv_bytes_per_token * DEFAULT_BLOCK_SIZE,
        max_batched_tokens=profile.max_batched_tokens,
        enable_prefix_caching=prefix_caching,
    )


class PlanScript:
    """Prompt ids -> the golden plan's ids: recognises a prompt by its request part
    (the ids after the robot's prefix), exactly as the service tokenizes it."""

    def __init__(self, tokenizer: Any, catalog: Catalog, languages: dict[str, PlanLanguage]):
        self._plans: dict[tuple[int, ...], list[int]] = {}
        for task in catalog.tasks():
            language = languages.get(task.robot_type)
            if language is None:
                continue
            request = encode_request(
                tokenizer, language.format_request(task.scene, task.instruction)
            )
            plan = list(tokenizer.encode(task.golden_plan, add_special_tokens=False).ids)
            self._plans[tuple(request)] = plan
        self._lengths = sorted({len(k) for k in self._plans}, reverse=True)

    def knows(self, request_ids: Sequence[int]) -> bool:
        """Whether a request part (its encoded scene and instruction) is a task's."""
        return tuple(request_ids) in self._plans

    def __call__(self, prompt_ids: Sequence[int]) -> Sequence[int]:
        for n in self._lengths:
            plan = self._plans.get(tuple(prompt_ids[-n:]))
            if plan is not None:
                return plan
        raise ValueError("the simulator has no plan for this prompt (not an LRTrace task)")


class SimTarget(InProcessTarget):
    kind: Target = "sim"
    simulated = True
    real_clock = False

    def __init__(
        self,
        profile: LatencyProfile,
        tokenizer: Any,
        sampler: ExecutionSampler,
        catalog: Catalog,
        network_latency_s: float = NETWORK_LATENCY_S,
        service_config: ServiceConfig | None = None,
    ) -> None:
        super().__init__(tokenizer, sampler, network_latency_s, service_config)
        self.profile_model = profile
        self.profile = profile.name
        self.engine = f"simulated:{profile.name}" + no_prefix_cache_tag(self._config)
        self._catalog = catalog
        self.last_engine: SimulatedEngine | None = None
        self.last_service: PlanningService | None = None
        self.tokenizer_source = "given"

    @classmethod
    def from_profile(
        cls,
        name: str,
        tokenizer: Path | None = None,
        network_latency_s: float = NETWORK_LATENCY_S,
        options: ReplayServiceOptions | None = None,
    ) -> SimTarget:
        """`tokenizer`: a tokenizer.json (default: the embedded planner's); `options`
        (default: the service's config)."""
        options = options or ReplayServiceOptions()
        from lrtrace.replay.exec_sampler import ExecTimeSampler

        profile = load(name)
        if tokenizer is not None:
            tok, source = load_tokenizer_file(tokenizer), str(tokenizer)
        else:
            tok, source = planner_tokenizer()
        config = options.service_config()
        target = cls(profile, tok, ExecTimeSampler(), load_catalog(), network_latency_s, config)
        target.tokenizer_source = source
        return target

    def check(self, trace: TraceFile) -> None:
        """Refuse a trace with tasks on a robot of another type than their catalog
        task's (`check_robot_types`, as every target) or tasks the simulator has no
        plan for (an instruction or scene that is not an LRTrace task's): up front,
        naming them, rather than each failing in the engine."""
        check_robot_types(trace, self._catalog)
        named = trace_variants(trace)
        if named:
            raise LrtraceError(
                f"the trace's agents plan with fleet variants ({', '.join(named)}); the "
                "simulated engine replays the base model's plans, with no model to adapt: "
                "replay it with --target service"
            )
        self._languages = languages_for(trace, self._languages)
        script = PlanScript(self._tokenizer, self._catalog, self._languages)
        known: dict[tuple[str, str, str], bool] = {}  # a trace repeats few requests
        unplanned = []
        for task in trace.tasks:
            key = (task.robot_type, task.scene, task.instruction)
            if key not in known:
                text = self._languages[task.robot_type].format_request(*key[1:])
                known[key] = script.knows(encode_request(self._tokenizer, text))
            if not known[key]:
                unplanned.append(task.task_id)
        if not unplanned:
            return
        if len(unplanned) == 1:
            which = f"task {unplanned[0]}: its instruction and scene are"
        else:
            more = f" (+{len(unplanned) - 3} more)" if len(unplanned) > 3 else ""
            which = f"tasks {', '.join(unplanned[:3])}{more}: their instructions and scenes are"
        raise LrtraceError(
            f"the simulator has no plan for {which} not an LRTrace task's (the sim target "
            "replays the catalog's golden plans)"
        )

    def _default_batch_cap(self) -> int:
        # the profiled setting's own cap (the paper's engine ran at most 8 sequences),
        # unless the service config given to the target sets one
        cap = self.profile_model.max_batch_size
        if cap is None or "max_batch_size" in self._config.model_fields_set:
            return self._config.max_batch_size
        return cap

    def _max_generations(self) -> int:
        return engine_config(self.profile_model, 0).max_generations

    def _config_update(self, trace: TraceFile) -> dict[str, object]:
        # every arrival is handed over up front (submit_at), so the bound on waiting
        # tasks must hold the whole trace; it is not what is being measured here
        return {"max_queue": max(self._config.max_queue, len(trace.tasks) + 1)}

    def _new_service(self, trace: TraceFile, policy: str, config: ServiceConfig) -> PlanningService:
        clock = VirtualClock()
        eos = self._tokenizer.token_to_id("<eos>")
        engine = SimulatedEngine(
            clock,
            self.profile_model,
            PlanScript(self._tokenizer, self._catalog, self._languages),
            engine_config(self.profile_model, 0 if eos is None else int(eos), config.prefix_cache),
        )
        service = PlanningService(
            engine, self._tokenizer, policy, clock=clock, config=config, languages=self._languages
        )
        self.last_engine, self.last_service = engine, service
        return service
