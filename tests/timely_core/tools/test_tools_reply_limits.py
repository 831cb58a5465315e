"""One bad reply costs one call: a reply over the channel's limit fails its call,
naming the size and the limit, and the process goes on; a frame that breaks the
channel (too large, not msgpack, not a map) restarts the process; the thread that
reads the replies survives anything unexpected (the tool is restarted, the call
fails with the reason, it is logged), and so it still enforces wall times."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.timely_core.tools.tools_support import HERE, Replies, call
from timely_core.tools import process as process_module
from timely_core.tools.channel import MAX_MESSAGE_BYTES
from timely_core.tools.plugin import ToolReply
from timely_core.tools.process import PendingCall, PluginProcess
from timely_core.tools.spec import ToolSpec


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(HERE)


def odd(replies: Replies, wall_s: float = 60.0) -> PluginProcess:
    spec = ToolSpec(name="odd", plugin="tools_lifecycle_plugins:Odd", wall_s=wall_s)
    return PluginProcess(spec, replies)


@pytest.fixture
def tool() -> Iterator[tuple[PluginProcess, Replies]]:
    replies = Replies()
    process = odd(replies)
    yield process, replies
    process.close()


def test_a_reply_over_the_limit_fails_its_call_alone(
    tool: tuple[PluginProcess, Replies],
) -> None:
    process, replies = tool
    pid = process.pid
    process.submit(call("big", "big", skill="odd"))
    process.submit(call("next", "ok", skill="odd"))
    reply = replies.wait("big")
    assert reply.kind == "error" and reply.message.startswith("the tool's reply is 16.0 MiB ("), (
        reply
    )
    assert reply.message.endswith(
        f"bytes), over the limit of 16.0 MiB ({MAX_MESSAGE_BYTES} bytes) per message "
        "(MAX_MESSAGE_BYTES)"
    )
    assert replies.wait("next") == ToolReply.returns(pid)
    assert process.restarts == 0


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        (
            "header",
            f"the tool's process sent 20.0 MiB (20971520 bytes), over the limit of 16.0 MiB "
            f"({MAX_MESSAGE_BYTES} bytes) per message (MAX_MESSAGE_BYTES)",
        ),
        ("garbage", "the tool's process sent a malformed message (FormatError"),
        ("list", "the tool's process sent a message that is not a map: [1, 2]"),
    ],
)
def test_a_frame_that_breaks_the_channel_restarts_the_process(
    tool: tuple[PluginProcess, Replies], mode: str, reason: str
) -> None:
    process, replies = tool
    first = process.pid
    process.submit(call("bad", mode, skill="odd"))
    process.submit(call("queued", "ok", skill="odd"))  # another task's, behind it
    reply = replies.wait("bad")
    assert reply.kind == "error" and reply.message.startswith(reason), reply
    after = replies.wait("queued")
    assert after.kind == "value" and after.value != first and process.restarts == 1


def test_the_reader_survives_a_failure_of_its_own(
    tool: tuple[PluginProcess, Replies],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bug while reading (here: reading a reply raises) restarts the tool and fails
    the call with the reason; later calls are answered, and wall times enforced."""
    process, replies = tool
    real = process_module.reply_from_wire
    failures = iter([RuntimeError("reply handling bug")])

    def flaky(message: dict[str, object]) -> ToolReply:
        for failure in failures:
            raise failure
        return real(message)

    monkeypatch.setattr(process_module, "reply_from_wire", flaky)
    with caplog.at_level(logging.ERROR, logger="timely_core.tools.process"):
        process.submit(call("hit", "ok", skill="odd"))
        process.submit(call("after", "ok", skill="odd"))
        reply = replies.wait("hit")
        after = replies.wait("after")
    assert reply == ToolReply.error(
        "the service failed reading its replies (RuntimeError('reply handling bug'))"
    )
    assert after.kind == "value" and process.restarts == 1
    assert "tool 'odd': reading its replies failed" in caplog.text


def test_a_failing_reply_handler_costs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    replies = Replies()

    def handler(pending: PendingCall, reply: ToolReply) -> None:
        replies(pending, reply)
        if pending.call.task_id == "first":
            raise ValueError("the caller's own bug")

    process = odd(Replies())
    process._on_reply = handler
    try:
        with caplog.at_level(logging.ERROR, logger="timely_core.tools.process"):
            process.submit(call("first", "ok", skill="odd"))
            process.submit(call("second", "ok", skill="odd"))
            assert replies.wait("second").kind == "value"
        assert process.restarts == 0 and "the reply handler failed" in caplog.text
    finally:
        process.close()


def test_a_validator_with_a_big_reply_stays_in_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe's case: a validating tool's oversized reply failed every later task
    with a verdict that never came. Now that task fails, naming tool, size and
    limit, and the next one passes."""
    from tests.timely_core.core_support import make_service
    from timely_core.request import TaskRequest

    monkeypatch.syspath_prepend(HERE)
    plans = {"big": "mf(50); search('big'); say('x');", "fine": "mf(50); search('a');"}
    service, _, _ = make_service(plans)
    try:
        service.register_tool(
            "drone1", {"name": "big", "plugin": "tools_lifecycle_plugins:BigLook"}
        )
        errors = []
        for instruction in ("big", "fine"):
            handle = service.submit(TaskRequest(robot_id="drone1", instruction=instruction))
            service.run_until_idle()
            errors.append(handle.result(timeout_s=0).error)
    finally:
        service.close_tools()
    assert errors[0].startswith(
        "robot drone1: tool 'big' failed on call \"search('big')\": the tool's reply is 16.0 MiB"
    ), errors[0]
    assert "over the limit of 16.0 MiB" in errors[0]
    assert errors[1] == ""
