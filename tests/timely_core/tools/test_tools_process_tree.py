"""What a plugin starts ends with it, however it started it (a child, a child in a
session of its own, a daemon whose parent is gone) and however the tool ends: past
its wall time, closed, its service killed while a call hangs, or its service
exiting without closing its tools. Real processes, checked in /proc."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.timely_core.tools.tools_support import (
    HERE,
    Replies,
    alive,
    call,
    host_process,
    kill_sleepers,
)
from timely_core.tools.plugin import ToolReply
from timely_core.tools.process import PluginProcess
from timely_core.tools.spec import ToolSpec

SPAWNER = ToolSpec(name="spawner", plugin="tools_lifecycle_plugins:Spawner", wall_s=3.0)


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(HERE)


def left_behind(pid_file: Path, timeout_s: float = 60.0) -> list[int]:
    """The pids the plugin wrote, once it has."""
    deadline = time.monotonic() + timeout_s
    while not pid_file.exists():
        assert time.monotonic() < deadline, "the plugin never started its processes"
        time.sleep(0.05)
    return [int(pid) for pid in pid_file.read_text().split()]


def assert_all_end(pids: list[int]) -> None:
    try:
        deadline = time.monotonic() + 30.0
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [pid for pid in pids if alive(pid)]
        assert not survivors, f"the plugin's processes {survivors} outlived it"
    finally:
        kill_sleepers(pids)


def test_past_its_wall_time(tmp_path: Path) -> None:
    replies = Replies()
    process = PluginProcess(SPAWNER, replies)
    pid_file = tmp_path / "pids"
    try:
        process.submit(call("hang", str(pid_file), "hang", skill="spawn"))
        pids = left_behind(pid_file)
        assert all(alive(pid) for pid in pids)
        assert replies.wait("hang") == ToolReply.error("wall-time limit (3 s per call) exceeded")
        assert_all_end(pids)
    finally:
        process.close()


def test_closed(tmp_path: Path) -> None:
    replies = Replies()
    process = PluginProcess(SPAWNER, replies)
    pid_file = tmp_path / "pids"
    process.submit(call("ok", str(pid_file), "ok", skill="spawn"))
    pids = replies.wait("ok").value
    assert all(alive(pid) for pid in pids)
    process.close()
    assert_all_end(pids)


HOST = """
import sys, time
sys.path[:0] = [{here!r}]
from timely_core.tools.process import PluginProcess
from timely_core.tools.spec import ToolSpec
from timely_core.tools.plugin import ToolCall
spec = ToolSpec(name="spawner", plugin="tools_lifecycle_plugins:Spawner", wall_s=3600.0)
process = PluginProcess(spec, lambda pending, reply: None)
process.submit(ToolCall("t", "r1", 0, "spawn", ({pid_file!r}, {then!r}), True, "spawn(...)"))
print(process.pid, flush=True)
{ending}
"""


@pytest.mark.parametrize(
    ("then", "ending"),
    [
        ("hang", "time.sleep(3600)  # killed meanwhile"),
        ("ok", "time.sleep(2.0)  # then exits without closing its tool"),
    ],
    ids=["service-killed-in-a-hung-call", "service-exits-without-closing"],
)
def test_with_its_service(tmp_path: Path, then: str, ending: str) -> None:
    pid_file = tmp_path / "pids"
    host = host_process(HOST.format(here=HERE, pid_file=str(pid_file), then=then, ending=ending))
    try:
        assert host.stdout is not None
        worker = int(host.stdout.readline())
        pids = left_behind(pid_file)
        if then == "hang":
            host.kill()
        assert host.wait(timeout=60) in (0, -9)
        assert_all_end([worker, *pids])
    finally:
        host.kill()
