"""Fleet variants in LRTrace: `compose --variants` gives a robot type's agents their
fine-tunes in turn, the trace keeps them (and a trace without any is the same file as
before), the service target loads them from the shipped folders or a block zoo and
plans each agent's tasks with its own, the report groups by variant, and every other
target or bad flag is refused, named."""

from __future__ import annotations

import json
import types
from pathlib import Path

import msgpack
import pytest

from lrtrace import trace_format
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.replay.targets.ros import RosTarget
from lrtrace.trace_format import Agent
from lrtrace.variants import parse_variants, trace_variants
from robot_models.checkpoints import default_planner_path
from timely_core.blocks.zoo import BlockZoo

# one event of 4 tasks on 4 drones: trace 7 ("a wall ahead"): a manoeuvre the heavy
# drone's variant plans its own way (it takes off first)
COMPOSE = ["--eps", "0.5", "--max-tpe", "4", "--trace-ids", "7", "--agents", "4"]
COMPOSE += ["--duration", "1", "--seed", "3"]


def _compose(tmp_path: Path, *variants: str) -> Path:
    out = tmp_path / "fleet.lrt"
    flags = [f"--variants={v}" for v in variants]
    assert main(["compose", "-o", str(out), *COMPOSE, *flags]) == 0
    return out


def _replay(trace: Path, out: Path, *flags: str) -> dict[str, object]:
    assert main(["replay", str(trace), "-o", str(out), "--target", "service", *flags]) == 0
    return dict(json.loads(out.read_text()))


def test_parse_variants_names_each_mistake() -> None:
    assert parse_variants(["drone=heavy-drone,base", "arm=packing-arm"]) == {
        "drone": ("heavy-drone", ""),
        "arm": ("packing-arm",),
    }
    for flag, message in (
        ("drone", "give TYPE=NAME"),
        ("drone=", "give TYPE=NAME"),
        ("drone=a,,b", "give TYPE=NAME"),
        ("drone=heavy drone", "variant name 'heavy drone'"),
    ):
        with pytest.raises(LrtraceError, match=message):
            parse_variants([flag])
    with pytest.raises(LrtraceError, match="robot type 'drone' is given twice"):
        parse_variants(["drone=a", "drone=b"])


def test_compose_gives_agents_their_variants_in_turn(tmp_path: Path) -> None:
    trace = trace_format.read(_compose(tmp_path, "drone=heavy-drone,base,warehouse-drone"))
    assert [(a.agent_id, a.variant) for a in trace.agents] == [
        ("drone1", "heavy-drone"),
        ("drone2", ""),
        ("drone3", "warehouse-drone"),
        ("drone4", "heavy-drone"),
    ]
    assert trace_variants(trace) == ["heavy-drone", "warehouse-drone"]
    plain = tmp_path / "plain"
    plain.mkdir()
    doc = msgpack.unpackb(_compose(plain).read_bytes())
    assert all("variant" not in agent for agent in doc["agents"])  # as before variants
    with pytest.raises(LrtraceError, match=r"no arm agents \(its robot types: drone\)"):
        from lrtrace.variants import with_variants

        with_variants(trace, {"arm": ("packing-arm",)})
    assert main(["compose", "-o", str(tmp_path / "x.lrt"), *COMPOSE, "--variants", "arm=x"]) == 2


def test_a_trace_names_no_base_variant() -> None:
    with pytest.raises(ValueError, match="'base' names the base model"):
        Agent(agent_id="drone1", robot_type="drone", variant="base")
    with pytest.raises(ValueError, match="String should match pattern"):
        Agent(agent_id="drone1", robot_type="drone", variant="a b")


def test_the_service_plans_each_agent_with_its_variant(tmp_path: Path) -> None:
    trace = _compose(tmp_path, "drone=heavy-drone,base")
    results = _replay(trace, tmp_path / "folders.json", "--threads", "1")
    tasks = results["runs"][0]["tasks"]  # type: ignore[index]
    plans = {t["variant"]: t["plan_text"] for t in tasks}
    assert set(plans) == {"heavy-drone", ""} and all(t["success"] for t in tasks)
    assert plans["heavy-drone"].startswith("tk();") and plans["heavy-drone"] != plans[""]
    report = tmp_path / "report.json"
    assert main(["report", str(tmp_path / "folders.json"), "--json", str(report)]) == 0
    groups = {g["group"] for g in json.loads(report.read_text())["stats"]}
    assert {"variant heavy-drone", "variant base"} <= groups
    # the same fleet from a block zoo plans the same
    zoo = BlockZoo(tmp_path / "zoo")
    zoo.add("base", default_planner_path())
    zoo.add("heavy-drone", default_planner_path().parent / "variants" / "heavy-drone", "base")
    zooed = _replay(trace, tmp_path / "zoo.json", "--threads", "1", "--zoo", str(zoo.root))
    run = zooed["runs"][0]  # type: ignore[index]
    assert run["engine"] == "torch:zoo:base"
    assert [t["plan_text"] for t in run["tasks"]] == [t["plan_text"] for t in tasks]


def test_variants_the_target_cannot_serve_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _compose(tmp_path, "drone=heavy-drone")
    out = str(tmp_path / "r.json")

    def refused(*flags: str) -> str:
        assert main(["replay", str(trace), "-o", out, *flags]) == 2
        return capsys.readouterr().err

    assert "the simulated engine replays the base model's plans" in refused("--target", "sim")
    assert "--zoo has no effect with --target sim" in refused("--zoo", str(tmp_path))
    service = ["--target", "service"]
    assert "give --variants-dir or --zoo, not both" in refused(
        *service, "--zoo", "z", "--variants-dir", "v"
    )
    assert "--zoo-base names a variant of --zoo" in refused(*service, "--zoo-base", "b")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        f"variant 'heavy-drone' of the trace's agents: no folder {empty / 'heavy-drone'} "
        f"(--variants-dir {empty} holds no variant folders)"
    ) in refused(*service, "--variants-dir", str(empty))
    assert "--zoo: block zoo" in refused(*service, "--zoo", str(tmp_path / "nowhere"))
    ros = RosTarget(types.ModuleType("replay_target"), 0.008)
    with pytest.raises(LrtraceError, match="a ROS 2 planner serves each robot the variant"):
        ros.check(trace_format.read(trace))
