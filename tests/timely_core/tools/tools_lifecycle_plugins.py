"""Plugins for the tests of a tool's life (loaded by module name in their own
processes): one that leaves processes behind, one that cannot start again, one
slow to restart, one that burns CPU, one with an oversized reply, and one that
writes on its channel behind the worker's back."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from typing import Any

import msgpack

from timely_core.tools.channel import MAX_MESSAGE_BYTES
from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply

LEFT_BEHIND = ("1237", "1238", "1239")  # `sleep` arguments of what Spawner starts


class Spawner(ToolPlugin):
    """`spawn(pid_file, then)`: starts `sleep` three ways (a child, a child in a
    session of its own, a daemon whose parent exits at once), writes their pids,
    then answers (`then` "ok") or hangs ("hang")."""

    skills = frozenset({"spawn"})

    def on_call(self, call: ToolCall) -> ToolReply:
        pid_file, then = str(call.args[0]), call.args[1]
        child = subprocess.Popen(["sleep", LEFT_BEHIND[0]])
        loner = subprocess.Popen(["sleep", LEFT_BEHIND[1]], start_new_session=True)
        starter = (
            "import subprocess as s; "
            "print(s.Popen(['sleep', %r], stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"
        )
        daemon = subprocess.run(
            [sys.executable, "-c", starter % LEFT_BEHIND[2]],
            capture_output=True,
            text=True,
            check=True,
        )
        pids = [child.pid, loner.pid, int(daemon.stdout)]
        with open(pid_file + ".tmp", "w") as out:
            out.write(" ".join(map(str, pids)))
        os.replace(pid_file + ".tmp", pid_file)
        if then == "hang":
            time.sleep(3600)
        return ToolReply.returns(pids)


class FlakyStart(ToolPlugin):
    """Starts while `options["marker"]` does not exist, and creates it; `fail`
    crashes the process. Remove the marker and it starts again."""

    skills = frozenset({"fail", "ok"})
    validates = True

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        marker = str(options["marker"])
        if os.path.exists(marker):
            raise RuntimeError("license server unreachable")
        open(marker, "w").close()

    def on_call(self, call: ToolCall) -> ToolReply:
        if call.skill == "fail":
            os._exit(9)
        return ToolReply.returns(os.getpid())


class SlowToRestart(ToolPlugin):
    """Validates `search(obj)`; `search('hang')` hangs. Each start after the first
    (`options["marker"]` exists) takes `options["restart_s"]` seconds."""

    skills = frozenset({"search"})
    validates = True

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        marker = str(options["marker"])
        if os.path.exists(marker):
            time.sleep(float(options["restart_s"]))
        open(marker, "w").close()

    def on_call(self, call: ToolCall) -> ToolReply:
        if call.args[0] == "hang":
            time.sleep(3600)
        if call.args[0] == "nap":
            time.sleep(3.0)
        return ToolReply.observes(f"{call.args[0]} is on the table")


class Burner(ToolPlugin):
    """Burns `options["init_s"]` CPU seconds at start; `burn(path, seconds)` burns
    CPU, writing to `path` how much the call used so far (every 10 ms of it)."""

    skills = frozenset({"burn"})

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        _burn(float(options.get("init_s", 0.0)))

    def on_call(self, call: ToolCall) -> ToolReply:
        path, seconds = str(call.args[0]), float(call.args[1])  # type: ignore[arg-type]
        start = time.process_time()
        noted = 0.0
        while (used := time.process_time() - start) < seconds:
            if used - noted >= 0.01:
                with open(path, "w") as out:
                    out.write(f"{used:.4f}")
                noted = used
        return ToolReply.returns(used)


class Odd(ToolPlugin):
    """`odd(mode)`: `big` returns more than the channel carries; `header`, `garbage`
    and `list` write a frame on the channel themselves (a header announcing too
    much, bytes that are no msgpack, a msgpack list), then answer; `json` raises
    from inside a library; anything else answers its pid."""

    skills = frozenset({"odd"})

    def on_call(self, call: ToolCall) -> ToolReply:
        mode = call.args[0]
        if mode == "big":
            return ToolReply.returns(b"x" * (MAX_MESSAGE_BYTES + 1024))
        if mode == "json":
            return ToolReply.returns(json.loads("{"))
        frames = {
            "header": struct.pack(">I", 20 * 1024 * 1024) + b"x" * 1000,
            "garbage": struct.pack(">I", 3) + b"\xc1\xc1\xc1",
            "list": struct.pack(">I", 3) + msgpack.packb([1, 2]),
        }
        if mode in frames:
            os.write(int(sys.argv[1]), frames[str(mode)])  # the worker's channel
        return ToolReply.returns(os.getpid())


def _burn(seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


class BigLook(ToolPlugin):
    """Validates `search(obj)`: observes it, more than the channel carries for 'big'."""

    skills = frozenset({"search"})
    validates = True

    def on_call(self, call: ToolCall) -> ToolReply:
        if call.args[0] == "big":
            return ToolReply.observes("x" * (MAX_MESSAGE_BYTES + 1024))
        return ToolReply.observes(f"{call.args[0]} is on the table")
