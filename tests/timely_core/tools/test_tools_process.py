"""Plugin processes, for real: each fault (crash, signal, hang, CPU, memory, a
raising plugin) ends only the call it happened on, with an error saying which;
the process is restarted and the calls queued behind it are answered by the new
one. A plugin that did not declare network has none. What a plugin started dies
with its process; a reply that cannot be sent, or an `on_task_end` that raises,
costs no process and no other call."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.timely_core.tools.tools_support import HERE, Replies, alive, call, host_process
from timely_core import tools
from timely_core.errors import ServiceError
from timely_core.tools.plugin import ToolCall, ToolReply
from timely_core.tools.process import PluginProcess, ToolStartError
from timely_core.tools.spec import ToolSpec


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(HERE)  # the processes inherit sys.path


def start(replies: Replies, **limits: object) -> PluginProcess:
    spec = ToolSpec.model_validate(
        {"name": "faulty", "plugin": "tools_fault_plugins:Faulty", **limits}
    )
    return PluginProcess(spec, replies)


@pytest.fixture
def faulty() -> Iterator[tuple[PluginProcess, Replies]]:
    """Wall time 60 s: under a loaded machine a fault must still be its own."""
    replies = Replies()
    process = start(replies, wall_s=60.0, cpu_s=30.0, memory_mb=400)
    yield process, replies
    process.close()


@pytest.fixture
def impatient() -> Iterator[tuple[PluginProcess, Replies]]:
    """Wall time 5 s, for the hangs: it applies to their innocent calls too, which a
    loaded machine may hold up for a second."""
    replies = Replies()
    process = start(replies, wall_s=5.0, cpu_s=30.0, memory_mb=400)
    yield process, replies
    process.close()


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("crash", "the tool's process crashed (exit code 7)"),
        ("segv", "the tool's process crashed (signal SIGSEGV)"),
        ("hang", "wall-time limit (5 s per call) exceeded"),
        ("hog", "memory limit (400 MiB) exceeded"),
    ],
)
def test_a_fault_ends_its_call_and_the_next_calls_go_to_a_new_process(
    faulty: tuple[PluginProcess, Replies],
    impatient: tuple[PluginProcess, Replies],
    mode: str,
    reason: str,
) -> None:
    process, replies = impatient if mode == "hang" else faulty
    process.submit(call("before", "ok"))
    first_pid = replies.wait("before").value
    process.submit(call("bad", mode))
    process.submit(call("queued", "ok"))  # another task's call, behind the fault
    assert replies.wait("bad") == ToolReply.error(reason)
    after = replies.wait("queued")
    assert after.kind == "value" and after.value != first_pid
    assert process.restarts == 1 and process.pid == after.value


def test_an_exit_of_the_plugins_own_is_no_memory_breach(
    faulty: tuple[PluginProcess, Replies],
) -> None:
    process, replies = faulty
    process.submit(call("bad", "exit 3"))
    reason = replies.wait("bad").message
    assert reason.startswith("the tool's process crashed (exit code 3)"), reason
    assert "exceeded" not in reason


def test_a_reply_that_cannot_be_sent_is_an_error_and_costs_no_process(
    faulty: tuple[PluginProcess, Replies],
) -> None:
    process, replies = faulty
    process.submit(call("odd", "unsendable"))
    process.submit(call("next", "ok"))
    reply = replies.wait("odd")
    assert (
        reply.kind == "error"
        and "returned a value of type object, which cannot be sent" in reply.message
    )
    assert replies.wait("next").kind == "value" and process.restarts == 0


def test_an_on_task_end_that_raises_costs_no_process_and_no_other_call() -> None:
    replies = Replies()
    spec = ToolSpec(name="ender", plugin="tools_fault_plugins:RaisesAtEnd", wall_s=60.0)
    process = PluginProcess(spec, replies)
    try:
        process.submit(call("first", "ok"))
        pid = replies.wait("first").value
        process.end_task("first")
        process.submit(call("other", "ok"))  # another task's call, right behind it
        assert replies.wait("other") == ToolReply.returns(pid)
        assert process.restarts == 0
    finally:
        process.close()


def test_what_a_plugin_started_dies_with_its_process(
    impatient: tuple[PluginProcess, Replies], tmp_path: Path
) -> None:
    process, replies = impatient
    pid_file = tmp_path / "child.pid"
    process.submit(call("spawner", "spawn", str(pid_file)))
    assert replies.wait("spawner") == ToolReply.error("wall-time limit (5 s per call) exceeded")
    child = int(pid_file.read_text())

    def gone() -> bool:
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        return state == "Z"  # killed, not yet reaped by whoever adopted it

    deadline = time.monotonic() + 10
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(), f"the plugin's child {child} outlived its process"


def test_cpu_time_limit() -> None:
    replies = Replies()
    process = start(replies, cpu_s=1.0, wall_s=120.0)
    try:
        process.submit(call("burn", "burn"))
        process.submit(call("next", "ok"))
        assert replies.wait("burn") == ToolReply.error("CPU-time limit (1 s per call) exceeded")
        assert replies.wait("next").kind == "value"
    finally:
        process.close()


def test_cpu_budget_is_per_call_not_per_process(faulty: tuple[PluginProcess, Replies]) -> None:
    process, replies = faulty
    for i in range(3):
        process.submit(call(f"t{i}", "ok"))
    assert all(replies.wait(f"t{i}").kind == "value" for i in range(3))
    assert process.restarts == 0


def test_a_raising_plugin_answers_with_an_error_and_keeps_its_process(
    faulty: tuple[PluginProcess, Replies],
) -> None:
    process, replies = faulty
    pid = process.pid
    process.submit(call("raise", "raise"))
    reply = replies.wait("raise")
    assert (
        reply.kind == "error" and "KeyError" in reply.message and "no such thing" in reply.message
    )
    assert process.pid == pid and process.restarts == 0


def test_no_network_unless_declared(faulty: tuple[PluginProcess, Replies]) -> None:
    process, replies = faulty
    assert process.info.network == "isolated"
    process.submit(call("net", "net"))
    assert replies.wait("net") == ToolReply.observes("OSError errno=101")  # unreachable


def test_a_declared_network_is_kept() -> None:
    replies = Replies()
    process = start(replies, network=True)
    try:
        assert process.info.network == "allowed"
        process.submit(call("net", "net"))
        answer = replies.wait("net").value
        assert answer == "connected" or "errno=111" in answer  # refused: loopback is up
    finally:
        process.close()


def test_close_ends_unanswered_calls_with_an_error() -> None:
    replies = Replies()
    process = start(replies, wall_s=60.0)
    process.submit(call("hang", "hang"))
    process.close()
    assert replies.wait("hang") == ToolReply.error("tool 'faulty' was closed")
    with pytest.raises(RuntimeError, match="closed"):
        process.submit(call("late", "ok"))


def test_a_plugin_that_cannot_start_is_named() -> None:
    with pytest.raises(ToolStartError, match=r"tool 'bad' \(tools_fault_plugins:NotAPlugin\)"):
        PluginProcess(ToolSpec(name="bad", plugin="tools_fault_plugins:NotAPlugin"), Replies())
    with pytest.raises(ToolStartError, match="ModuleNotFoundError"):
        PluginProcess(ToolSpec(name="bad", plugin="no_such_module:X"), Replies())
    # one of the service's errors, exported where tool authors import from
    assert issubclass(ToolStartError, ServiceError) and tools.ToolStartError is ToolStartError


def test_a_memory_limit_below_what_the_process_maps_is_named() -> None:
    """Applied anyway, every allocation would fail at random places (a reply's buffer,
    once: 'did not start: no answer')."""
    spec = ToolSpec(name="tiny", plugin="tools_fault_plugins:Faulty", memory_mb=64)
    with pytest.raises(ToolStartError, match=r"memory_mb=64 is not more than the \d+ MiB"):
        PluginProcess(spec, Replies())


def test_a_plugin_process_loads_no_engine() -> None:
    """What the worker imports is mapped before the memory limit: torch alone would
    put its process past the usual limits."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, timely_core.tools.worker; "
         "print(sorted({'torch', 'vllm', 'rclpy', 'transformers'} & set(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.strip()  # fmt: skip
    assert loaded == "[]"


def test_a_process_that_dies_says_why() -> None:
    """Its exit status and the last of its stderr name the cause, at start and in a call."""
    spec = ToolSpec(name="dies", plugin="tools_fault_plugins:DiesAtStart")
    with pytest.raises(ToolStartError) as started:
        PluginProcess(spec, Replies())
    assert str(started.value) == (
        "tool 'dies' (tools_fault_plugins:DiesAtStart) did not start: its process ended "
        "(exit code 5) before it answered; its stderr ended: libfoo: no licence found"
    )
    replies = Replies()
    process = start(replies)
    try:
        process.submit(call("words", "last words"))
        assert replies.wait("words") == ToolReply.error(
            "the tool's process crashed (exit code 4); "
            "its stderr ended: cannot reach the gripper's controller"
        )
    finally:
        process.close()


def test_spec_validation() -> None:
    with pytest.raises(ValidationError, match="plugin"):
        ToolSpec(name="x", plugin="not a path")
    with pytest.raises(ValidationError, match=r"options\n.*cannot be sent to the tool's process"):
        ToolSpec(name="x", plugin="m:C", options={"known": {"cup"}})  # a set: no msgpack
    with pytest.raises(ValidationError, match="wall_s"):
        ToolSpec(name="x", plugin="m:C", wall_s=0)
    with pytest.raises(ValidationError, match="extra"):
        ToolSpec.model_validate({"name": "x", "plugin": "m:C", "unknown": 1})


def test_a_hung_plugin_flooded_with_calls_is_still_killed_and_the_calls_answered(
    impatient: tuple[PluginProcess, Replies],
) -> None:
    """The hung process stops reading; its socket fills up. Only the writer thread
    waits on it, so the wall-time kill still happens and no call is lost."""
    process, replies = impatient
    process.submit(call("hang", "hang"))
    flood = 300
    for i in range(flood):  # ~3 MB: far more than the socket holds
        process.submit(ToolCall(f"f{i}", "r1", i, "fault", ("ok",), True, "x" * 10_000))
    assert replies.wait("hang") == ToolReply.error("wall-time limit (5 s per call) exceeded")
    answers = [replies.wait(f"f{i}") for i in range(flood)]
    assert {a.kind for a in answers} == {"value"} and process.restarts == 1


HOST = """
import sys, time
sys.path[:0] = [{here!r}]
from timely_core.tools.process import PluginProcess
from timely_core.tools.spec import ToolSpec
from timely_core.tools.plugin import ToolCall
spec = ToolSpec(name="faulty", plugin="tools_fault_plugins:Faulty", wall_s=3600.0)
process = PluginProcess(spec, lambda pending, reply: None)
process.submit(ToolCall("t", "r1", 0, "fault", ("hang",), True, "fault('hang')"))
print(process.pid, flush=True)
time.sleep(3600)
"""


def test_a_plugin_ends_with_the_services_process_even_in_a_hung_call() -> None:
    """The service's process is killed (no cleanup runs) while its tool hangs in a
    call, reading nothing: the tool's process ends too."""
    host = host_process(HOST.format(here=HERE))
    try:
        assert host.stdout is not None
        worker = int(host.stdout.readline())
        time.sleep(0.5)  # the call is in the plugin's sleep
        os.kill(worker, 0)  # alive
        host.kill()
        host.wait()
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline and alive(worker):
            time.sleep(0.05)
        assert not alive(worker), "the tool's process outlived the service's"
    finally:
        host.kill()
