"""A first plugin's mistakes are named, not misread: `skills` that is not a set of
names fails the start (a bare "pick" is not the skills "p", "i", "c", "k"), and so
does an exit in `__init__`, named; a reply with a non-str message or a non-index
argument says so; a spec's limits are finite."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.timely_core.tools.tools_support import HERE, Replies, call
from timely_core.tools.process import PluginProcess, ToolStartError
from timely_core.tools.spec import ToolSpec


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(HERE)


def spec(plugin: str) -> ToolSpec:
    return ToolSpec(name="t", plugin=f"tools_author_plugins:{plugin}")


@pytest.mark.parametrize(
    ("plugin", "expected"),
    [
        ("BareSkill", "BareSkill.skills must be a set of skill names"),
        ("NumberedSkills", "NumberedSkills.skills holds [1, 2]"),
        ("ExitsAtStart", "did not start: SystemExit: 3"),
    ],
)
def test_a_plugin_that_cannot_start_is_named(plugin: str, expected: str) -> None:
    with pytest.raises(ToolStartError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        PluginProcess(spec(plugin), Replies()).close()


def test_a_reply_with_fields_of_the_wrong_type_says_which() -> None:
    replies = Replies()
    process = PluginProcess(spec("BadReplyFields"), replies)
    try:
        process.submit(call("message", "message"))
        process.submit(call("argument", "x"))
        message, argument = replies.wait("message"), replies.wait("argument")
    finally:
        process.close()
    assert message.message == "the tool's reply has a message of type int, not str"
    assert argument.message.startswith("the tool's reply names argument='first'")


@pytest.mark.parametrize("field", ["cpu_s", "wall_s"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_limits_are_finite(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match="finite number"):
        ToolSpec.model_validate({"name": "t", "plugin": "a:B", field: value})
