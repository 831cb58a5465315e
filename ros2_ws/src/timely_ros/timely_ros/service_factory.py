"""PlannerParams -> a running-ready PlanningService (engine, tokenizer, languages,
registered robots)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from robot_models.language import load_language
from robot_models.limit_checker import checker_factory
from timely_core.clock import MonotonicClock
from timely_core.engine.protocol import HandlingStrategy, OutOfKvMemory
from timely_core.errors import ServiceError
from timely_core.language.plan_language import PlanLanguage
from timely_core.service import PlanningService
from timely_core.service_config import ServiceConfig
from timely_ros.config import (
    STREAMED_PATH_TOOL,
    ConfigError,
    PlannerParams,
    RobotSpec,
    tool_spec,
)
from timely_ros.fleet_variants import load_adapters, load_zoo_variants, lora_rank

# The engine thread shares the GIL with the executor threads of every node in the
# process. A forward pass releases and retakes the GIL at each of its torch ops; with
# CPython's default 5 ms switch interval another thread can hold it that long each
# time (a convoy), so one decode step pays many switch intervals and robots' tasks
# miss their budgets. A short interval bounds each of those waits. Measured in
# `timely demo`: docs/design-notes.md, "GIL switch interval".
GIL_SWITCH_INTERVAL_S = 2e-4
# A statement must complete within the segment limit (64 tokens by default); an fp
# path of 8 legs takes up to about 130 of the planner's tokens (one per digit).
STREAMED_MAX_SEGMENT_TOKENS = 160
# a scene and an instruction, as the budget check counts them (a plan needs its request's KV)
PLAN_REQUEST_TOKENS = 64


def resolve_model_path(model_path: str) -> Path:
    """A checkpoint directory, relative paths taken from the repository root when
    they do not exist relative to the working directory."""
    path = Path(model_path)
    if not path.is_absolute() and not path.exists():
        from robot_models.checkpoints import CHECKPOINT_DIR

        path = CHECKPOINT_DIR.parents[1] / path
    if not (path / "tokenizer.json").is_file():
        raise ConfigError(f"model_path {model_path!r}: no checkpoint (tokenizer.json) at {path}")
    return path


def open_zoo(params: PlannerParams) -> tuple[Any, Path]:
    """The zoo's base variant (a `ZooModel`) and its tokenizer file, relative paths
    from the repository root when they do not exist from the working directory;
    ConfigError naming what is missing."""
    from timely_core.engine.torch.loader import CheckpointError
    from timely_core.engine.torch.zoo_model import ZooModel

    root = Path(params.zoo)
    if not root.is_absolute() and not root.exists():
        from robot_models.checkpoints import CHECKPOINT_DIR

        root = CHECKPOINT_DIR.parents[1] / root
    try:
        base = ZooModel.open(root, params.zoo_base)
        base.check_servable()
        return base, base.required_file("tokenizer.json")
    except CheckpointError as err:
        raise ConfigError(f"zoo: {err}") from None


def load_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def build_engine(
    params: PlannerParams, model: Any, tokenizer: Any, languages: dict[str, PlanLanguage]
) -> Any:
    """The planner's engine on `model`: the checkpoint folder, or with `zoo` the zoo's
    opened base (a `ZooModel`; torch only, the config refuses zoo elsewhere)."""
    kv_bytes = int(params.kv_budget_mb * 2**20)
    if params.engine == "torch":
        from timely_core.engine.torch.config import EngineConfig
        from timely_core.engine.torch.engine import TorchEngine

        try:
            kv = EngineConfig(device_kv_bytes=kv_bytes, host_kv_bytes=kv_bytes)
            engine = TorchEngine(model, kv)
        except ValueError as err:
            raise _below_one_block(params, err) from None
        if params.zoo:
            load_zoo_variants(engine, params)  # the robots' variants, from the same zoo
        else:
            load_adapters(engine, params, model)  # fleet variants, served beside the base
        return engine
    if params.engine in ("vllm", "vllm-server"):
        engine = build_vllm_engine(params, model)
        load_adapters(engine, params, model)  # vLLM's multi-LoRA (servers: started with them)
        return engine
    from timely_core.engine.sim.engine import SimulatedEngineConfig
    from timely_core.engine.sim.latency import PAPER_KV_BYTES_PER_BLOCK, PAPER_LLAMA3_8B_RTX4090
    from timely_ros.known_plans import KnownPlans
    from timely_ros.paced_engine import PacedSimulatedEngine

    eos = tokenizer.token_to_id("<eos>")
    # the paper's model (Llama3-8B fp16) in the engines' default block size
    blocks = max(1, kv_bytes // PAPER_KV_BYTES_PER_BLOCK)
    config = SimulatedEngineConfig(
        eos_token_id=0 if eos is None else int(eos), device_blocks=blocks, host_blocks=blocks
    )
    return PacedSimulatedEngine(PAPER_LLAMA3_8B_RTX4090, KnownPlans(tokenizer, languages), config)


def _below_one_block(params: PlannerParams, err: ValueError) -> Exception:
    """The engine's "device_kv_bytes=N is less than one KV block" in the planner's
    own words (kv_budget_mb); any other ValueError as it is."""
    block = re.search(r"less than one KV block \((\d+) bytes", str(err))
    if block is None:
        return err
    block_mb = int(block.group(1)) / 2**20
    return ConfigError(
        f"kv_budget_mb={params.kv_budget_mb:g} is less than one KV block of this model "
        f"({block_mb:.4g} MiB); raise kv_budget_mb (a plan needs many blocks)"
    )


def build_vllm_engine(params: PlannerParams, path: Path) -> Any:
    """engine: vllm or vllm-server; what vLLM refuses becomes a ConfigError naming it."""
    from timely_core.engine.protocol import EngineError
    from timely_core.engine.vllm.config import VLLM_LORA_RANKS, VllmConfig
    from timely_core.engine.vllm.engine import VllmEngine
    from timely_core.engine.vllm.server_config import VllmServerConfig
    from timely_core.engine.vllm.server_engine import VllmServerEngine

    try:
        if params.engine == "vllm-server":
            servers = VllmServerConfig(
                urls=params.vllm_server_urls, max_generations=params.vllm_max_num_seqs
            )
            return VllmServerEngine(path, servers)
        rank = lora_rank(params)
        config = VllmConfig(
            dtype=params.vllm_dtype,
            kv_cache_space_gib=params.vllm_kv_space_gib,
            gpu_memory_utilization=params.vllm_gpu_memory_utilization or None,
            kv_offload_gib=params.vllm_kv_offload_gib or None,  # swap too, with it
            max_num_seqs=params.vllm_max_num_seqs,
            seed=params.seed,
            attention_backend=params.vllm_attention_backend or None,
            # every variant in one batch, in slots as small as the adapters allow
            max_loras=len(params.adapters),
            max_lora_rank=next((r for r in VLLM_LORA_RANKS if r >= rank), rank),
        )
        return VllmEngine(path, config)
    except (EngineError, ValueError) as err:
        raise ConfigError(f"engine {params.engine!r}: {err}") from None


def register_streamed_path(service: PlanningService, robot: RobotSpec) -> None:
    """The robot's `StreamedPath` tool: each element of its streamed calls checked
    (ranges, its limits) and handed on as it is decoded (docs/ros.md)."""
    limits = None if robot.limits is None else robot.limits.model_dump(mode="json")
    service.register_tool(
        robot.id,
        {
            "name": STREAMED_PATH_TOOL,
            "plugin": "robot_models.tools.path_stream:StreamedPath",
            "options": {"robot_type": robot.type, "limits": limits},
        },
    )


def register_tools(service: PlanningService, robot: RobotSpec) -> None:
    """The robot's configured tool plugins, each in its own process; ConfigError
    naming the robot and the tool when one cannot start or does not fit."""
    for index, text in enumerate(robot.tools):
        spec = tool_spec(text, f"{robot.id}.tools[{index}]")
        try:
            service.register_tool(robot.id, spec)
        except (ValueError, TypeError, ServiceError, OSError) as err:
            raise ConfigError(f"{robot.id}.tools[{index}] ({spec.name!r}): {err}") from None


def _model_files(params: PlannerParams) -> tuple[Any, Path]:
    """The model (the checkpoint folder, or with zoo the zoo's base, opened once for
    the tokenizer and the engine) and its tokenizer file."""
    if not params.zoo:
        path = resolve_model_path(params.model_path)
        return path, path / "tokenizer.json"
    return open_zoo(params)


def build_service(params: PlannerParams) -> PlanningService:
    sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_INTERVAL_S))
    model, tokenizer_file = _model_files(params)
    tokenizer = load_tokenizer(tokenizer_file)
    # Any: RobotPlanLanguage satisfies PlanLanguage at run time (runtime_checkable). The
    # robots' measured segment times (segment_done) refine the execution-time models.
    languages: dict[str, Any] = {
        t: load_language(t, learn_from_executions=True) for t in {r.type for r in params.robots}
    }
    engine = build_engine(params, model, tokenizer, languages)
    service = PlanningService(
        engine,
        tokenizer,
        params.policy,
        clock=MonotonicClock(),
        config=ServiceConfig(
            max_queue=params.max_queue,
            scene_debounce_s=params.scene_debounce_s,
            scene_kv_fraction=params.scene_kv_fraction,
            grammar=params.grammar,
            grammar_close_within=params.grammar_close_within,
            grounded_names=params.grounded_names,
            copy_bias=params.copy_bias,
            plan_candidates=params.plan_candidates,
            kv_prefetch=params.kv_prefetch,
            handling_strategy=HandlingStrategy(params.handling_strategy),
            max_recoveries=params.max_recoveries,
        ),
        languages=languages,
    )
    try:
        register_robots(service, params, languages)
        check_plan_room(service, params)
    except BaseException:  # a failed configure leaves no tool process behind
        service.close_tools()
        raise
    return service


def check_plan_room(service: PlanningService, params: PlannerParams) -> None:
    """ConfigError when the KV left beside the robots' pinned prompt prefixes cannot
    hold one whole plan (`max_tokens` and a request): its goals would be accepted and
    fail part way, after their robot ran the first segments."""
    memory = service.engine.memory()
    room = memory.device_blocks_total - memory.pinned_prefix_blocks
    # a plan's own blocks: its prefix's last partial block, a request, max_tokens
    tokens = memory.block_size + PLAN_REQUEST_TOKENS + service.config.max_tokens
    needed = -(-tokens // memory.block_size)
    if room < needed:
        per_block = memory.bytes_per_block / 2**20
        raise ConfigError(
            f"kv_budget_mb={params.kv_budget_mb:g} holds {memory.device_blocks_total} KV "
            f"blocks, {memory.pinned_prefix_blocks} of them the robots' prompt prefixes; the "
            f"{room} left cannot hold one whole plan ({needed} blocks: max_tokens "
            f"{service.config.max_tokens} and a request); raise kv_budget_mb to at least "
            f"{(memory.pinned_prefix_blocks + needed) * per_block:.1f}"
        )


def register_robots(
    service: PlanningService, params: PlannerParams, languages: dict[str, Any]
) -> None:
    """Every configured robot with its language, limits and streamed-path tool."""
    for robot in params.robots:
        try:
            # a robot with streamed skills plans in a language of its own (they join its
            # skills, prompt and grammar)
            language = (
                load_language(robot.type, learn_from_executions=True, streamed_skills=True)
                if robot.streamed_skills
                else languages[robot.type]
            )
            # a robot with limits: every task's statements are checked before they are
            # sent, by a LimitChecker of its own (tracking the pose from the task's start)
            guard = (
                checker_factory(robot.limits, language.skill_set)
                if robot.limits is not None
                else None
            )
            service.register_robot(
                robot.id,
                language=language,
                robot_type=robot.type,
                guard=guard,
                variant=robot.variant or None,
                max_segment_tokens=STREAMED_MAX_SEGMENT_TOKENS if robot.streamed_skills else None,
            )
            if robot.streamed_skills:
                register_streamed_path(service, robot)
            register_tools(service, robot)
        except OutOfKvMemory as err:
            raise ConfigError(
                f"kv_budget_mb={params.kv_budget_mb:g} is too small: {err}; raise kv_budget_mb"
            ) from None
