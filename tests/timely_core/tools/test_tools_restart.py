"""Restarts: a tool whose restart fails says so and why, fails the calls before
its next try at once (naming the tool, the start error and when it is tried
again), and starts again at the first call after it, the delays between tries
doubling. A call queued behind a fault waits for the restart, however slow, and
is answered by the new process; a verdict is given up only when its tool broke
its own limits, naming the tool."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.timely_core.core_support import make_service
from tests.timely_core.tools.tools_support import HERE, Replies, call
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.tools import process as process_module
from timely_core.tools import router as router_module
from timely_core.tools.plugin import ToolReply
from timely_core.tools.process import PluginProcess, ToolUnavailable
from timely_core.tools.spec import ToolSpec


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(HERE)


@pytest.fixture
def flaky(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[PluginProcess, Replies, Path]]:
    """A tool that starts once; its restarts fail while its marker file exists.
    Tries are 0.2 s apart at first, at most 0.5 s (the defaults: 1 s, 30 s)."""
    monkeypatch.setattr(process_module, "RETRY_FIRST_S", 0.2)
    monkeypatch.setattr(process_module, "RETRY_MAX_S", 0.5)
    marker = tmp_path / "started"
    spec = ToolSpec(
        name="flaky", plugin="tools_lifecycle_plugins:FlakyStart", options={"marker": str(marker)}
    )
    replies = Replies()
    process = PluginProcess(spec, replies)
    yield process, replies, marker
    process.close()


def until_due(process: PluginProcess, task: str, timeout_s: float = 30.0) -> None:
    """Submit an `ok` call until one is taken: the tool is tried again for it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            process.submit(call(task, skill="ok"))
            return
        except ToolUnavailable:
            time.sleep(0.02)
    raise AssertionError("the tool was never tried again")


def test_a_failed_restart_says_why_and_the_tool_is_tried_again(
    flaky: tuple[PluginProcess, Replies, Path],
) -> None:
    process, replies, marker = flaky
    process.submit(call("crash", skill="fail"))
    process.submit(call("queued", skill="ok"))  # another task's, behind the crash
    assert replies.wait("crash") == ToolReply.error("the tool's process crashed (exit code 9)")
    assert replies.wait("queued") == ToolReply.error(
        "tool 'flaky' did not start again after the tool's process crashed (exit code 9): "
        "RuntimeError: license server unreachable; the next call from 0.2 s on starts it again"
    )
    with pytest.raises(ToolUnavailable) as down:  # at once, before the next try
        process.submit(call("early", skill="ok"))
    assert str(down.value).startswith(
        "tool 'flaky' is down: its last start failed (RuntimeError: license server "
        "unreachable); the next call from "
    )
    until_due(process, "second try")  # fails again: the delay doubles
    assert replies.wait("second try") == ToolReply.error(
        "tool 'flaky' did not start again: RuntimeError: license server unreachable; "
        "the next call from 0.4 s on starts it again"
    )
    until_due(process, "third try")
    assert replies.wait("third try").message.endswith("from 0.5 s on starts it again")  # capped
    marker.unlink()  # the licence server is back
    until_due(process, "back")
    assert replies.wait("back") == ToolReply.returns(process.pid)
    assert process.restarts == 1
    process.submit(call("crash again", skill="fail"))  # a new crash starts from the first delay
    assert replies.wait("crash again").message == "the tool's process crashed (exit code 9)"


PLANS = {
    "hang": "mf(50); search('hang'); say('x');",
    "keys": "mf(50); search('keys'); say('found it');",
    "nap": "mf(50); search('nap'); say('x');",
}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[PlanningService]:
    service, _, _ = make_service(PLANS)
    yield service
    service.close_tools()


def slow_to_restart(service: PlanningService, tmp_path: Path, restart_s: float) -> None:
    options = {"marker": str(tmp_path / "started"), "restart_s": restart_s}
    service.register_tool(
        "drone1",
        {
            "name": "look",
            "plugin": "tools_lifecycle_plugins:SlowToRestart",
            "wall_s": 1.0,
            "options": options,
        },
    )


def test_a_call_queued_behind_a_slow_restart_is_answered(
    service: PlanningService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Task a's call hangs, task b's waits behind it; the tool takes longer to start
    again than a's wall time and the verdict's grace together: b is answered."""
    monkeypatch.setattr(router_module, "VERDICT_GRACE_S", 1.5)
    slow_to_restart(service, tmp_path, restart_s=4.0)
    hung = service.submit(TaskRequest(robot_id="drone1", instruction="hang", task_id="a"))
    queued = service.submit(TaskRequest(robot_id="drone1", instruction="keys", task_id="b"))
    service.run_until_idle()
    assert hung.result(timeout_s=0).error == (
        "robot drone1: tool 'look' failed on call \"search('hang')\": wall-time limit "
        "(1 s per call) exceeded; this statement and everything after it were not sent"
    )
    result = queued.result(timeout_s=0)
    assert result.success, result.error
    assert [o.value for o in service.tool_outcomes("b")] == ["keys is on the table"]


def test_a_verdict_overdue_names_its_tool(
    service: PlanningService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a tool past its own limits is given up on (here one made to look so)."""
    monkeypatch.setattr(router_module, "VERDICT_GRACE_S", 0.5)
    slow_to_restart(service, tmp_path, restart_s=0.0)
    monkeypatch.setattr(PluginProcess, "due_s", lambda self: time.monotonic() - 10.0)
    handle = service.submit(TaskRequest(robot_id="drone1", instruction="nap", task_id="n"))
    service.run_until_idle()
    assert handle.result(timeout_s=0).error == (
        "robot drone1: no verdict from its validating tool 'look': it neither answered nor "
        "failed the call within its limits (its wall time, or a restart's timeout) and a "
        "grace of 0.5 s"
    )
