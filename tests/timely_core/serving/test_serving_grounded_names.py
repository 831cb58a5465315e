"""`ServiceConfig(grounded_names=True)`: each plan is decoded under its own request's
grammar, whose object names are only those the request and its scene give and the
robot's known places (`robot_models.grounding`), on the shipped planner (issue #22).
By default (`copy_bias`) each plan gets those names to copy instead: plans name
fewer objects nobody mentioned than without it."""

from __future__ import annotations

import pytest

from robot_models.grounding import grounded_names
from robot_models.language import load_language
from robot_models.plan_ast import Literal, calls_in
from robot_models.plan_check import check_plan
from tests.timely_core.serving.grammar_recording import recording_service
from timely_core.engine.protocol import SamplingParams
from timely_core.language.plan_language import PlanLanguage
from timely_core.request import TaskRequest
from timely_core.service_config import ServiceConfig

pytestmark = pytest.mark.slow

# requests whose ungrounded plans (the shipped checkpoint, greedy, plan grammar) name
# objects nobody mentioned: 'table', 'blanket', 'tablet', garbage names
CASES = [
    ("drone", "", "please search for the lost hiking boot"),
    ("arm", "on table: tuning fork, bolt", "is there a tuning fork on the table"),
    ("arm", "on table: walnut, stapler remover", "put the stapler remover on the shelf"),
    ("drone", "visible: desk, chair", "is the stapler remover somewhere here"),
    ("drone", "visible: 🐱, ☕", "ñandú 🐱🐱 über alles ???? }}}} 'quoted' (x)"),
]
PLACES = {"tray", "holder", "bin", "shelf", "fruit bin", "vegetable bin"}


def served(
    grounded: bool, copy_bias: float = 0.0
) -> tuple[list[str], list[str | None], list[SamplingParams]]:
    """The plans of CASES, the grammar each was admitted with and its whole
    sampling (in order)."""
    languages: dict[str, PlanLanguage] = {r: load_language(r) for r in ("drone", "arm")}
    config = ServiceConfig(
        max_tokens=128, grammar=True, grounded_names=grounded, copy_bias=copy_bias
    )
    service, engine = recording_service(languages, config)
    for i, (robot, _, _) in enumerate(CASES):
        service.register_robot(f"{robot}{i}", robot_type=robot)
    service.start()
    try:
        handles = [
            service.submit(TaskRequest(robot_id=f"{robot}{i}", scene=scene, instruction=text))
            for i, (robot, scene, text) in enumerate(CASES)
        ]
        plans = []
        for handle in handles:
            for segment in handle.segments(timeout_s=300):
                handle.segment_done(segment.index)
            result = handle.result(timeout_s=300)
            assert result.success, result.error
            plans.append(result.plan_text)
        order = sorted(engine.admitted)
        return (
            plans,
            [engine.admitted[k] for k in order],
            [engine.admitted_params[k] for k in order],
        )
    finally:
        service.stop()


def object_names(robot: str, plan: str) -> list[str]:
    """The plan's object arguments (a skill's `str` arguments; a `lg` message is free
    text, not a name)."""
    language = load_language(robot)
    return [
        arg.value
        for statement in language.parse(plan)
        for call in calls_in(statement.node)
        for spec, arg in zip(language.skill_set.get(call.short).args, call.args, strict=False)
        if spec.type == "str" and isinstance(arg, Literal) and isinstance(arg.value, str)
    ]


def ungrounded(robot: str, scene: str, instruction: str, plan: str) -> set[str]:
    allowed = set(grounded_names(scene, instruction)) | (PLACES if robot == "arm" else set())
    return set(object_names(robot, plan)) - allowed


def test_grounded_plans_name_only_what_their_request_names() -> None:
    plans, grammars, params = served(grounded=True, copy_bias=ServiceConfig().copy_bias)
    assert all(not p.copy_names for p in params)  # the grammar grounds them instead
    assert grammars == [
        load_language(robot).request_grammar(scene, text) for robot, scene, text in CASES
    ]
    named = 0
    for (robot, scene, instruction), plan in zip(CASES, plans, strict=True):
        assert check_plan(robot, plan, True).valid, plan
        assert not ungrounded(robot, scene, instruction, plan), plan
        named += len(object_names(robot, plan))
    assert named >= len(CASES)  # the plans do name objects


def test_without_grounding_the_same_requests_name_other_objects() -> None:
    """What the grounded test guards against happens on these requests."""
    plans, grammars, params = served(grounded=False)
    assert grammars == [load_language(robot).grammar() for robot, _, _ in CASES]
    assert all(not p.copy_names and p.copy_bias == 0 for p in params)
    assert any(
        ungrounded(robot, scene, instruction, plan)
        for (robot, scene, instruction), plan in zip(CASES, plans, strict=True)
    ), plans


def test_by_default_plans_get_their_requests_names_to_copy() -> None:
    bias = ServiceConfig().copy_bias
    assert bias > 0
    plans, grammars, params = served(grounded=False, copy_bias=bias)
    assert grammars == [load_language(robot).grammar() for robot, _, _ in CASES]
    for (robot, scene, instruction), p in zip(CASES, params, strict=True):
        assert (p.copy_names, p.copy_bias, p.copy_quote, p.copy_openers) == (
            grounded_names(scene, instruction),
            bias,
            "'",
            load_language(robot).name_openers(),
        )
    plain, _, _ = served(grounded=False)

    def strays(texts: list[str]) -> int:
        return sum(
            len(ungrounded(robot, scene, instruction, plan))
            for (robot, scene, instruction), plan in zip(CASES, texts, strict=True)
        )

    for (robot, _, _), plan in zip(CASES, plans, strict=True):
        assert check_plan(robot, plan, True).valid, plan
    assert strays(plans) < strays(plain), (plans, plain)
