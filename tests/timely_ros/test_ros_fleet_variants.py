"""Fleet variants in the planner config (no DDS here): adapters loaded by name, each
robot's variant checked against them and against the engine, bad folders named, and
/timely/status reporting the resident variants and the weights' memory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from builtin_interfaces.msg import Time
from safetensors.torch import load_file, save_file
from timely_ros.config import (
    ConfigError,
    PlannerParams,
    load_bringup,
    parse_bringup,
    planner_params,
    planner_to_parameters,
    unflatten,
)
from timely_ros.service_factory import build_service
from timely_ros.status import GoalCounts, RobotState, status_msg

from robot_models.checkpoints import default_planner_path
from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    StartNodes,
    planner_entry,
    wait_until,
)

VARIANTS = default_planner_path().parent / "variants"
HEAVY = "robot_models/checkpoints/variants/heavy-drone"  # relative: from the repo root


def _planner(**params: object) -> dict[str, object]:
    body: dict[str, object] = {
        "robots": ["drone1", "drone2"],
        "drone1": {"type": "drone", "variant": "heavy-drone"},
        "drone2": {"type": "drone"},
        "adapters": {"heavy-drone": HEAVY},
        "kv_budget_mb": 8.0,
    }
    body.update(params)
    return {"timely_planner": {"ros__parameters": body}}


def _params(**params: object) -> PlannerParams:
    planner = parse_bringup(_planner(**params)).planner
    assert planner is not None
    return planner


def test_variants_round_trip_through_ros_names() -> None:
    params = _params()
    flat = planner_to_parameters(params)
    assert flat["adapters.heavy-drone"] == HEAVY and flat["drone1.variant"] == "heavy-drone"
    assert flat["drone2.variant"] == ""  # the base model
    assert planner_params(unflatten(flat)) == params
    assert "adapters" not in unflatten(
        planner_to_parameters(_params(adapters={}, drone1={"type": "drone"}))
    )


def test_the_shipped_fleet_variants_config_serves_its_variants_on_one_base() -> None:
    config_dir = Path(__file__).resolve().parents[2] / "ros2_ws/src/timely_ros/config"
    params = load_bringup(config_dir / "fleet_variants.yaml").planner
    assert params is not None
    service = build_service(params)
    weights = service.resident_weights()
    assert weights is not None
    assert weights.names() == [
        "warehouse-drone",
        "heavy-drone",
        "packing-arm",
        "warehouse-drone-full",
    ]
    assert service.robot_variants() == {
        "drone1": "warehouse-drone",
        "drone2": "heavy-drone",
        "drone3": None,
        "arm1": "packing-arm",
        "drone4": "warehouse-drone-full",
    }
    # the full fine-tune is reported as its own blocks (the rest shared with the base)
    msg = status_msg(service.stats(), None, params, GoalCounts(0, 0), Time(), weights=weights)
    assert list(msg.variant_kinds) == ["lora", "lora", "lora", "blocks"]
    assert 0 < msg.variant_bytes[-1] < msg.base_weight_bytes / 2
    # warehouse-drone and packing-arm adapt only the last layer after its k/v (the
    # base's KV); heavy-drone's v_proj and the fine-tune's attention write their own
    assert list(msg.variant_shares_base_kv) == [True, False, True, False]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"adapters": {}},
            r"robot 'drone1': variant 'heavy-drone' is not loaded \(adapters: none\)",
        ),
        (
            {"adapters": {"warehouse-drone": "x"}},
            r"robot 'drone1': variant 'heavy-drone' is not loaded \(adapters: warehouse-drone\)",
        ),
        (
            {"engine": "simulated"},
            r"adapters: engine 'simulated' cannot serve fleet variants",
        ),
        (
            {"engine": "simulated", "adapters": {}},
            r"robot 'drone1' \(variant 'heavy-drone'\): engine 'simulated' cannot serve",
        ),
        ({"adapters": {"heavy drone": HEAVY}}, r"adapters: variant name 'heavy drone'"),
        ({"adapters": {"heavy-drone": " "}}, r"adapters\.heavy-drone: give the adapter's folder"),
        (
            {"drone2": {"type": "drone", "variant": "a b"}},
            r"drone2\.variant: String should match pattern",
        ),
    ],
)
def test_bad_variant_configs_name_what_is_wrong(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_bringup(_planner(**changes))


def test_adapter_folders_that_do_not_fit_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"adapters\.heavy-drone: no adapter folder at 'nowhere'"):
        build_service(_params(adapters={"heavy-drone": "nowhere"}))
    planner = str(default_planner_path())  # a checkpoint, but the base itself
    with pytest.raises(ConfigError, match=r"adapters\.heavy-drone: .*every block equals the base"):
        build_service(_params(adapters={"heavy-drone": planner}))
    with pytest.raises(ConfigError, match=r"adapters\.heavy-drone: .*neither a peft LoRA"):
        build_service(_params(adapters={"heavy-drone": str(tmp_path)}))  # an empty folder
    # an adapter of another base: q_proj's input wider than this planner's hidden size
    other = tmp_path / "other-base"
    shutil.copytree(VARIANTS / "heavy-drone", other)
    tensors = load_file(str(other / "adapter_model.safetensors"))
    key = "base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight"
    rank, hidden = tensors[key].shape
    tensors[key] = torch.zeros(rank, 2 * hidden)
    save_file(tensors, str(other / "adapter_model.safetensors"))
    with pytest.raises(
        ConfigError,
        match=rf"adapters\.heavy-drone: adapter 'heavy-drone' .*layers\.1\.self_attn\.q_proj"
        rf"\.lora_A is \[{rank}, {2 * hidden}\], the base model needs \[{rank}, {hidden}\]",
    ):
        build_service(_params(adapters={"heavy-drone": str(other)}))


def test_an_adapter_not_widened_with_its_planner_says_how_to_widen_it(tmp_path: Path) -> None:
    from robot_models.checkpoints.widen_heads import widen

    widened = widen(default_planner_path(), tmp_path / "planner-hd64", 64)
    params = _params(model_path=str(widened), kv_budget_mb=16.0)  # KV per token doubled
    with pytest.raises(ConfigError, match=r"adapters\.heavy-drone: adapter .* is \[") as raised:
        build_service(params)
    assert "has its attention heads widened to 64" in str(raised.value)
    assert f"--head-dim 64 --base {default_planner_path()}" in str(raised.value)
    adapter = widen(
        VARIANTS / "heavy-drone", tmp_path / "heavy-hd64", 64, base=default_planner_path()
    )
    service = build_service(
        _params(model_path=str(widened), kv_budget_mb=16.0, adapters={"heavy-drone": str(adapter)})
    )
    weights = service.resident_weights()
    assert weights is not None and weights.names() == ["heavy-drone"]
    assert service.robot_variants() == {"drone1": "heavy-drone", "drone2": None}


def test_status_reports_resident_variants_and_memory() -> None:
    base_service = build_service(_params(adapters={}, drone1={"type": "drone"}))
    base = base_service.resident_weights()
    assert base is not None and base.variants == ()
    params = _params(
        adapters={"heavy-drone": HEAVY, "warehouse-drone": str(VARIANTS / "warehouse-drone")}
    )
    service = build_service(params)
    assert service.robot_variants() == {"drone1": "heavy-drone", "drone2": None}
    weights = service.resident_weights()
    assert weights is not None
    adapter_bytes = {
        name: sum(
            t.nbytes for t in load_file(str(VARIANTS / name / "adapter_model.safetensors")).values()
        )
        for name in ("heavy-drone", "warehouse-drone")
    }
    robots = [RobotState("drone1", "idle"), RobotState("drone2", "planning")]
    stats = service.stats()
    msg = status_msg(stats, None, params, GoalCounts(0, 0), Time(), robots=robots, weights=weights)
    assert list(msg.variant_names) == ["heavy-drone", "warehouse-drone"]
    assert list(msg.variant_kinds) == ["lora", "lora"]
    assert list(msg.variant_bytes) == [
        adapter_bytes["heavy-drone"],
        adapter_bytes["warehouse-drone"],
    ]
    assert msg.base_weight_bytes == base.base_bytes  # the base counted once
    assert msg.weight_bytes_total == base.total_bytes + sum(adapter_bytes.values())
    assert list(msg.robot_ids) == ["drone1", "drone2"]
    assert list(msg.robot_variants) == ["heavy-drone", ""]
    on_sim = status_msg(stats, None, params, GoalCounts(0, 0), Time(), robots=robots)
    assert (on_sim.base_weight_bytes, on_sim.weight_bytes_total) == (0, 0)
    assert list(on_sim.variant_names) == []


def _direct_plan(instruction: str, scene: str, variant: str | None) -> str:
    """The greedy plan of the torch engine driven straight through with `variant`,
    under the drone's grammar, as the planner decodes it."""
    from tokenizers import Tokenizer

    from robot_models.language import load_language
    from timely_core.engine.protocol import SamplingParams
    from timely_core.engine.torch.engine import TorchEngine
    from timely_core.language.grammar import language_grammar
    from timely_core.serving.robots import encode_prefix, encode_request

    path = default_planner_path()
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    drone = load_language("drone")
    engine = TorchEngine(path)
    engine.load_adapter("heavy-drone", VARIANTS / "heavy-drone")
    prompt = encode_prefix(tokenizer, drone.prompt_prefix()) + encode_request(
        tokenizer, drone.format_request(scene, instruction)
    )
    engine.add(
        0,
        prompt,
        SamplingParams(temperature=0.0, max_tokens=256, grammar=language_grammar(drone)),
        variant=variant,
    )
    ids: list[int] = []
    finished = False
    while not finished:
        for out in engine.step([0]):
            finished = out.finished
            ids.append(out.token_id)
    return str(tokenizer.decode([i for i in ids if i != engine.eos_token_id]))


@pytest.mark.ros
def test_planner_node_serves_each_robot_its_variant_and_reports_it(
    node_processes: StartNodes, ros_client: RosClient
) -> None:
    """PlanTask is unchanged: the robot's variant comes from the planner config."""
    from action_msgs.msg import GoalStatus
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import TOPIC

    instruction, scene = "Fly forward 200 cm", "visible: door, lamp"
    expected = {v: _direct_plan(instruction, scene, v) for v in ("heavy-drone", None)}
    assert expected["heavy-drone"] != expected[None]
    planner = planner_entry(
        {"drone1": "drone", "drone2": "drone"},
        engine="torch",
        kv_budget_mb=8.0,
        status_period_s=0.2,
        adapters={"heavy-drone": HEAVY},
    )
    body = planner["/**/timely_planner"]["ros__parameters"]
    body["drone1"] = {"type": "drone", "variant": "heavy-drone", "dispatch": False}
    body["drone2"] = {"type": "drone", "dispatch": False}
    planner_proc = node_processes(planner, "planner", "planner")
    statuses: list[ServiceStatus] = []
    ros_client.node.create_subscription(ServiceStatus, "/timely/status", statuses.append, TOPIC)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(120), planner_proc.output()
    calls = {
        robot: client.send(make_goal(robot, instruction, scene=scene, dispatch=False))
        for robot in ("drone1", "drone2")
    }
    for robot, call in calls.items():
        assert call.done.wait(120), f"{robot}: no result\n{planner_proc.output()[-3000:]}"
        result = call.final_result()
        assert call.status == GoalStatus.STATUS_SUCCEEDED, (robot, result.error)
    assert calls["drone1"].final_result().plan == expected["heavy-drone"]
    assert calls["drone2"].final_result().plan == expected[None]

    wait_until(lambda: bool(statuses), 30, "a status")
    status = statuses[-1]
    adapter_bytes = sum(
        t.nbytes
        for t in load_file(str(VARIANTS / "heavy-drone" / "adapter_model.safetensors")).values()
    )
    assert list(status.variant_names) == ["heavy-drone"]
    assert list(status.variant_kinds) == ["lora"]
    assert list(status.variant_bytes) == [adapter_bytes]
    assert status.weight_bytes_total == status.base_weight_bytes + adapter_bytes
    assert status.base_weight_bytes > 0
    assert dict(zip(status.robot_ids, status.robot_variants, strict=True)) == {
        "drone1": "heavy-drone",
        "drone2": "",
    }


def test_timely_status_shows_each_robot_variant_and_the_weights() -> None:
    from rich.console import Console
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.status_cli import render

    msg = ServiceStatus(
        engine="torch",
        robot_ids=["drone1", "drone2"],
        robot_states=["idle", "idle"],
        robot_goal_ids=["", ""],
        robot_variants=["heavy-drone", ""],
        base_weight_bytes=8 * 2**20,
        variant_names=["heavy-drone", "site-head"],
        variant_kinds=["lora", "blocks"],
        variant_bytes=[2**19, 2**20],
        variant_shares_base_kv=[False, True],
        weight_bytes_total=8 * 2**20 + 2**19 + 2**20,
    )
    console = Console(record=True, width=200)
    console.print(render(msg))
    text = console.export_text()
    assert "model weights: 9.50 MiB" in text
    lines = text.splitlines()
    assert any("drone1" in line and "heavy-drone" in line for line in lines)
    assert any("drone2" in line and "base" in line for line in lines)
    assert any("heavy-drone" in line and "lora" in line and "0.50" in line for line in lines)
    assert any("site-head" in line and "base's" in line for line in lines)
    assert not any("heavy-drone" in line and "base's" in line for line in lines)
    console = Console(record=True, width=200)
    console.print(render(ServiceStatus(engine="simulated")))
    assert "model weights" not in console.export_text()  # not reported: not shown
