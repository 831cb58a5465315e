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


# the exceptions, formats both sides share that import nothing of the serving core:
# the tool-plugin SDK its shipped plugins implement (dataclasses and a base class), and
# the block zoo's storage (timely_core/blocks), which its tooling writes and the torch
# engine serves from
PLUGIN_SDK = "timely_core.tools.plugin"
ZOO = "timely_core.blocks"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def _shared(name: str) -> bool:
    return name in (PLUGIN_SDK, ZOO) or name.startswith(ZOO + ".")


def test_robot_models_never_imports_timely_core():
    for path in ROOT.rglob("*.py"):
        names = _imports(path)
        assert not any(n.split(".")[0] == "timely_core" and not _shared(n) for n in names), path


def test_the_shared_zoo_storage_imports_nothing_of_the_serving_core():
    zoo = ROOT.parent / "timely_core" / "blocks"
    for path in zoo.rglob("*.py"):
        names = [n for n in _imports(path) if n.split(".")[0] == "timely_core"]
        assert all(n.startswith(ZOO) for n in names), path


def test_language_instances_are_independent():
    first, second = RobotPlanLanguage("drone"), RobotPlanLanguage("drone")
    assert first.exec_time is not second.exec_time
