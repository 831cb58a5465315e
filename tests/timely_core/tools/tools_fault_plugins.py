"""Plugins for the tool tests, loaded by module name in their own processes: one
that echoes, one per fault (crash, hang, CPU burn, memory hog, network use)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply


class Echo(ToolPlugin):
    """Returns the call's arguments; `pid` returns its process id."""

    skills = frozenset({"echo", "pid"})
    partial = True

    def on_partial(self, call: ToolCall) -> ToolReply:
        return ToolReply.returns({"partial": list(call.args)})

    def on_call(self, call: ToolCall) -> ToolReply:
        if call.skill == "pid":
            return ToolReply.returns(os.getpid())
        return ToolReply.returns(list(call.args))


class Faulty(ToolPlugin):
    """Misbehaves as its first argument says; `ok` answers normally."""

    skills = frozenset({"fault"})

    def on_call(self, call: ToolCall) -> ToolReply:
        mode = call.args[0]
        if mode == "crash":
            os._exit(7)
        if mode == "segv":
            os.kill(os.getpid(), 11)
        if mode == "hang":
            time.sleep(3600)
        if mode == "burn":
            while True:
                pass
        if mode == "hog":
            blocks = []
            while True:
                blocks.append(bytearray(64 * 1024 * 1024))
        if mode == "raise":
            raise KeyError("no such thing")
        if mode == "nap":  # answers, a while later
            time.sleep(float(call.args[1]))  # type: ignore[arg-type]
        if mode == "last words":
            print("cannot reach the gripper's controller", file=sys.stderr, flush=True)
            os._exit(4)
        if mode == "exit 3":  # the plugin's own exit, with the code a memory breach uses
            sys.exit(3)
        if mode == "unsendable":
            return ToolReply.returns(object())
        if mode == "spawn":  # starts a process of its own, writes its pid, then hangs
            child = subprocess.Popen(["sleep", "300"])
            with open(str(call.args[1]), "w") as out:
                out.write(str(child.pid))
            time.sleep(3600)
        if mode == "net":
            try:
                socket.create_connection(("127.0.0.1", 9), timeout=1.0).close()
            except OSError as exc:
                return ToolReply.observes(f"{type(exc).__name__} errno={exc.errno}")
            return ToolReply.observes("connected")
        return ToolReply.returns(os.getpid())


class RaisesAtEnd(Faulty):
    """Its `on_task_end` raises (a bug of the plugin's own, no call's)."""

    def on_task_end(self, task_id: str) -> None:
        raise RuntimeError(f"cleanup of {task_id} failed")


class NotAPlugin:
    skills = frozenset({"x"})


class DiesAtStart(ToolPlugin):
    """Its process ends while starting, saying why on stderr (as a C library would)."""

    skills = frozenset({"x"})

    def __init__(self, options: dict[str, object]) -> None:
        print("libfoo: no licence found", file=sys.stderr, flush=True)
        os._exit(5)


class KnownObjects(ToolPlugin):
    """Validates object arguments against `options["known"]`, argument by argument."""

    skills = frozenset({"pick", "place", "search"})
    partial = True
    validates = True

    def on_partial(self, call: ToolCall) -> ToolReply:
        return self._check(call)

    def on_call(self, call: ToolCall) -> ToolReply:
        return self._check(call)

    def _check(self, call: ToolCall) -> ToolReply:
        known = set(self.options["known"])
        for i, value in enumerate(call.args):
            if isinstance(value, str) and value not in known:
                return ToolReply.error(f"{value!r} is not in the scene", argument=i)
        return ToolReply.ok()


class Look(ToolPlugin):
    """Observes: answers `search(obj)` with where the object is; crashes on 'bomb'.
    It validates, so a statement with `search` waits for its answer."""

    skills = frozenset({"search"})
    validates = True

    def on_call(self, call: ToolCall) -> ToolReply:
        if call.args[0] == "bomb":
            os._exit(9)
        return ToolReply.observes(f"{call.args[0]} is on the table")


class BigLook(Look):
    """Observes `search(obj)` with `options["size"]` characters of answer."""

    def on_call(self, call: ToolCall) -> ToolReply:
        return ToolReply.observes("x" * int(self.options["size"]))
