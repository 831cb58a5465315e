"""The planner served from a block zoo (`zoo`, `zoo_base`; no DDS here): the robots'
variants are the zoo's, loaded from it with the base's blocks held once, reported as
from folders, planning as from folders; every bad zoo config named."""

from __future__ import annotations

from pathlib import Path

import pytest
from timely_ros.config import (
    ConfigError,
    PlannerParams,
    parse_bringup,
    planner_params,
    planner_to_parameters,
    unflatten,
)
from timely_ros.service_factory import build_service
from tokenizers import Tokenizer

from robot_models.checkpoints import default_planner_path
from robot_models.language import load_language
from timely_core.blocks.zoo import BlockZoo
from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.zoo_model import ZooModel
from timely_core.language.grammar import language_grammar
from timely_core.serving.robots import encode_prefix, encode_request

PLANNER = default_planner_path()
VARIANTS = PLANNER.parent / "variants"
ROBOTS = {
    "drone1": {"type": "drone", "variant": "heavy-drone"},
    "drone2": {"type": "drone"},
    "arm1": {"type": "arm", "variant": "packing-arm"},
    "drone4": {"type": "drone", "variant": "warehouse-drone-full"},
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    zoo = BlockZoo(tmp_path_factory.mktemp("fleet") / "zoo")
    zoo.add("base", PLANNER)
    for name in ("heavy-drone", "packing-arm", "warehouse-drone-full", "warehouse-drone"):
        zoo.add(name, VARIANTS / name, "base")
    return zoo.root


def _params(zoo: Path | str, **changes: object) -> PlannerParams:
    body: dict[str, object] = {
        "zoo": str(zoo),
        "robots": list(ROBOTS),
        **ROBOTS,
        "kv_budget_mb": 16.0,
        **changes,
    }
    planner = parse_bringup({"timely_planner": {"ros__parameters": body}}).planner
    assert planner is not None
    return planner


def _plan(engine: object, variant: str | None, instruction: str) -> list[int]:
    """The engine's greedy plan of one drone request under the drone's grammar."""
    drone = load_language("drone")
    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    prompt = encode_prefix(tokenizer, drone.prompt_prefix()) + encode_request(
        tokenizer, drone.format_request("visible: door, rack", instruction)
    )
    params = SamplingParams(max_tokens=64, grammar=language_grammar(drone))
    engine.add(0, prompt, params, variant=variant)  # type: ignore[attr-defined]
    ids: list[int] = []
    finished = False
    while not finished:
        (out,) = engine.step([0])  # type: ignore[attr-defined]
        ids.append(out.token_id)
        finished = out.finished
    return ids


def test_the_planner_serves_the_robots_variants_from_the_zoo(
    zoo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = _params(zoo)
    assert planner_params(unflatten(planner_to_parameters(params))) == params
    opened: list[str] = []
    open_model = ZooModel.open

    def counted(root: Path, variant: str) -> ZooModel:
        opened.append(variant)
        return open_model(root, variant)

    monkeypatch.setattr(ZooModel, "open", staticmethod(counted))
    service = build_service(params)
    assert opened == ["base"]  # once, for the tokenizer and the engine alike
    folders = build_service(
        _params(
            "",
            adapters={n: str(VARIANTS / n) for n in ("heavy-drone", "packing-arm")}
            | {"warehouse-drone-full": str(VARIANTS / "warehouse-drone-full")},
        )
    )
    ours, theirs = service.resident_weights(), folders.resident_weights()
    assert ours is not None and theirs is not None
    # only the variants robots name are loaded (warehouse-drone stays in the zoo)
    assert ours.names() == ["heavy-drone", "packing-arm", "warehouse-drone-full"]
    assert [(v.kind, v.nbytes, v.blocks) for v in ours.variants] == [
        (v.kind, v.nbytes, v.blocks) for v in theirs.variants
    ]
    assert ours.total_bytes == theirs.total_bytes
    assert all(v.source.startswith(str(zoo / "variants")) for v in ours.variants)
    assert service.robot_variants() == {
        "drone1": "heavy-drone",
        "drone2": None,
        "arm1": "packing-arm",
        "drone4": "warehouse-drone-full",
    }
    for variant in ("heavy-drone", "warehouse-drone-full"):
        plan = _plan(service.engine, variant, "fly up 1 meter then turn left")
        assert plan == _plan(folders.engine, variant, "fly up 1 meter then turn left")
    service.close_tools()
    folders.close_tools()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"engine": "vllm"}, r"zoo: engine 'vllm' reads checkpoint folders, only engine torch"),
        (
            {"adapters": {"heavy-drone": str(VARIANTS / "heavy-drone")}},
            r"adapters: with zoo every variant comes from the zoo",
        ),
        ({"zoo_base": "a b"}, r"zoo_base: String should match pattern"),
    ],
)
def test_bad_zoo_configs_are_refused_when_read(
    zoo: Path, changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _params(zoo, **changes)


def test_a_zoo_that_cannot_serve_the_robots_is_named(zoo: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"zoo: block zoo .*nowhere is not a folder"):
        build_service(_params(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"unknown variant 'planner' .*variants: base, heavy"):
        build_service(_params(zoo, zoo_base="planner"))
    with pytest.raises(
        ConfigError, match=r"zoo: zoo .* variant 'heavy-drone' is a lora adapter of 'base'"
    ):
        build_service(_params(zoo, zoo_base="heavy-drone"))
    with pytest.raises(
        ConfigError, match=r"robot 'drone1': variant 'lab-arm': unknown variant 'lab-arm'"
    ):
        build_service(_params(zoo, drone1={"type": "drone", "variant": "lab-arm"}))
    with pytest.raises(
        ConfigError,
        match=r"robot 'arm1' is a arm, but its variant 'heavy-drone' \(zoo .*\) was trained "
        r"for the drone",
    ):
        build_service(_params(zoo, arm1={"type": "arm", "variant": "heavy-drone"}))
