"""Configuration, goal validation and skill mapping: the checks that run before any
node talks to another (no DDS here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from timely_ros.config import (
    ConfigError,
    PlannerParams,
    flatten,
    load_bringup,
    parse_bringup,
    planner_params,
    planner_to_parameters,
    unflatten,
)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "ros2_ws" / "src" / "timely_ros" / "config"


def _planner(**params: object) -> dict[str, object]:
    body: dict[str, object] = {"robots": ["drone1", "arm1"], "drone1": {"type": "drone"}}
    body["arm1"] = {"type": "arm", "dispatch": False}
    body.update(params)
    return {"timely_planner": {"ros__parameters": body}}


def _tool(**fields: object) -> str:
    """The shipped validator as a robot's `tools` entry."""
    spec = {
        "name": "check",
        "plugin": "robot_models.tools.validator:SkillCallValidator",
        "options": {"robot_type": "drone"},
    }
    return json.dumps(spec | fields)


@pytest.mark.parametrize("name", ["sim_fleet.yaml", "tello.yaml", "demo.yaml"])
def test_shipped_configs_load(name: str) -> None:
    config = load_bringup(CONFIG_DIR / name)
    assert config.planner is not None and config.executors
    served = {r.id for r in config.planner.robots}
    assert {e.robot_id for e in config.executors} <= served


def test_planner_parameters_round_trip_through_ros_names() -> None:
    params = parse_bringup(_planner(kv_budget_mb=32.0)).planner
    assert params is not None
    flat = planner_to_parameters(params)
    assert flat["drone1.type"] == "drone" and flat["arm1.dispatch"] is False
    assert planner_params(unflatten(flat)) == params
    assert unflatten(flatten({"a": {"b": 1}, "c": 2})) == {"a": {"b": 1}, "c": 2}
    robot = params.robot("drone1")
    assert robot is not None and robot.action_name == "/drone1/execute_skill"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (_planner(kv_budget_mb=0), "kv_budget_mb"),
        (_planner(engine="vllm9"), "engine"),
        (_planner(status_period_s=2.0), "status_period_s"),
        (_planner(bogus=1), "bogus"),
        ({"timely_planner": {"ros__parameters": {"robots": ["d1"]}}}, "robot 'd1'"),
        ({"timely_planner": {"ros__parameters": {"robots": []}}}, "robots"),
        ({"/drone1/timely_skill_executor": {"ros__parameters": {"backend": "warp"}}}, "backend"),
        (
            {
                "/d1/timely_skill_executor": {
                    "ros__parameters": {"backend": "tello", "tello_port": 0}
                }
            },
            "tello_port",
        ),
        ({"some_node": {"ros__parameters": {}}}, "unknown node 'some_node'"),
        ({"timely_planner": {"params": {}}}, "ros__parameters"),
        ({"timely_planner": {"ros__parameters": ["a", "b"]}}, "must be a mapping .* got a list"),
        (
            {
                **_planner(),
                "/drone1/timely_skill_executor": {"ros__parameters": {"backend": "sim-arm"}},
            },
            "robot 'drone1' is planned as type 'drone', but its executor's backend 'sim-arm'",
        ),
        # values of the wrong type are not coerced (a queue of `true` is no queue of 1)
        (_planner(max_queue=True), "max_queue: expected a number, got True"),
        (_planner(kv_budget_mb="64"), "kv_budget_mb: expected a number, got '64'"),
        (
            {
                "timely_planner": {
                    "ros__parameters": {"robots": ["d1"], "d1": {"type": "drone", "dispatch": "no"}}
                }
            },
            "dispatch: expected true or false, got 'no'",
        ),
        # vLLM options: one line, and none an engine would silently ignore
        (
            _planner(engine="vllm-server", vllm_server_urls=["127.0.0.1:8101"]),
            r"^[^\n]*vllm_server_urls: vLLM server URL '127.0.0.1:8101' is not an http\(s\)",
        ),
        (
            _planner(engine="vllm", vllm_server_urls=["http://127.0.0.1:8101"]),
            "vllm_server_urls is read only by engine 'vllm-server', and this planner's "
            "engine is 'vllm'",
        ),
        (_planner(engine="vllm-server", vllm_server_urls=["http://h:1"], vllm_dtype="bfloat16"),
         "vllm_dtype is read only by engine 'vllm'"),
        (_planner(engine="torch", vllm_kv_space_gib=4), "vllm_kv_space_gib is read only by"),
        (_planner(engine="torch", vllm_gpu_memory_utilization=0.5),
         "vllm_gpu_memory_utilization is read only by engine 'vllm'"),
        (_planner(engine="torch", vllm_kv_offload_gib=2.0),
         "vllm_kv_offload_gib is read only by engine 'vllm'"),
        (_planner(engine="simulated", vllm_max_num_seqs=8),
         "vllm_max_num_seqs is read only by engine 'vllm' or 'vllm-server'"),
        (_planner(adapters={"base": "robot_models/checkpoints/variants/heavy-drone"}),
         "adapters: 'base' names the base model"),
        # a call-waiting policy handles the KV itself: another strategy would be ignored
        (_planner(policy="lamps", handling_strategy="swap"),
         r"handling_strategy swap: policy 'lamps' handles waiting generations' KV itself"),
        (_planner(policy="vllm-like", handling_strategy="preserve"), r"itself \(discard\)"),
        # tools: JSON objects of ToolSpecs (ROS 2 parameters hold no list of mappings)
        # a robot's settings named by its id, as the file spells them
        (_planner(drone1={"type": "dron"}), r"parameters: drone1\.type: Input should be 'drone'"),
        (_planner(drone1={"type": "drone", "tools": ["look"]}),
         r"tools\[0\]: not a JSON object: Expecting value"),
        (_planner(drone1={"type": "drone", "tools": ['["look"]']}),
         r"tools\[0\]: not a JSON object: '\[\"look\"\]'"),
        (_planner(drone1={"type": "drone", "tools": ['{"name": "look"}']}),
         r"tools\[0\]: plugin: Field required"),
        (_planner(drone1={"type": "drone", "tools": [_tool(wall_s=0)]}),
         r"tools\[0\]: wall_s: Input should be greater than 0"),
        (_planner(drone1={"type": "drone", "tools": [_tool(), _tool()]}),
         r"drone1.tools\[1\]: a second tool named 'check'"),
        (_planner(drone1={"type": "drone", "tools": [_tool()[:-1] + ', "options": {}}']}),
         r"drone1.tools\[0\]: key 'options' is given twice"),
        (_planner(drone1={"type": "drone", "tools": [_tool(wall_s=True)]}),
         r"drone1.tools\[0\]: wall_s: Input should be a valid number"),
        (_planner(drone1={"type": "drone", "tools": [_tool(network="yes")]}),
         r"drone1.tools\[0\]: network: Input should be a valid boolean"),
        (_planner(drone1={"type": "drone", "streamed_skills": True,
                          "tools": [_tool(name="streamed_path")]}),
         r"drone1.tools\[0\]: 'streamed_path' is the name of the planner's own tool"),
        # two sections for one node: ROS 2 merges those that match, timely up kept one
        ({**_planner(), "/**/timely_planner": _planner(engine="torch")["timely_planner"]},
         r"sections 'timely_planner' and '/\*\*/timely_planner' both configure the planner"),
        ({**_planner(), "/timely/timely_planner": _planner()["timely_planner"]},
         "both configure the planner"),
        ({"/d1/timely_skill_executor": {"ros__parameters": {"backend": "sim-drone"}},
          "d1/timely_skill_executor": {"ros__parameters": {"backend": "sim-drone"}}},
         "both configure /d1/timely_skill_executor"),
        ({"/site_b/timely_planner": _planner()["timely_planner"]},
         r"names the planner in namespace 'site_b', but its namespace parameter is 'timely'"),
        # a robot's settings: a mapping under an id that is no planner parameter
        (_planner(robots=["drone1", "engine"]),
         "robot id 'engine' is the name of a planner parameter; give the robot another id"),
        (_planner(robots=["drone1", "robots"]), "robot id 'robots' is the name of a planner"),
        (_planner(arm1="arm"), r"robot 'arm1': its settings must be a mapping .*got 'arm'"),
        # bounded quantities: no nan or inf, no timer past time_t
        (_planner(kv_budget_mb=float("nan")), "kv_budget_mb: Input should be a finite number"),
        (_planner(copy_bias=float("inf")), "copy_bias: Input should be a finite number"),
        (_planner(result_timeout_s=1e12),
         "result_timeout_s: Input should be less than or equal to 604800"),
        ({"/d1/timely_skill_executor": {"ros__parameters": {"backend": "sim-drone",
                                                           "time_scale": float("nan")}}},
         "time_scale: Input should be a finite number"),
        # the scene a robot reports: text the planner takes, no longer than it takes
        ({"/d1/timely_skill_executor": {"ros__parameters": {"backend": "sim-drone",
                                                           "scene": "a sofa \u202e"}}},
         "scene: Value error, invisible format character U\\+202E"),
        ({"/d1/timely_skill_executor": {"ros__parameters": {"backend": "sim-drone",
                                                           "scene": "x" * 8001}}},
         "scene: String should have at most 8000 characters"),
        # the Tello's address: IPv4 (djitellopy's sockets) or a host name
        ({"/t1/timely_skill_executor": {"ros__parameters": {"backend": "tello",
                                                           "tello_host": "999.1.1.1"}}},
         "tello_host: Value error, '999.1.1.1' is not an IPv4 address"),
        ({"/t1/timely_skill_executor": {"ros__parameters": {"backend": "tello",
                                                           "tello_host": "my tello"}}},
         "'my tello' is neither an IPv4 address nor a host name"),
    ],
)  # fmt: skip
def test_bad_config_names_what_is_wrong(doc: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_bringup(doc)


@pytest.mark.parametrize(("key", "namespace"), [
    ("/timely/timely_planner", None),  # the node's fully qualified name, default namespace
    ("/site_b/timely_planner", "site_b"),
    ("/site_b/east/timely_planner", "site_b/east"),
])  # fmt: skip
def test_the_planner_section_may_name_its_fully_qualified_name(
    key: str, namespace: str | None
) -> None:
    body = _planner(**({"namespace": namespace} if namespace else {}))["timely_planner"]
    planner = parse_bringup({key: body}).planner
    assert planner is not None and planner.namespace == (namespace or "timely")


@pytest.mark.parametrize("host", ["192.168.10.1", "127.0.0.2", "tello.local", "tello-1"])
def test_a_tello_host_is_an_address_or_a_host_name(host: str) -> None:
    doc = {"/t1/timely_skill_executor": {"ros__parameters": {"backend": "tello",
                                                              "tello_host": host}}}  # fmt: skip
    assert parse_bringup(doc).executors[0].tello_host == host


def test_unreadable_and_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_bringup(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("timely_planner: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_bringup(bad)
    dup = tmp_path / "dup.yaml"
    dup.write_text(yaml.safe_dump(_planner(robots=["drone1", "drone1"])))
    with pytest.raises(ConfigError, match="unique"):
        load_bringup(dup)
    twice = tmp_path / "twice.yaml"  # a robot's settings given twice: the last won silently
    twice.write_text(
        "timely_planner:\n  ros__parameters:\n    robots: [d1]\n"
        "    d1: {type: drone}\n    d1: {type: arm}\n"
    )
    with pytest.raises(ConfigError, match="key 'd1' is given twice"):
        load_bringup(twice)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("timely_planner: {}  # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_bringup(latin)


def test_goal_checks_name_the_field() -> None:
    from timely_interfaces.action import PlanTask
    from timely_interfaces.msg import Tuf
    from timely_ros.goals import GoalError, check_goal

    params = parse_bringup(_planner()).planner
    assert params is not None

    def goal(**fields: object) -> PlanTask.Goal:
        base: dict[str, object] = {"robot_id": "drone1", "instruction": "find the cat"}
        base["urgency"] = "normal"
        base.update(fields)
        return PlanTask.Goal(**base)

    ok = check_goal(goal(dispatch=True), params)
    assert ok.request.tuf.expected_response_time_s == 1.0 and ok.dispatch
    urgent = check_goal(goal(urgency="urgent"), params)
    assert urgent.request.tuf.initial_utility == 2.0
    custom = Tuf(expected_response_time_s=0.5, slope=-1.0, initial_utility=3.0)
    assert check_goal(goal(urgency="", tuf=custom), params).request.tuf.initial_utility == 3.0
    # a goal as a client that fills only robot and instruction sends it: 'normal'
    bare = check_goal(PlanTask.Goal(robot_id="drone1", instruction="find the cat"), params)
    assert bare.request.tuf == ok.request.tuf and not bare.dispatch
    cases = [
        (goal(robot_id="drone9"), "robot_id 'drone9'"),
        (goal(robot_type="arm"), "robot_type 'arm'"),
        (goal(robot_id="arm1", dispatch=True), "without dispatch"),
        (goal(urgency="asap"), "urgency 'asap'"),
        (
            goal(urgency="", tuf=Tuf(slope=-1.0, initial_utility=1.0)),
            "expected_response_time_s must be > 0",
        ),
        (
            goal(urgency="", tuf=Tuf(expected_response_time_s=1.0, slope=1.0, initial_utility=1.0)),
            "slope",
        ),
        (
            goal(
                urgency="", tuf=Tuf(expected_response_time_s=1.0, slope=-1.0, initial_utility=0.0)
            ),
            "initial_utility",
        ),
        (
            goal(
                urgency="",
                tuf=Tuf(expected_response_time_s=1e308, slope=-1e308, initial_utility=1e308),
            ),
            r"tuf\.expected_response_time_s: Input should be less than or equal to 86400",
        ),
        (
            goal(
                urgency="", tuf=Tuf(expected_response_time_s=1.0, slope=-1.0, initial_utility=1e9)
            ),
            r"tuf\.initial_utility",
        ),
        (goal(instruction=""), "instruction"),
        (goal(instruction="x" * 5000), "instruction"),
        (goal(urgency="urgent", tuf=custom), "both set"),  # not silently the preset
        (goal(tuf=Tuf(expected_response_time_s=float("nan"))), "both set"),
        (goal(instruction="go to the \u202eleft"), "U\\+202E at position 10"),
        (goal(scene="a\u200bb"), "format character U\\+200B"),
    ]
    for bad, message in cases:
        with pytest.raises(GoalError, match=message):
            check_goal(bad, params)
    joined = check_goal(goal(instruction="say \u0646\u0645\u200c\u06cc"), params)  # ZWNJ
    assert "\u200c" in joined.request.instruction


def test_the_client_helper_refuses_text_ros_would_truncate() -> None:
    from timely_ros.plan_client import make_goal

    with pytest.raises(ValueError, match="NUL character at position 4"):
        make_goal("drone1", "find\x00 the cat")
    with pytest.raises(ValueError, match="scene has a NUL"):
        make_goal("drone1", "find the cat", scene="sofa\x00")
    assert make_goal("drone1", "find the cat").urgency == "normal"
    from timely_interfaces.msg import Tuf

    custom = Tuf(expected_response_time_s=0.5, slope=-1.0, initial_utility=3.0)
    assert make_goal("drone1", "find the cat", tuf=custom).urgency == ""  # the tuf counts


def test_tello_sdk_mapping() -> None:
    from timely_ros.backends.base import SkillFailed
    from timely_ros.backends.tello import sdk_commands

    from robot_models.skills import SkillSet

    skills = SkillSet.load("drone", streamed=True)
    assert sdk_commands(skills.get("move_forward"), (120,)) == ["forward 120"]
    assert sdk_commands(skills.get("move_backward"), (30,)) == ["back 30"]
    assert sdk_commands(skills.get("turn_ccw"), (45,)) == ["ccw 45"]
    assert sdk_commands(skills.get("takeoff"), ()) == ["takeoff"]
    assert sdk_commands(skills.get("delay"), (1.5,)) == []
    with pytest.raises(SkillFailed, match="is_visible"):
        sdk_commands(skills.get("is_visible"), ("cat",))
    # a path: each leg as moves along the axes the SDK names, zero components skipped
    path = skills.get("fly_path")
    assert sdk_commands(path, (100, 0, 50, -30, -40, 0)) == [
        "forward 100",
        "up 50",
        "back 30",
        "right 40",
    ]
    with pytest.raises(SkillFailed, match=r"leg 2 \(0,15,0\): left 15 cm is shorter"):
        sdk_commands(path, (100, 0, 0, 0, 15, 0))


def test_fake_tello_refuses_non_loopback() -> None:
    from timely_ros.fake_tello import FakeTello

    with pytest.raises(ValueError, match="loopback only"):
        FakeTello(host="192.168.10.1")
    with pytest.raises(ValueError, match="loopback only"):
        FakeTello(host="127.0.0.2", client_host="10.0.0.1")


def test_a_kv_budget_too_small_for_the_prompts_names_the_setting(tmp_path: Path) -> None:
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import build_service

    raw = _planner(engine="simulated", model_path=str(planner_checkpoint(tmp_path)))
    params = parse_bringup(raw).planner
    assert params is not None
    with pytest.raises(ConfigError, match=r"kv_budget_mb=64 is too small: robot 'drone1': prefix"):
        build_service(params)


def test_a_torch_kv_budget_below_one_block_names_kv_budget_mb(tmp_path: Path) -> None:
    """Not the engine's own `device_kv_bytes=1048`, which no config file has."""
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import build_service

    raw = _planner(engine="torch", model_path=str(planner_checkpoint(tmp_path)), kv_budget_mb=0.001)
    params = parse_bringup(raw).planner
    assert params is not None
    with pytest.raises(ConfigError, match=r"^kv_budget_mb=0.001 is less than one KV block of "
                       r"this model \(0.03125 MiB\)") as raised:  # fmt: skip
        build_service(params)
    assert "device_kv_bytes" not in str(raised.value)


def test_a_kv_budget_that_holds_the_prompts_but_no_whole_plan_is_refused(
    tmp_path: Path,
) -> None:
    """Goals would be accepted and fail part way, their robots having run the first
    segments: the budget is refused at configure, naming what it would need."""
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import build_service

    from timely_core.service import PlanningService

    def service(kv_budget_mb: float) -> PlanningService:
        raw = _planner(
            engine="simulated", model_path=str(planner_checkpoint(tmp_path)),
            kv_budget_mb=kv_budget_mb,
        )  # fmt: skip
        params = parse_bringup(raw).planner
        assert params is not None
        return build_service(params)

    memory = service(4096.0).engine.memory()
    block_mb = memory.bytes_per_block / 2**20
    pinned = memory.pinned_prefix_blocks
    short = rf"{pinned} of them the robots' prompt prefixes; the 4 left cannot hold one whole"
    with pytest.raises(ConfigError, match=short + r" plan \(\d+ blocks: max_tokens 256"):
        service((pinned + 4) * block_mb)
    needed = -(-(memory.block_size + 64 + 256) // memory.block_size)
    service((pinned + needed) * block_mb)  # one whole plan fits


def test_the_planner_starts_each_robots_tools_and_names_one_that_cannot_start(
    tmp_path: Path,
) -> None:
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import build_service

    def planner(tools: list[str]) -> PlannerParams:
        raw = _planner(
            engine="simulated", model_path=str(planner_checkpoint(tmp_path)),
            kv_budget_mb=4096.0, drone1={"type": "drone", "tools": tools},
        )  # fmt: skip
        params = parse_bringup(raw).planner
        assert params is not None
        assert planner_params(unflatten(planner_to_parameters(params))) == params
        return params

    service = build_service(planner([_tool()]))
    try:
        [info] = service._state.tools.tools("drone1").values()
        assert info.validates and "tk" in info.skills
        assert service._state.tools.tools("arm1") == {}
    finally:
        service.close_tools()
    missing = _tool(plugin="robot_models.tools.nowhere:Nothing")
    with pytest.raises(ConfigError, match=r"drone1.tools\[0\] \('check'\): .*nowhere"):
        build_service(planner([missing]))
    arm_only = _tool(options={"robot_type": "arm"})  # the arm's skills: no drone calls them
    with pytest.raises(ConfigError, match=r"drone1.tools\[0\] \('check'\): .*never call"):
        build_service(planner([arm_only]))


def test_the_planner_sets_the_handling_strategy(tmp_path: Path) -> None:
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import build_service

    from timely_core.engine.protocol import HandlingStrategy

    assert parse_bringup(_planner()).planner.handling_strategy == "auto"
    with pytest.raises(ConfigError, match="handling_strategy"):
        parse_bringup(_planner(handling_strategy="keep"))
    raw = _planner(
        engine="simulated",
        model_path=str(planner_checkpoint(tmp_path)),
        kv_budget_mb=4096.0,
        handling_strategy="swap",
    )
    params = parse_bringup(raw).planner
    assert params is not None
    assert planner_params(unflatten(planner_to_parameters(params))) == params
    assert build_service(params).config.handling_strategy is HandlingStrategy.SWAP


def test_the_planner_sets_grammar_closing_grounded_names_copy_bias_and_kv_prefetch(
    tmp_path: Path,
) -> None:
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import build_service

    defaults = parse_bringup(_planner()).planner
    assert defaults is not None
    assert (defaults.grammar_close_within, defaults.kv_prefetch) == (32, True)
    assert not defaults.grounded_names
    assert defaults.copy_bias == 10.0
    with pytest.raises(ConfigError, match="copy_bias"):
        parse_bringup(_planner(copy_bias=-1.0))
    with pytest.raises(ConfigError, match="grammar_close_within"):
        parse_bringup(_planner(grammar_close_within=-1))
    with pytest.raises(ConfigError, match="grounded_names"):
        parse_bringup(_planner(grounded_names="sometimes"))
    assert defaults.plan_candidates == 0
    with pytest.raises(ConfigError, match="plan_candidates"):
        parse_bringup(_planner(plan_candidates=33))
    with pytest.raises(ConfigError, match=r"plan_candidates needs engine 'torch'.*'simulated'"):
        parse_bringup(_planner(engine="simulated", plan_candidates=4))
    raw = _planner(
        engine="simulated",
        model_path=str(planner_checkpoint(tmp_path)),
        kv_budget_mb=4096.0,
        grammar_close_within=8,
        grounded_names=True,
        copy_bias=4.5,
        kv_prefetch=False,
    )
    params = parse_bringup(raw).planner
    assert params is not None
    assert planner_params(unflatten(planner_to_parameters(params))) == params
    config = build_service(params).config
    assert (config.grammar_close_within, config.kv_prefetch) == (8, False)
    assert config.grounded_names
    assert config.copy_bias == 4.5


def test_the_torch_planner_decodes_plan_candidates_when_set(tmp_path: Path) -> None:
    from timely_ros.checkpoint import planner_checkpoint
    from timely_ros.service_factory import build_service

    from timely_core.engine.plan_candidates import CandidateEngine

    raw = _planner(engine="torch", model_path=str(planner_checkpoint(tmp_path)), plan_candidates=4)
    params = parse_bringup(raw).planner
    assert params is not None
    assert planner_params(unflatten(planner_to_parameters(params))) == params
    service = build_service(params)
    try:
        assert service.config.plan_candidates == 4
        assert isinstance(service.engine, CandidateEngine)
    finally:
        service.close_tools()


def test_a_variant_trained_for_another_robot_type_is_refused() -> None:
    from timely_ros.fleet_variants import check_robot_types

    variants = "robot_models/checkpoints/variants"
    adapters = {"packing-arm": f"{variants}/packing-arm", "heavy": f"{variants}/heavy-drone"}

    def params(drone_variant: str) -> PlannerParams:
        doc = _planner(engine="torch", adapters=adapters)
        body = doc["timely_planner"]["ros__parameters"]  # type: ignore[index]
        body["drone1"] = {"type": "drone", "variant": drone_variant}
        parsed = parse_bringup(doc).planner
        assert parsed is not None
        return parsed

    with pytest.raises(ConfigError, match=r"robot 'drone1' is a drone, but its variant "
                       r"'packing-arm' \(.*packing-arm\) was trained for the arm"):  # fmt: skip
        check_robot_types(params("packing-arm"))
    check_robot_types(params("heavy"))  # a drone's variant, under another name


def test_the_planner_config_names_a_truncated_adapter(tmp_path: Path) -> None:
    """The planner's configuration error carries the adapter's name and folder."""
    import shutil

    from timely_ros.fleet_variants import load_adapters

    from robot_models.checkpoints import default_planner_path
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    planner = default_planner_path()
    folder = tmp_path / "heavy-drone"
    shutil.copytree(planner.parent / "variants" / "heavy-drone", folder)
    weights = folder / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    doc = _planner(engine="torch", adapters={"heavy-drone": str(folder)})
    params = parse_bringup(doc).planner
    assert params is not None
    engine = TorchEngine(planner, EngineConfig(device_kv_bytes=2**20, host_kv_bytes=0))
    with pytest.raises(ConfigError) as raised:
        load_adapters(engine, params, planner)
    assert str(raised.value).startswith(
        f"adapters.heavy-drone: adapter 'heavy-drone' ({folder}): adapter_model.safetensors "
        "is unreadable"
    )
