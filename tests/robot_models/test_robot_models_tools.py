"""robot_models' tool plugins, in their own processes, on the service with the real
drone and arm languages (simulated engine replaying the LRTrace golden plans):
the validator passes every golden plan in its scene and ends a task at the first
argument naming an object its scene lacks; the perception tool answers the
robot's perception calls from the scene, in the plan language."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS
from robot_models.tools.scene_text import scene_has, scene_names, scene_parts
from robot_models.tools.validator import SkillCallValidator
from tests.timely_core.robot_support import languages, tokenizer
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.tools.plugin import ToolCall, ToolReply, Unresolved

VALIDATOR = "robot_models.tools.validator:SkillCallValidator"
PERCEPTION = "robot_models.tools.perception:ScenePerception"
DESK = next(t for t in LRTRACE_TASKS if t.instruction == "Clean the desk")


def golden_by_instruction(prompt_ids: Sequence[int]) -> list[int]:
    prompt = tokenizer().decode(list(prompt_ids))
    for task in LRTRACE_TASKS:
        if f"{task.instruction}\n" in prompt:
            return tokenizer().encode(task.golden_plan, add_special_tokens=False).ids
    raise KeyError("no golden plan")


@pytest.fixture
def service() -> Iterator[PlanningService]:
    clock = VirtualClock()
    eos = tokenizer().token_to_id("<eos>")
    assert eos is not None
    engine = SimulatedEngine(
        clock,
        PAPER_LLAMA3_8B_RTX4090,
        golden_by_instruction,
        SimulatedEngineConfig(eos_token_id=eos),
    )
    service = PlanningService(engine, tokenizer(), "timely", clock=clock, languages=languages())
    yield service
    service.close_tools()


def register(service: PlanningService, robot_id: str, robot_type: str, plugin: str) -> None:
    service.register_robot(robot_id, robot_type=robot_type)
    name = plugin.rsplit(":", 1)[1].lower()
    info = service.register_tool(
        robot_id, {"name": name, "plugin": plugin, "options": {"robot_type": robot_type}}
    )
    assert info.network == "isolated"


def test_scene_text() -> None:
    assert scene_parts(DESK.scene) == {
        "on table": ("cup", "pen", "paper", "book", "marker", "plate"),
        "places": ("tray", "holder", "bin", "shelf"),
    }
    assert scene_names("visible: sofa, lamp") == {"sofa", "lamp"}
    assert scene_names("") == frozenset()


@pytest.mark.parametrize(
    ("scene", "name", "named"),
    [
        ("on table: cup, pen; places: tray", "cup", True),
        ("a cup, a tray", "cup", True),  # free text: articles are no part of a name
        ("a cup, a tray", "the tray", True),
        ("a sofa, a cat under the table", "cat", True),
        ("a sofa, a cat under the table", "table", True),
        ("There is a Red Cup on the shelf", "red cup", True),
        ("a cupboard, a tray", "cup", False),  # whole words only
        ("a red box, a cup", "box cup", False),  # within one item
        ("a cup", "a", False),
        ("", "cup", False),
    ],
)
def test_whether_a_scene_names_an_object(scene: str, name: str, named: bool) -> None:
    assert scene_has(scene, name) is named


def test_the_validator_passes_every_golden_plan_in_its_scene(service: PlanningService) -> None:
    register(service, "arm", "arm", VALIDATOR)
    register(service, "drone", "drone", VALIDATOR)
    handles = [
        service.submit(TaskRequest(robot_id=t.robot_type, scene=t.scene, instruction=t.instruction))
        for t in LRTRACE_TASKS
    ]
    service.run_until_idle()
    for task, handle in zip(LRTRACE_TASKS, handles, strict=True):
        result = handle.result(timeout_s=0)
        assert result.success, result.error
        assert result.plan_text == task.golden_plan
    assert all(o.kind == "ok" for h in handles for o in service.tool_outcomes(h.task_id))


def test_the_validator_stops_a_plan_at_an_object_missing_from_the_scene(
    service: PlanningService,
) -> None:
    register(service, "arm", "arm", VALIDATOR)
    scene = DESK.scene.replace("marker, ", "")
    handle = service.submit(
        TaskRequest(robot_id="arm", scene=scene, instruction=DESK.instruction, task_id="desk")
    )
    service.run_until_idle()
    error = handle.result(timeout_s=0).error
    assert error.startswith(
        "robot arm: tool 'skillcallvalidator' rejected argument 1 ('marker') of call "
        "\"pk('marker'\" (partial): pick object 'marker' is not in the scene (it names: "
    )
    sent = "".join(s.text for s in handle.segments())
    assert sent == DESK.golden_plan[: DESK.golden_plan.index("?lk('marker')")]


def call(skill: str, *args: object, complete: bool = False) -> ToolCall:
    text = f"{skill}({','.join(map(repr, args))}" + (")" if complete else "")
    return ToolCall("t", "r", 0, skill, args, complete, text, scene="on table: cup")  # type: ignore[arg-type]


def test_the_validator_checks_limits_argument_by_argument() -> None:
    drone = SkillCallValidator({"robot_type": "drone"})
    assert "mf" in drone.skills and "move_forward" in drone.skills
    assert drone.on_partial(call("mf", 600)) == ToolReply.error(
        "skill 'move_forward', argument 'distance': 600 is out of range "
        "(allowed: int in [20, 500] cm)",
        argument=0,
    )
    assert drone.on_partial(call("tc", 90, 3)).argument == 1  # more than its arity
    assert drone.on_call(call("mf", complete=True)).message.startswith("mf(distance:int) takes 1")
    assert drone.on_call(call("a", "unseen cat", complete=True)) == ToolReply.ok()
    arm = SkillCallValidator({"robot_type": "arm"})
    assert arm.on_partial(call("so", "cup")) == ToolReply.ok()
    assert arm.on_partial(call("so", "cup", "fruit bin")).argument == 1  # no bins here
    assert arm.on_partial(call("pk", Unresolved("_x"))) == ToolReply.ok()  # known when run
    assert arm.on_partial(call("mt", 100)).message.startswith("skill 'move_to', argument 'x'")
    free = ToolCall("t", "r", 0, "pk", ("cup",), False, "pk('cup'", scene="a cup, a tray")
    assert arm.on_partial(free) == ToolReply.ok()  # a scene written as people write it
    mapped = SkillCallValidator({"robot_type": "arm", "map": "on table: pen; bins: bin"})
    assert mapped.on_partial(call("pk", "pen")) == ToolReply.ok()  # the map, not the scene
    assert mapped.on_partial(call("pk", "cup")).message.endswith("(it names: bin, pen)")


def test_perception_answers_from_the_scene(service: PlanningService) -> None:
    register(service, "arm", "arm", PERCEPTION)
    scene = DESK.scene.replace("pen, ", "")
    handle = service.submit(
        TaskRequest(robot_id="arm", scene=scene, instruction=DESK.instruction, task_id="desk")
    )
    service.run_until_idle()
    assert handle.result(timeout_s=0).success
    wait_for(service, "desk", 6)
    answers = sorted(o.value for o in service.tool_outcomes("desk"))
    assert answers == [
        "lk('book')->True",
        "lk('cup')->True",
        "lk('marker')->True",
        "lk('paper')->True",
        "lk('pen')->False",
        "lk('plate')->True",
    ]
    assert {o.kind for o in service.tool_outcomes("desk")} == {"observation"}


def test_perception_reads_a_scene_written_freely_and_can_gate_its_statement() -> None:
    from robot_models.tools.perception import ScenePerception

    drone = ScenePerception({"robot_type": "drone"})
    assert not drone.validates  # by default the plan does not wait for its answers
    scene = "a sofa, a cat under the table"
    for obj, seen in (("cat", True), ("sofa", True), ("dog", False)):
        look = ToolCall("t", "r", 0, "iv", (obj,), True, f"iv('{obj}')", scene=scene)
        assert drone.on_call(look) == ToolReply.observes(f"iv('{obj}')->{seen}")
    assert ScenePerception({"robot_type": "drone", "validates": True}).validates


def test_perception_that_gates_its_statement_can_show_its_answers_to_the_planner(
    service: PlanningService,
) -> None:
    service.register_robot("drone", robot_type="drone")
    info = service.register_tool(
        "drone",
        {"name": "look", "plugin": PERCEPTION, "append_observations": True,
         "options": {"robot_type": "drone", "validates": True}},
    )  # fmt: skip
    assert info.validates


def wait_for(service: PlanningService, task_id: str, count: int) -> None:
    """The perception tool does not gate the plan: its answers come in real time."""
    import time

    for _ in range(3000):
        if len(service.tool_outcomes(task_id)) >= count:
            return
        time.sleep(0.01)
    raise AssertionError(f"{task_id}: {service.tool_outcomes(task_id)}")
