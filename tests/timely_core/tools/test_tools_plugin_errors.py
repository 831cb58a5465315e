"""What a tool author is told: a plugin that raises is reported with where it
raised (its own file and line, and the library's when it raised there); an
argument at fault is named counting from 1, and one the call does not have is
reported as such; a CPU budget holds to the call's own CPU time, to a few
hundredths of a second; `info.partial` says whether the tool gets partial calls;
a tool closed with a call in flight logs no stray reply."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.timely_core.tools.tools_support import HERE, Replies, call
from timely_core.tools.call_stream import CallEvent
from timely_core.tools.outcomes import error_message
from timely_core.tools.plugin import ToolReply
from timely_core.tools.process import PluginProcess
from timely_core.tools.spec import ToolSpec


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(HERE)


def line_of(text: str, module: str) -> int:
    lines = (Path(HERE) / module).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_a_raising_plugin_is_reported_with_where_it_raised() -> None:
    replies = Replies()
    faulty = PluginProcess(ToolSpec(name="f", plugin="tools_fault_plugins:Faulty"), replies)
    odd = PluginProcess(ToolSpec(name="o", plugin="tools_lifecycle_plugins:Odd"), replies)
    try:
        faulty.submit(call("own", "raise"))
        odd.submit(call("library", "json", skill="odd"))
        own, library = replies.wait("own"), replies.wait("library")
    finally:
        faulty.close()
        odd.close()
    line = line_of('raise KeyError("no such thing")', "tools_fault_plugins.py")
    assert own == ToolReply.error(
        f"the tool raised KeyError: 'no such thing' at tools_fault_plugins.py:{line} in on_call"
    )
    line = line_of('json.loads("{")', "tools_lifecycle_plugins.py")
    assert library.message.startswith("the tool raised JSONDecodeError: Expecting property name")
    assert library.message.endswith(f"(from tools_lifecycle_plugins.py:{line} in on_call)")
    assert " at decoder.py:" in library.message, library.message


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        (0, "tool 'v' rejected argument 1 ('a') of call \"pick('a', 'b'\" (partial): bad;"),
        (1, "tool 'v' rejected argument 2 ('b') of call \"pick('a', 'b'\" (partial): bad;"),
        (
            99,
            "tool 'v' failed on call \"pick('a', 'b'\" (partial): bad (the tool named "
            "argument=99, out of range: the call has 2 arguments so far, numbered from 0);",
        ),
    ],
)
def test_the_argument_at_fault_is_named_from_1(argument: int, expected: str) -> None:
    event = CallEvent(0, "pick", ("a", "b"), False, "pick('a', 'b'", 0)
    reply = ToolReply.error("bad", argument=argument)
    assert f"robot r1: {expected} this statement" in error_message("r1", "v", event, reply, True)


def test_the_cpu_budget_is_the_calls_own(tmp_path: Path) -> None:
    """The plugin burns a second of CPU as it starts; a call may burn its budget of
    0.3 s (not less: the start-up does not count), and not more."""
    spec = ToolSpec(
        name="burner",
        plugin="tools_lifecycle_plugins:Burner",
        options={"init_s": 1.0},
        cpu_s=0.3,
        wall_s=60.0,
    )
    replies = Replies()
    process = PluginProcess(spec, replies)
    used = tmp_path / "used"
    try:
        process.submit(call("short", str(tmp_path / "short"), 0.1, skill="burn"))
        process.submit(call("long", str(used), 5.0, skill="burn"))
        assert replies.wait("short").kind == "value"
        assert replies.wait("long") == ToolReply.error("CPU-time limit (0.3 s per call) exceeded")
    finally:
        process.close()
    assert 0.2 <= float(used.read_text()) <= 0.35


@pytest.mark.parametrize("partial_calls", [True, False])
def test_info_says_whether_the_tool_gets_partial_calls(partial_calls: bool) -> None:
    spec = ToolSpec(name="echo", plugin="tools_fault_plugins:Echo", partial_calls=partial_calls)
    process = PluginProcess(spec, Replies())
    try:
        assert process.info.partial is partial_calls
    finally:
        process.close()


def test_closing_with_a_call_in_flight_logs_no_stray_reply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    replies = Replies()
    process = PluginProcess(ToolSpec(name="faulty", plugin="tools_fault_plugins:Faulty"), replies)
    with caplog.at_level(logging.WARNING, logger="timely_core.tools.process"):
        process.submit(call("in flight", "nap", 0.5))
        process.close()  # the process answers before it reads "stop"
    assert replies.wait("in flight") == ToolReply.error("tool 'faulty' was closed")
    assert "unknown call" not in caplog.text
