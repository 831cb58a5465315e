"""A plugin's process: `python -m timely_core.tools.worker FD`, FD the inherited
socket of its channel. It first forks its keeper (keeper.py: what the plugin starts
ends with it, and the process ends when the service's process does, even in a call
that never returns). It then waits for the "start" message, limits itself
(`sandbox.py`), imports and starts the plugin, says "ready" with what the plugin
consumes, then answers each call with one reply until "stop" or the end of the
channel (the service is gone). A plugin that raises answers with an error naming
the exception and where it was raised (one that exits ends the process: a crash);
a reply with fields of the wrong type is answered with an error naming the field;
a plugin that raises or exits in `__init__` is reported as a failed start naming
the exception; a reply over the channel's limit
(`MAX_MESSAGE_BYTES`), or one msgpack cannot carry, is answered with an error
instead, and the process goes on. One that runs out of memory ends the process
("fatal"), which the host restarts, and so does a call past its CPU budget."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import socket
import sys
import traceback
from typing import Any, NoReturn

from timely_core.tools.channel import (
    Channel,
    ChannelClosed,
    MessageTooLarge,
    call_from_wire,
    encode,
    reply_to_wire,
)
from timely_core.tools.keeper import split
from timely_core.tools.plugin import ToolPlugin, ToolReply
from timely_core.tools.sandbox import (
    EXIT_MEMORY,
    isolate_network,
    limit_memory,
    start_cpu_budget,
    stop_cpu_budget,
)


def load_plugin(path: str, options: dict[str, Any]) -> ToolPlugin:
    module_name, _, class_name = path.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, ToolPlugin)):
        raise TypeError(f"{path} is not a ToolPlugin subclass")
    plugin = cls(options)
    check_skills(path, plugin.skills)
    return plugin


def check_skills(path: str, skills: object) -> None:
    """`skills` must be a collection of names: a bare "pick" would otherwise be
    read as the skills "p", "i", "c", "k", and a number would be made a name."""
    if isinstance(skills, str | bytes) or not isinstance(skills, set | frozenset | list | tuple):
        raise TypeError(
            f"{path}.skills must be a set of skill names, e.g. frozenset({{'pick'}}), "
            f"not {type(skills).__name__} {skills!r}"
        )
    wrong = [s for s in skills if not isinstance(s, str) or not s]
    if wrong:
        raise TypeError(f"{path}.skills holds {wrong!r}: each skill name must be a non-empty str")
    if not skills:
        raise ValueError(f"{path} consumes no skills (set its `skills`)")


def start(channel: Channel) -> tuple[ToolPlugin, float]:
    message = channel.receive(None) or {}
    network = "allowed" if message.get("network") else isolate_network()
    try:
        limit_memory(int(message["memory_mb"]))
        plugin = load_plugin(str(message["plugin"]), dict(message.get("options") or {}))
    except (Exception, SystemExit) as exc:  # reported to the host, which names the plugin
        channel.send({"op": "failed", "message": f"{type(exc).__name__}: {exc}"})
        sys.exit(1)
    channel.send(
        {
            "op": "ready",
            "skills": sorted(plugin.skills),
            "partial": plugin.partial or plugin.streams,
            "validates": plugin.validates or plugin.streams,
            "streams": plugin.streams,
            "network": network,
            "pid": os.getpid(),
        }
    )
    return plugin, float(message["cpu_s"])


def serve(channel: Channel) -> None:
    plugin, cpu_s = start(channel)
    while True:
        message = channel.receive(None) or {}
        op = message.get("op")
        if op == "stop":
            return
        if op == "end":
            end_task(plugin, str(message["task"]))
            continue
        request_id = int(message["id"])
        start_cpu_budget(cpu_s)
        try:
            reply = answer(plugin, message)
        except MemoryError:
            out_of_memory(channel, request_id)
        finally:
            stop_cpu_budget()
        channel.send_encoded(wire_reply(channel, request_id, reply))


def answer(plugin: ToolPlugin, message: dict[str, Any]) -> ToolReply:
    call = call_from_wire(message)
    try:
        reply = plugin.on_call(call) if call.complete else plugin.on_partial(call)
    except MemoryError:
        raise
    except Exception as exc:
        return ToolReply.error(raised(exc, plugin))
    if not isinstance(reply, ToolReply):
        return ToolReply.error(f"the tool returned {type(reply).__name__}, not a ToolReply")
    return malformed(reply) or reply


def malformed(reply: ToolReply) -> ToolReply | None:
    """An error naming what is wrong in a reply the host could not read (a non-str
    `message`, an `argument` that is no index), or None when it is well formed."""
    if not isinstance(reply.message, str):
        kind = type(reply.message).__name__
        return ToolReply.error(f"the tool's reply has a message of type {kind}, not str")
    argument = reply.argument
    if argument is not None and (isinstance(argument, bool) or not isinstance(argument, int)):
        return ToolReply.error(
            f"the tool's reply names argument={argument!r}: it must be an index into "
            "call.args (an int from 0) or None"
        )
    return None


def raised(exc: BaseException, plugin: ToolPlugin) -> str:
    """`the tool raised KeyError: 'missing' at my_tools.py:12 in check`: where it
    was raised, and the plugin's own innermost frame when that was elsewhere (in a
    library: `... at decoder.py:355 in raw_decode (from my_tools.py:12 in check)`)."""
    text = f"the tool raised {type(exc).__name__}" + (f": {exc}" if str(exc) else "")
    frames = traceback.extract_tb(exc.__traceback__)[1:]  # the first is answer()'s
    if not frames:
        return text
    inner = frames[-1]
    text += f" at {_where(inner)}"
    homes = _plugin_homes(plugin)
    own = [f for f in frames if os.path.dirname(os.path.abspath(f.filename)) in homes]
    if own and own[-1] is not inner:
        text += f" (from {_where(own[-1])})"
    return text


def _where(frame: traceback.FrameSummary) -> str:
    return f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}"


def _plugin_homes(plugin: ToolPlugin) -> set[str]:
    """The folders of the plugin's classes (its base classes' too, ToolPlugin's not)."""
    homes = set()
    for cls in type(plugin).__mro__:
        if cls in (ToolPlugin, object):
            continue
        with contextlib.suppress(TypeError, OSError):
            homes.add(os.path.dirname(os.path.abspath(inspect.getfile(cls))))
    return homes


def wire_reply(channel: Channel, request_id: int, reply: ToolReply) -> bytes:
    """The reply as sent, or an error saying why it cannot be (too large, or a
    value msgpack cannot carry): that call fails, the process goes on."""
    try:
        return encode(reply_to_wire(request_id, reply))
    except MessageTooLarge as exc:
        refused = ToolReply.error(f"the tool's reply is {exc}")
    except (TypeError, ValueError, OverflowError) as exc:
        value = type(reply.value).__name__
        refused = ToolReply.error(
            f"the tool returned a value of type {value}, which cannot be sent ({exc})"
        )
    except MemoryError:
        out_of_memory(channel, request_id)
    return encode(reply_to_wire(request_id, refused))


def out_of_memory(channel: Channel, request_id: int) -> NoReturn:
    channel.send({"op": "fatal", "id": request_id, "reason": "memory limit exceeded"})
    os._exit(EXIT_MEMORY)


def end_task(plugin: ToolPlugin, task_id: str) -> None:
    """The plugin's `on_task_end`; what it raises is the plugin's own trouble (on its
    stderr), never a call's: no call is waiting on it, and the process goes on."""
    try:
        plugin.on_task_end(task_id)
    except MemoryError:
        os._exit(EXIT_MEMORY)
    except Exception:
        print(f"on_task_end({task_id!r}) raised:", file=sys.stderr)
        traceback.print_exc(limit=-1, file=sys.stderr)


def main() -> None:
    fd = int(sys.argv[1])
    split(fd)  # from here on, the worker (its keeper stays behind)
    os.set_inheritable(fd, False)  # not handed to what the plugin starts
    channel = Channel(socket.socket(fileno=fd))
    with contextlib.suppress(ChannelClosed):  # the service ended
        serve(channel)


if __name__ == "__main__":
    main()
