"""Configuration of the planner and skill-executor nodes, validated with pydantic.

One YAML file in the ROS 2 parameter-file format configures a whole bring-up, so
`timely up`, the nodes' own `--params-file` and the launch files read the same file:

    /**/timely_planner:
      ros__parameters:
        engine: simulated
        robots: [drone1, arm1]
        drone1: {type: drone, dispatch: true}
    /drone1/timely_skill_executor:
      ros__parameters: {backend: sim-drone, time_scale: 0.1}

Nodes get their parameters the ROS 2 way (flattened, dotted names) and rebuild
these models from them, so a bad value fails with an error that names it.
"""

from __future__ import annotations

import ipaddress
import json
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from robot_models.safety_limits import SafetyLimits
from robot_models.skills import SkillSet
from timely_core.request import MAX_SCENE_CHARS, check_printable
from timely_core.tools.spec import ToolSpec
from timely_ros.param_yaml import load_rcl_yaml

PLANNER_NODE = "timely_planner"
STREAMED_PATH_TOOL = "streamed_path"  # the planner's own tool of a robot with streamed skills
EXECUTOR_NODE = "timely_skill_executor"
DEFAULT_NAMESPACE = "timely"
MAX_RESULT_TIMEOUT_S = 7 * 86400.0  # a week: a goal's longest run
# The planner's section of a parameter file. ROS 2 matches sections to fully
# qualified node names, and the planner lives in a namespace: `/**/timely_planner`
# matches it in any, `/<namespace>/timely_planner` in its own (the one its
# `namespace` parameter names); the bare name is accepted too, as `timely up` reads it.
PLANNER_KEYS = (f"/**/{PLANNER_NODE}", PLANNER_NODE, f"/{PLANNER_NODE}")
NAMESPACE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}(/[A-Za-z][A-Za-z0-9_]{0,63}){0,7}$"
_PLANNER_FQN = re.compile(rf"^/({NAMESPACE_PATTERN[1:-1]})/{PLANNER_NODE}$")


@dataclass(frozen=True)
class PlannerNames:
    """The planner's action and topics, relative to its namespace (default `timely`):
    two planners in two namespaces run side by side. `absolute` gives what a client
    outside the namespace uses."""

    namespace: str = DEFAULT_NAMESPACE
    plan_task: str = "plan_task"
    segments: str = "segments"
    status: str = "status"
    rejections: str = "rejections"
    robot_progress: str = "robot_progress"
    heartbeat: str = "heartbeat"
    interrupted: str = "interrupted"
    approvals: str = "approvals"  # segments waiting for an operator (JSON, latched)
    approval_answers: str = "approval_answers"  # the operators' answers (JSON)

    def absolute(self, relative: str) -> str:
        return f"/{self.namespace.strip('/')}/{relative}"


def planner_names(namespace: str = DEFAULT_NAMESPACE) -> PlannerNames:
    namespace = namespace.strip("/")
    if not re.match(NAMESPACE_PATTERN, namespace):
        raise ConfigError(
            f"namespace {namespace!r}: use names of letters, digits and underscores, separated by /"
        )
    return PlannerNames(namespace)


ROBOT_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
VARIANT_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"  # a fleet variant's name (adapters key)
ZOO_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$"  # a block zoo variant's name
_EXECUTOR_KEY = re.compile(r"^/?([A-Za-z][A-Za-z0-9_]*)/" + EXECUTOR_NODE + r"$")


class ConfigError(ValueError):
    """A configuration file or parameter set is invalid; the message names what."""


def check_robot_id(robot_id: str) -> str:
    """`robot_id` if it is one the planner serves (ROBOT_ID_PATTERN: it names the
    robot's topics and parameters), else ValueError saying what an id is."""
    if not re.match(ROBOT_ID_PATTERN, robot_id):
        raise ValueError(
            f"robot id {robot_id!r}: use a letter, then letters, digits or '_' (at most 64)"
        )
    return robot_id


# Why the engines that serve no fleet variants refuse them (at configuration, never
# ignored).
_NO_VARIANTS = {
    "simulated": "engine 'simulated' cannot serve fleet variants (it replays the data "
    "set's plans: there is no model to adapt); use engine torch, vllm or vllm-server",
}


class _TypedValues(BaseModel):
    """A config model that takes numbers and flags as their own types only: pydantic's
    lax mode would read `max_queue: true` as a queue of 1 and `dispatch: "no"` as
    false, where the node's own parameter path refuses them. No field takes nan or
    inf: each is a bounded quantity, and nan fails every bound with a wrong message."""

    model_config = ConfigDict(allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_lax_values(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, field in cls.model_fields.items():
            value = data.get(name)
            if value is None:
                continue
            kinds = _plain_kinds(field.annotation)
            if bool in kinds and not isinstance(value, bool) and kinds <= {bool, type(None)}:
                raise ValueError(f"{name}: expected true or false, got {value!r}")
            if kinds & {int, float} and bool not in kinds and isinstance(value, bool | str):
                raise ValueError(f"{name}: expected a number, got {value!r}")
        return data


def _plain_kinds(annotation: Any) -> set[Any]:
    """The plain types an annotation allows (`int | None` -> {int, NoneType})."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set(args)
    return {annotation}


class _DuplicateKey(Exception):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


def tool_spec(text: str, where: str) -> ToolSpec:
    """A robot's `tools` entry (JSON text) as a ToolSpec; ValueError naming `where`
    and what is wrong (a key given twice too: JSON would keep the last silently)."""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where}: not a JSON object: {err}") from None
    except _DuplicateKey as err:
        raise ValueError(f"{where}: key {err.args[0]!r} is given twice") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: not a JSON object: {text[:80]!r}")
    try:
        return ToolSpec.model_validate(value)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in err.errors()
        )
        raise ValueError(f"{where}: {problems}") from None


class RobotSpec(_TypedValues):
    """A robot the planner serves."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=ROBOT_ID_PATTERN)
    type: Literal["drone", "arm"] = Field(description="robot type: its skills and plan language")
    dispatch: bool = Field(
        default=True, description="send segments to the robot's ExecuteSkill server"
    )
    executor_action: str = Field(
        default="", description="the robot's ExecuteSkill action; empty: /<id>/execute_skill"
    )
    scene_topic: str = Field(
        default="",
        description="std_msgs/String of what the robot perceives, prefilled ahead of its "
        "tasks and the scene of a goal that carries none; empty: /<id>/scene",
    )
    heartbeat_topic: str = Field(
        default="", description="the executor's heartbeat; empty: /<id>/heartbeat"
    )
    limits: SafetyLimits | None = Field(
        default=None,
        description="checked on every statement before it is sent (robot_models.safety_limits)",
    )
    variant: str = Field(
        default="",
        pattern=r"^(?:[A-Za-z][A-Za-z0-9_-]{0,63})?$",  # VARIANT_PATTERN or empty
        description="fleet variant its plans run with: a name in the planner's adapters (with "
        "zoo: a variant of the zoo); empty: the base model",
    )
    streamed_skills: bool = Field(
        default=False,
        description="its type's streamed skills (a drone's fp path) join its plan language, "
        "and each element goes to the robot as soon as it is decoded and checked "
        "(docs/ros.md); the shipped planner checkpoint was not trained on them",
    )
    tools: tuple[str, ...] = Field(
        default=(),
        description="tool plugins of its plans, each one JSON object of a ToolSpec "
        '(docs/ros.md, "Tools"), e.g. {"name": "look", "plugin": '
        '"robot_models.tools.perception:ScenePerception", "options": {"robot_type": '
        '"drone", "validates": true}, "append_observations": true}',
    )

    @model_validator(mode="after")
    def _tools_are_tool_specs(self) -> RobotSpec:
        names: set[str] = set()
        for index, text in enumerate(self.tools):
            where = f"{self.id}.tools[{index}]"
            spec = tool_spec(text, where)
            if spec.name in names:
                raise ValueError(f"{where}: a second tool named {spec.name!r}")
            if spec.name == STREAMED_PATH_TOOL and self.streamed_skills:
                raise ValueError(
                    f"{where}: {STREAMED_PATH_TOOL!r} is the name of the planner's own tool "
                    "for a robot with streamed_skills; name it otherwise"
                )
            names.add(spec.name)
        return self

    @model_validator(mode="after")
    def _limits_fit_the_type(self) -> RobotSpec:
        if self.streamed_skills and not any(
            s.streamed for s in SkillSet.load(self.type, streamed=True).skills
        ):
            raise ValueError(f"streamed_skills: the {self.type} has no streamed skill")
        if self.limits is not None:
            try:
                self.limits.check_for(SkillSet.load(self.type, streamed=self.streamed_skills))
            except ValueError as err:
                raise ValueError(f"limits.{err}") from None
        return self

    @property
    def action_name(self) -> str:
        return self.executor_action or f"/{self.id}/execute_skill"

    @property
    def scene_topic_name(self) -> str:
        return self.scene_topic or f"/{self.id}/scene"

    @property
    def heartbeat_topic_name(self) -> str:
        return self.heartbeat_topic or f"/{self.id}/heartbeat"


class PlannerParams(_TypedValues):
    """Parameters of the `timely_planner` node."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str = Field(
        default=DEFAULT_NAMESPACE,
        pattern=NAMESPACE_PATTERN,
        description="where `timely up` puts the planner; ros2 run and launch files decide "
        "with -r __ns:= (the node's namespace wins)",
    )
    engine: Literal["torch", "simulated", "vllm", "vllm-server"] = Field(
        default="torch",
        description="torch: the planner checkpoint on our paged-KV engine; simulated: "
        "the data set's plans at the paper's latency; vllm: vLLM in process (its CPU build "
        "here); vllm-server: one or more vLLM OpenAI-compatible servers",
    )
    model_path: str = Field(
        default="robot_models/checkpoints/planner",
        description="checkpoint folder (config.json, *.safetensors, tokenizer.json); "
        "relative paths from the repository root",
    )
    policy: Literal[
        "timely",
        "fcfs",
        "stream",
        "segmented-fcfs",
        "edf",
        "priority",
        "lamps",
        "infercept",
        "vllm-like",
    ] = Field(default="timely", description="scheduling policy of the engine's compute")
    kv_budget_mb: float = Field(
        default=64.0, gt=0, le=1_000_000, description="device KV cache (MiB)"
    )
    max_queue: int = Field(
        default=256, ge=1, le=100_000, description="tasks waiting for their first admission"
    )
    max_active_goals: int = Field(
        default=64, ge=1, le=1024, description="goals accepted at once; more are rejected"
    )
    executor_wait_s: float = Field(
        default=2.0, gt=0, le=600, description="bounded wait for a robot's ExecuteSkill server"
    )
    status_period_s: float = Field(
        default=0.5, gt=0, le=1.0, description="period of the status and /diagnostics topics"
    )
    result_timeout_s: float = Field(
        default=120.0,
        gt=0,
        le=MAX_RESULT_TIMEOUT_S,  # a timer beyond the platform's time_t would never fire
        description="a goal that runs longer is stopped and aborted (at most a week)",
    )
    robot_answer_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="a robot that is up but does not answer a segment's goal request "
        "this long (the request or its answer lost) fails the goal; the robot is told to "
        "stop that segment",
    )
    robot_timeout_s: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description="a robot whose heartbeat stays away this long is declared gone: its "
        "goal ends, new goals for it are rejected until it beats again",
    )
    journal_path: str = Field(
        default="",
        description="SQLite file journaling accepted goals and their progress; a restarted "
        "planner reports the goals its predecessor left open on <ns>/interrupted; "
        "empty: none",
    )
    scene_debounce_s: float = Field(
        default=0.2,
        ge=0,
        le=60,
        description="a published scene is prefilled once it stands this long",
    )
    scene_kv_fraction: float = Field(
        default=0.25, ge=0, le=0.9, description="share of device KV prefilled scenes may hold"
    )
    grammar: bool = Field(
        default=True,
        description="decode each robot's plans under its grammar (valid by construction)",
    )
    grounded_names: bool = Field(
        default=False,
        description="with the grammar, a plan's object names only from its request: the "
        "instruction's phrases, the scene's items and the robot's known places (a plan "
        "then cannot name an object the request only implies)",
    )
    copy_bias: float = Field(
        default=10.0,
        ge=0,
        le=100,
        description="with the grammar, logits added inside a quoted name to tokens that "
        "go on spelling a name the request gives, and after a value's opener to tokens "
        "that go on writing a number it states (0: off)",
    )
    plan_candidates: int = Field(
        default=0,
        ge=0,
        le=32,
        description="engine torch: decode each plan beside this many sampled ones and keep "
        "the best by likelihood and the request's names it uses (n + 1 plans' work, the "
        "first segment once all have ended); 0: off",
    )
    grammar_close_within: int = Field(
        default=32,
        ge=0,
        le=4096,
        description="with the grammar, a plan's last this-many tokens (of its token limit, or "
        "of the segment limit for one statement) end it at the next statement boundary, its "
        "blocks closed; in the last half an open name, call and statement are ended too; "
        "0: off",
    )
    handling_strategy: Literal["auto", "ttl", "preserve", "swap", "discard"] = Field(
        default="auto",
        description="a suspended generation's KV: auto (least predicted waste, LAMPS), ttl "
        "(kept for a time-to-live, Continuum), or preserve, swap, discard for every one",
    )
    kv_prefetch: bool = Field(
        default=True,
        description="bring a swapped waiting generation's KV back to the device before its "
        "predicted resume when memory is free (given up first under pressure)",
    )
    approval_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="a segment waiting for an operator's approval this long ends its goal, unsent",
    )
    one_task_per_robot: bool = Field(
        default=True,
        description="a robot runs one goal's segments at a time: a goal for a robot busy "
        "with another waits to send its first segment until that goal ends (its planning "
        "goes on); false: segments of several goals go to the robot as they come",
    )
    replan_on_failure: bool = Field(
        default=False,
        description="a segment the robot fails rolls the plan back to that segment's end, "
        "appends the failure as an observation and planning goes on (every engine: "
        "torch, simulated, vllm, vllm-server); false: the failure ends the goal",
    )
    max_recoveries: int = Field(
        default=3,
        ge=0,
        le=100,
        description="with replan_on_failure: rollbacks per goal; the next failure ends it",
    )
    autostart: bool = Field(
        default=True,
        description="configure and activate at start-up; false: wait for a lifecycle manager "
        "(timely lifecycle, ros2 lifecycle set)",
    )
    drain_timeout_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="on deactivate, how long active goals may run to their end before they "
        "are cancelled",
    )
    seed: int = Field(default=0, description="seed of sampled decoding")
    vllm_dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32",
        description="engine vllm: the model's dtype (a vllm-server's is set when it is started)",
    )
    vllm_kv_space_gib: int = Field(
        default=1, ge=1, le=1024, description="engine vllm: KV space in whole GiB (as vLLM-CPU)"
    )
    vllm_gpu_memory_utilization: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="engine vllm on a GPU host: the share of the GPU's memory vLLM takes "
        "(weights, activations, then KV in the rest); 0: vLLM's default (0.9). vLLM-CPU "
        "sizes its KV by vllm_kv_space_gib instead",
    )
    vllm_kv_offload_gib: float = Field(
        default=0.0,
        ge=0,
        le=4096,
        description="engine vllm on a GPU host: vLLM's KV offloading to host memory, in GiB "
        "(a resume whose blocks left the GPU loads them instead of recomputing), and "
        "handling_strategy swap with it; 0: none. vLLM-CPU has none",
    )
    vllm_max_num_seqs: int = Field(
        default=64,
        ge=1,
        le=1024,
        description="engine vllm: sequences in one vLLM step; vllm-server: generations one "
        "engine step lists across the servers",
    )
    vllm_server_urls: list[str] = Field(
        default_factory=list,
        description="engine vllm-server: the servers, e.g. http://127.0.0.1:8100; with "
        "grammar on, each started with --logits-processors "
        "timely_core.engine.vllm.grammar_processor:GrammarLogitsProcessor",
    )
    vllm_attention_backend: str = Field(
        default="",
        description="engine vllm: e.g. FLASHINFER (the GPU image; it serves heads 64+ "
        "wide, docker/README.md); empty: vLLM's choice. One that cannot serve the "
        "checkpoint's heads is refused at start-up, naming why",
    )
    adapters: dict[str, str] = Field(
        default_factory=dict,
        description="fleet variants to load, name -> peft LoRA adapter folder, or (engine "
        "torch) a full fine-tune checkpoint folder, served as its differing blocks (relative "
        "paths from the repository root; vllm-server: each server started with them); "
        "robots name one in their variant",
    )
    zoo: str = Field(
        default="",
        description="engine torch: a block zoo folder (python -m robot_models.blocks) to serve "
        "from instead of model_path and adapters: its variant zoo_base is the base model, and "
        "each robot's variant is the zoo's variant of that name, a block the zoo holds once "
        "held once (relative paths from the repository root)",
    )
    zoo_base: str = Field(
        default="base",
        pattern=ZOO_NAME_PATTERN,
        description="with zoo: the zoo's checkpoint variant served as the base model",
    )
    robots: list[RobotSpec] = Field(
        min_length=1, description="ids of the robots served; each has its settings under its id"
    )

    @model_validator(mode="after")
    def _variants(self) -> PlannerParams:
        """Variants need an engine that serves them, and every robot's must be loaded:
        a robot never plans silently with the base model in its variant's place."""
        for name, path in self.adapters.items():
            if not re.match(VARIANT_PATTERN, name):
                raise ValueError(
                    f"adapters: variant name {name!r}: use a letter, then letters, digits, "
                    "'_' or '-' (at most 64)"
                )
            if not path.strip():
                raise ValueError(f"adapters.{name}: give the adapter's folder")
            if name == "base":  # what status and robots without a variant are called
                raise ValueError("adapters: 'base' names the base model; give another name")
        named = [r for r in self.robots if r.variant]
        if (self.adapters or named) and self.engine in _NO_VARIANTS:
            what = (
                "adapters"
                if self.adapters
                else f"robot {named[0].id!r} (variant {named[0].variant!r})"
            )
            raise ValueError(f"{what}: {_NO_VARIANTS[self.engine]}")
        if self.zoo:
            if self.engine != "torch":
                raise ValueError(
                    f"zoo: engine {self.engine!r} reads checkpoint folders, only engine torch "
                    "serves from a block zoo; export the variants (python -m robot_models.blocks "
                    "export) and list them under adapters"
                )
            if self.adapters:
                raise ValueError(
                    "adapters: with zoo every variant comes from the zoo (robots name zoo "
                    "variants); remove adapters or zoo"
                )
            return self  # the robots' variants are checked against the zoo at start-up
        for robot in named:
            if robot.variant not in self.adapters:
                loaded = ", ".join(sorted(self.adapters)) or "none"
                raise ValueError(
                    f"robot {robot.id!r}: variant {robot.variant!r} is not loaded "
                    f"(adapters: {loaded}); add it under adapters or clear the robot's variant"
                )
        return self

    @model_validator(mode="after")
    def _policy_strategy(self) -> PlannerParams:
        """The call-waiting policies (lamps, infercept, vllm-like) bring their own KV
        handling, which replaces handling_strategy: another one set is refused, not
        silently ignored."""
        from timely_core.engine.protocol import HandlingStrategy
        from timely_core.scheduling.policies.base import CallPolicy
        from timely_core.scheduling.policies.registry import make_policy

        policy = make_policy(self.policy)
        if isinstance(policy, CallPolicy):
            own = HandlingStrategy(policy.handling_strategy).value
            if self.handling_strategy not in ("auto", own):
                raise ValueError(
                    f"handling_strategy {self.handling_strategy}: policy {self.policy!r} "
                    f"handles waiting generations' KV itself ({own}); leave handling_strategy "
                    "auto, or use a policy such as timely that takes it"
                )
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> PlannerParams:
        ids = [r.id for r in self.robots]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"robot ids must be unique; repeated: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _vllm_options(self) -> PlannerParams:
        offloads = self.engine == "vllm" and self.vllm_kv_offload_gib > 0
        vllm = self.engine in ("vllm", "vllm-server")
        if vllm and self.handling_strategy == "swap" and not offloads:
            raise ValueError(
                f"engine {self.engine!r} swaps a waiting plan's KV to host memory only "
                "through vLLM's KV offloading, on GPU hosts: set vllm_kv_offload_gib "
                "(engine 'vllm'), or use auto, preserve or discard"
            )
        if self.engine == "vllm-server" and not self.vllm_server_urls:
            raise ValueError("engine 'vllm-server' needs vllm_server_urls (one or more)")
        if self.vllm_server_urls:
            from timely_core.engine.vllm.server_config import VllmServerConfig

            try:
                VllmServerConfig(urls=self.vllm_server_urls)
            except ValidationError as err:
                raise ValueError(
                    f"vllm_server_urls: {err.errors()[0]['msg'].removeprefix('Value error, ')}"
                ) from None
        for name, engines in _ENGINE_OPTIONS.items():  # set, but the engine never reads it
            if self.engine not in engines and getattr(self, name) != _default(name):
                raise ValueError(
                    f"{name} is read only by engine {' or '.join(map(repr, engines))}, and "
                    f"this planner's engine is {self.engine!r}: remove it or change the engine"
                )
        if self.plan_candidates and self.engine != "torch":
            raise ValueError(
                f"plan_candidates needs engine 'torch' (its log-probabilities rank them), "
                f"not {self.engine!r}"
            )
        return self

    def robot(self, robot_id: str) -> RobotSpec | None:
        return next((r for r in self.robots if r.id == robot_id), None)


# options only some engines read: a value set for another engine is a mistake to name
_ENGINE_OPTIONS: dict[str, tuple[str, ...]] = {
    "vllm_dtype": ("vllm",),  # a server's own is set when it is started
    "vllm_kv_space_gib": ("vllm",),
    "vllm_gpu_memory_utilization": ("vllm",),
    "vllm_kv_offload_gib": ("vllm",),
    "vllm_attention_backend": ("vllm",),
    "vllm_max_num_seqs": ("vllm", "vllm-server"),
    "vllm_server_urls": ("vllm-server",),
}


def _default(name: str) -> Any:
    field = PlannerParams.model_fields[name]
    return field.get_default(call_default_factory=True)


Backend = Literal["sim-drone", "sim-arm", "tello"]
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def check_host(host: str) -> str:
    """`host` if it is an IPv4 address or a host name (djitellopy's sockets are
    IPv4), else ValueError: `999.1.1.1` would only fail at the first command."""
    if re.fullmatch(r"[0-9.]+", host):  # digits and dots: an address, or nothing
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv4 address") from None
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
        raise ValueError(f"{host!r} is neither an IPv4 address nor a host name")
    return host


class ExecutorParams(_TypedValues):
    """Parameters of one `timely_skill_executor` node (one robot)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    robot_id: str = Field(pattern=ROBOT_ID_PATTERN)
    backend: Backend = Field(description="sim-drone, sim-arm (simulated) or tello (djitellopy)")
    time_scale: float = Field(
        default=1.0, gt=0, le=100, description="simulated backends: wall time per modelled second"
    )
    seed: int = Field(default=0, description="seed of the simulated execution times")
    feedback_period_s: float = Field(
        default=0.1, gt=0, le=5, description="period of ExecuteSkill feedback"
    )
    fail_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="simulated backends: probability that a skill call fails (drawn "
        "with `seed`), to exercise plans that react",
    )
    fail_skills: list[str] = Field(
        default_factory=list,
        description="simulated backends: skills (name or short name) whose first "
        "`fail_times` calls fail, then succeed (a transient fault)",
    )
    fail_times: int = Field(
        default=1, ge=0, le=1000, description="calls of each of `fail_skills` that fail"
    )
    tello_host: str = Field(
        default="192.168.10.1", description="the Tello's SDK address: IPv4 or a host name"
    )
    tello_port: int = Field(default=8889, ge=1, le=65535, description="the Tello's SDK port")
    tello_timeout_s: int = Field(
        default=7, ge=1, le=120, description="per Tello command (whole seconds, as djitellopy)"
    )
    tello_retry_count: int = Field(
        default=1,
        ge=1,
        le=10,
        description="tries per Tello command the drone refuses with `error ...` "
        "(an unanswered one is never sent again)",
    )
    planner_timeout_s: float = Field(
        default=2.0,
        ge=0,
        le=60,
        description="a planner whose heartbeat stays away this long (or that restarted) is "
        "gone: the robot stops the segment it was running for it; 0: never stop for that",
    )
    planner_namespace: str = Field(
        default=DEFAULT_NAMESPACE,
        pattern=NAMESPACE_PATTERN,
        description="the namespace of the planner whose heartbeat the robot follows",
    )
    scene: str = Field(
        default="",
        max_length=MAX_SCENE_CHARS,
        description="what the robot perceives, published on `scene_topic` every "
        "`scene_period_s` for the goals that carry no scene: a simulated robot's world, "
        "or a fixed site without a perception pipeline; empty: nothing published",
    )
    scene_topic: str = Field(
        default="", description="where `scene` is published; empty: /<id>/scene"
    )
    scene_period_s: float = Field(
        default=1.0, gt=0, le=60, description="how often `scene` is published again"
    )

    @field_validator("scene")
    @classmethod
    def _scene(cls, text: str) -> str:
        return check_printable(text.strip())

    @property
    def scene_topic_name(self) -> str:
        return self.scene_topic or f"/{self.robot_id}/scene"

    @field_validator("tello_host")
    @classmethod
    def _host(cls, host: str) -> str:
        return check_host(host)

    @property
    def robot_type(self) -> str:
        return "arm" if self.backend == "sim-arm" else "drone"


class BringupConfig(BaseModel):
    """Everything `timely up` starts: the planner (optional) and the executors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    planner: PlannerParams | None = None
    executors: list[ExecutorParams] = Field(default_factory=list)


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested parameter dict -> ROS 2 dotted names (how a params file is read)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def unflatten(params: dict[str, Any]) -> dict[str, Any]:
    """ROS 2 dotted names -> nested dict (the inverse of `flatten`)."""
    out: dict[str, Any] = {}
    for name, value in params.items():
        parts = name.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"parameter {name!r} clashes with parameter {part!r}")
        node[parts[-1]] = value
    return out


def _describe(err: ValidationError, what: str, robot_ids: Sequence[str] = ()) -> ConfigError:
    """One line naming each field as the config file spells it: a robot's settings
    by the robot's id (`drone1.type`), not by its place in the list (`robots.0.type`)."""
    problems = "; ".join(
        f"{'.'.join(str(p) for p in _as_written(e['loc'], robot_ids)) or '(top level)'}: {e['msg']}"
        for e in err.errors()
    )
    return ConfigError(f"invalid {what}: {problems}")


def _as_written(loc: tuple[int | str, ...], robot_ids: Sequence[str]) -> tuple[int | str, ...]:
    index = loc[1] if len(loc) >= 2 and loc[0] == "robots" else None
    if isinstance(index, int) and index < len(robot_ids):
        return (robot_ids[index], *loc[2:])
    return loc


def planner_params(raw: dict[str, Any]) -> PlannerParams:
    """Build `PlannerParams` from a nested ros__parameters dict.

    `robots` is a list of ids; each robot's settings live under its id, the usual
    ROS 2 way of expressing a list of records as parameters.
    """
    raw = dict(raw)
    ids = raw.pop("robots", None)
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise ConfigError(f"{PLANNER_NODE}: 'robots' must be a non-empty list of robot ids")
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ConfigError(f"{PLANNER_NODE}: robot ids must be unique; repeated: {', '.join(dupes)}")
    robots = []
    for rid in ids:
        if rid in PlannerParams.model_fields:  # its settings would be that parameter
            raise ConfigError(
                f"{PLANNER_NODE}: robot id {rid!r} is the name of a planner parameter; "
                "give the robot another id"
            )
        spec = raw.pop(rid, None)
        if spec is None:
            raise ConfigError(f"{PLANNER_NODE}: robot {rid!r} is listed but has no settings")
        if not isinstance(spec, dict):
            raise ConfigError(
                f"{PLANNER_NODE}: robot {rid!r}: its settings must be a mapping "
                f"({{type: drone|arm, ...}}), got {spec!r}"
            )
        robots.append({"id": rid, **spec})
    try:
        return PlannerParams.model_validate({**raw, "robots": robots})
    except ValidationError as err:
        raise _describe(err, f"{PLANNER_NODE} parameters", ids) from None


def executor_params(robot_id: str, raw: dict[str, Any]) -> ExecutorParams:
    try:
        return ExecutorParams.model_validate({"robot_id": robot_id, **raw})
    except ValidationError as err:
        raise _describe(err, f"parameters of /{robot_id}/{EXECUTOR_NODE}") from None


def parse_bringup(doc: Any, source: str = "config") -> BringupConfig:
    """Validate a parsed parameter-file document."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: expected a mapping of node names to ros__parameters")
    planner: PlannerParams | None = None
    executors: list[ExecutorParams] = []
    sections: dict[str, str] = {}  # node -> the section that configures it
    for key, body in doc.items():
        if not isinstance(body, dict) or set(body) != {"ros__parameters"}:
            raise ConfigError(f"{source}: node {key!r} must hold exactly 'ros__parameters'")
        params = body["ros__parameters"] or {}
        if not isinstance(params, dict):
            raise ConfigError(
                f"{source}: node {key!r}: ros__parameters must be a mapping of parameter "
                f"names to values, got a {type(params).__name__}"
            )
        node = _section_node(str(key), source)
        if node in sections:  # ROS 2 would merge both, `timely up` keep one: refused
            raise ConfigError(
                f"{source}: sections {sections[node]!r} and {key!r} both configure "
                f"{'the planner' if node == PLANNER_NODE else node}; give its parameters in one"
            )
        sections[node] = str(key)
        if node == PLANNER_NODE:
            planner = planner_params(params)
            _check_planner_section(str(key), planner, source)
        else:
            executors.append(executor_params(node.split("/")[1], params))
    if planner is None and not executors:
        raise ConfigError(f"{source}: configures no node")
    for executor in executors:  # a drone planned for an arm fails every goal at run time
        robot = planner.robot(executor.robot_id) if planner is not None else None
        if robot is not None and robot.type != executor.robot_type:
            raise ConfigError(
                f"{source}: robot {robot.id!r} is planned as type {robot.type!r}, but its "
                f"executor's backend {executor.backend!r} runs type {executor.robot_type!r}"
            )
    return BringupConfig(planner=planner, executors=executors)


def _section_node(key: str, source: str) -> str:
    """The node a parameter-file section configures: PLANNER_NODE, or
    `/<robot_id>/timely_skill_executor`; ConfigError for any other."""
    if key in PLANNER_KEYS or _PLANNER_FQN.match(key):
        return PLANNER_NODE
    match = _EXECUTOR_KEY.match(key)
    if match is None:
        raise ConfigError(
            f"{source}: unknown node {key!r}; expected '/**/{PLANNER_NODE}', "
            f"'/<namespace>/{PLANNER_NODE}' or '/<robot_id>/{EXECUTOR_NODE}'"
        )
    return f"/{match.group(1)}/{EXECUTOR_NODE}"


def _check_planner_section(key: str, planner: PlannerParams, source: str) -> None:
    """A section naming the planner's fully qualified name names the namespace it
    runs in: ROS 2 applies `/site_b/timely_planner` to no planner in `timely`."""
    match = _PLANNER_FQN.match(key)
    if match is not None and match.group(1) != planner.namespace:
        raise ConfigError(
            f"{source}: section {key!r} names the planner in namespace "
            f"'{match.group(1)}', but its namespace parameter is {planner.namespace!r}; "
            f"set namespace: {match.group(1)} or name the section "
            f"'/{planner.namespace}/{PLANNER_NODE}' (or '/**/{PLANNER_NODE}')"
        )


def load_bringup(path: str | Path) -> BringupConfig:
    """Read and validate a bring-up YAML file (its values typed as rcl types them)."""
    return parse_bringup(read_params_file(path), str(path))


def read_params_file(path: str | Path) -> Any:
    """A ROS 2 parameter file's document, typed as rcl types it; ConfigError naming a
    file that cannot be read, is not UTF-8 or not YAML, or gives a key twice."""
    path = Path(path)
    try:
        return load_rcl_yaml(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path} is not UTF-8 text (byte {err.start}): save it as UTF-8"
        ) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {_yaml_problem(err)}") from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's error on one line: where, then what (its own text quotes the line)."""
    if not isinstance(err, yaml.MarkedYAMLError) or err.problem_mark is None:
        return " ".join(str(err).split())
    mark = err.problem_mark
    what = "; ".join(str(part) for part in (err.context, err.problem) if part)
    return f"line {mark.line + 1}, column {mark.column + 1}: {what}"


def planner_to_parameters(params: PlannerParams) -> dict[str, Any]:
    """The flattened ROS 2 parameters of a planner (for in-process nodes)."""
    raw = params.model_dump(exclude={"robots"})
    raw["robots"] = [r.id for r in params.robots]
    for r in params.robots:
        raw[r.id] = r.model_dump(exclude={"id", "limits"})
        if r.limits is not None:  # only what is set: ROS parameters have no None
            raw[r.id]["limits"] = r.limits.model_dump(exclude_defaults=True, mode="json")
    return flatten(raw)


def executor_to_parameters(params: ExecutorParams) -> dict[str, Any]:
    return flatten(params.model_dump(exclude={"robot_id"}))
