# mypy: disable-error-code="no-untyped-def"
import ast
from pathlib import Path

import pytest

from robot_models.language import RobotPlanLanguage, load_language
from timely_core.language.plan_language import PlanLanguage, PlanStatement

ROOT = Path(__file__).resolve().parents[2] / "robot_models"


@pytest.mark.parametrize("robot_type", ["drone", "arm"])
def test_language_satisfies_the_timely_core_protocol(robot_type):
    language: PlanLanguage = load_language(robot_type)
    assert isinstance(language, PlanLanguage)
    assert language.robot_type == robot_type
    parser = language.new_parser()
    statements = [*parser.feed("hm();" if robot_type == "arm" else "tp();"), *parser.close()]
    assert all(isinstance(s, PlanStatement) for s in statements)
    low, mean = language.estimate_execution_s(statements)
    assert 0 < low <= mean


def test_unknown_robot_type_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown robot type 'boat'; known types: drone, arm"):
        load_language("boat")


def test_prompt_is_prefix_then_request():
    language = load_language("drone")
    assert "sw(object:str) -> bool" in language.prompt_prefix()
    request = language.format_request(" visible: cat ", "Find the cat ")
    assert request == "### Request\nScene: visible: cat\nTask: Find the cat\nPlan:\n"
    assert "pk(object:str)" in load_language("arm").prompt_prefix()
    assert "pk(" not in language.prompt_prefix()


def test_estimate_accepts_foreign_statements_by_text():
    class Foreign:
        text = "mf(100);tc(90);"

    language = load_language("drone")
    assert language.estimate_execution_s([Foreign()]) == language.estimate_execution_s(
        language.parse("mf(100);tc(90);")
    )


# the one exception: the tool-plugin SDK its shipped plugins implement (dataclasses
# and a base class only; it imports nothing of the serving core)
PLUGIN_SDK = "timely_core.tools.plugin"


def test_robot_models_never_imports_timely_core():
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "timely_core" and n != PLUGIN_SDK for n in names), (
                path
            )


def test_language_instances_are_independent():
    first, second = RobotPlanLanguage("drone"), RobotPlanLanguage("drone")
    assert first.exec_time is not second.exec_time
