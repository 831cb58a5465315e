"""A plugin's process: `python -m timely_core.tools.worker FD`, FD the inherited
socket of its channel. It waits for the "start" message, limits itself
(`sandbox.py`), imports and starts the plugin, says "ready" with what the plugin
consumes, then answers each call with one reply until "stop" or the end of the
channel (the service is gone). A plugin that raises answers with an error; one
that runs out of memory ends the process ("fatal"), which the host restarts.
The process also ends when the service's process does, even in the middle of a
call that never returns (it would never read the channel's end): a watcher thread
sees the worker re-parented."""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import sys
import threading
import time
import traceback
from typing import Any

from timely_core.tools.channel import (
    Channel,
    ChannelClosed,
    call_from_wire,
    reply_to_wire,
)
from timely_core.tools.plugin import ToolPlugin, ToolReply
from timely_core.tools.sandbox import (
    EXIT_MEMORY,
    isolate_network,
    limit_memory,
    renew_cpu_budget,
)

PARENT_POLL_S = 0.5  # how soon an orphaned worker notices


def exit_with_parent() -> None:
    """End this process once its parent (the service's process) is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def load_plugin(path: str, options: dict[str, Any]) -> ToolPlugin:
    module_name, _, class_name = path.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if not (isinstance(cls, type) and issubclass(cls, ToolPlugin)):
        raise TypeError(f"{path} is not a ToolPlugin subclass")
    plugin = cls(options)
    if not plugin.skills:
        raise ValueError(f"{path} consumes no skills (set its `skills`)")
    return plugin


def start(channel: Channel) -> tuple[ToolPlugin, float]:
    message = channel.receive(None) or {}
    network = "allowed" if message.get("network") else isolate_network()
    try:
        limit_memory(int(message["memory_mb"]))
        plugin = load_plugin(str(message["plugin"]), dict(message.get("options") or {}))
    except Exception as exc:  # reported to the host, which names the plugin
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


def answer(plugin: ToolPlugin, message: dict[str, Any]) -> ToolReply:
    call = call_from_wire(message)
    try:
        reply = plugin.on_call(call) if call.complete else plugin.on_partial(call)
    except MemoryError:
        raise
    except Exception as exc:
        trace = traceback.format_exc(limit=-1).strip().splitlines()[-2:]
        return ToolReply.error(f"the tool raised {type(exc).__name__}: {exc} ({' '.join(trace)})")
    if not isinstance(reply, ToolReply):
        return ToolReply.error(f"the tool returned {type(reply).__name__}, not a ToolReply")
    return reply


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
        renew_cpu_budget(cpu_s)
        try:
            reply = answer(plugin, message)
        except MemoryError:
            channel.send({"op": "fatal", "id": request_id, "reason": "memory limit exceeded"})
            os._exit(EXIT_MEMORY)
        try:
            channel.send(reply_to_wire(request_id, reply))
        except (TypeError, ValueError, OverflowError) as exc:  # a value msgpack cannot carry
            value = type(reply.value).__name__
            refused = ToolReply.error(
                f"the tool returned a value of type {value}, which cannot be sent ({exc})"
            )
            channel.send(reply_to_wire(request_id, refused))


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
    exit_with_parent()
    channel = Channel(socket.socket(fileno=int(sys.argv[1])))
    with contextlib.suppress(ChannelClosed):  # the service ended
        serve(channel)


if __name__ == "__main__":
    main()
