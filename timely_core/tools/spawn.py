"""Starting one plugin process and ending it (the queue, the reader and the
restarts are process.py's).

The process started is the worker's keeper (keeper.py), which forks the worker:
the host ends a tool by sending the keeper SIGTERM, and the keeper kills the
worker and everything below it, then exits with the worker's status. Killing the
keeper's process group with SIGKILL is only the fallback for a keeper that does
not exit (what left that group could then survive)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from timely_core.errors import ServiceError
from timely_core.tools.channel import Channel, ChannelClosed, ChannelError
from timely_core.tools.sandbox import EXIT_MEMORY
from timely_core.tools.spec import ToolSpec
from timely_core.tools.stderr_tail import StderrTail

START_TIMEOUT_S = 60.0  # importing the plugin on a loaded machine
KEEPER_EXIT_S = 10.0  # the keeper kills the tree in at most 5 s (keeper.TREE_KILL_S)


class ToolStartError(ServiceError, RuntimeError):
    """The plugin's process could not be started (bad import path, plugin error).
    `why` is the cause alone, without the tool's name."""

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        self.why = why or message


@dataclass(frozen=True)
class ToolInfo:
    """What the plugin said it consumes when its process started."""

    skills: frozenset[str]
    partial: bool  # gets partial calls (the plugin acts on them and the spec allows them)
    validates: bool
    network: str  # "allowed", "isolated", or "not isolated: why"
    streams: bool = False  # hands the robot elements of calls as they are decoded


@dataclass
class Running:
    """One started process: its keeper (`proc`), the worker's pid, the channel."""

    proc: subprocess.Popen[bytes]
    worker_pid: int
    channel: Channel
    stderr: StderrTail
    killed_for: str = ""  # why the host killed it, if it did
    fatal: str = ""  # what the process reported before ending
    busy_since_s: float = field(default_factory=time.monotonic)


def spawn(spec: ToolSpec) -> tuple[Running, ToolInfo]:
    """Start `spec`'s process and wait for its "ready". Raises ToolStartError."""
    parent, child = socket.socketpair()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    env.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's pool reserves address space
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "timely_core.tools.worker", str(child.fileno())],
        pass_fds=[child.fileno()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # away from the service's terminal and its signals
    )
    child.close()
    assert proc.stderr is not None
    stderr = StderrTail(proc.stderr, f"tool-{spec.name}")
    channel = Channel(parent)
    try:
        channel.send(
            {
                "op": "start",
                "plugin": spec.plugin,
                "options": spec.options,
                "network": spec.network,
                "memory_mb": spec.memory_mb,
                "cpu_s": spec.cpu_s,
            }
        )
        hello = channel.receive(START_TIMEOUT_S)
    except ChannelClosed:  # it ended: its status follows its closed socket
        hello = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KEEPER_EXIT_S)
    except ChannelError as exc:
        hello = {"op": "failed", "message": f"it sent {exc}"}
    if hello is None or hello.get("op") != "ready":
        ended = proc.poll()
        end(proc)
        channel.close()
        if hello is not None:
            why = str(hello.get("message", hello))
        elif ended is None:
            why = f"no answer in {START_TIMEOUT_S:g} s"
        else:
            why = f"its process ended ({exit_status(ended)}) before it answered"
        if last_words := stderr.text():
            why += f"; its stderr ended: {last_words}"
        raise ToolStartError(f"tool {spec.name!r} ({spec.plugin}) did not start: {why}", why)
    info = ToolInfo(
        skills=frozenset(str(s) for s in hello["skills"]),
        partial=bool(hello["partial"]) and spec.partial_calls,
        validates=bool(hello["validates"]),
        network=str(hello["network"]),
        streams=bool(hello.get("streams", False)),
    )
    return Running(proc, int(hello.get("pid", proc.pid)), channel, stderr), info


def kill(proc: subprocess.Popen[bytes]) -> None:
    """Ask the keeper to kill the worker and all below it (it then exits)."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)


def end(proc: subprocess.Popen[bytes]) -> int:
    """Kill the process (its tree) and wait for it; its exit code (`Popen`'s)."""
    kill(proc)
    return reap(proc)


def reap(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the keeper, which ends once the worker did and the tree is killed;
    one that does not is killed with its process group."""
    try:
        return proc.wait(timeout=KEEPER_EXIT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def why_ended(running: Running, code: int, spec: ToolSpec) -> str:
    """What ended the process, for the call it was on."""
    if running.killed_for:
        return running.killed_for
    if running.fatal:  # the worker said so before it exited
        return f"memory limit ({spec.memory_mb} MiB) exceeded"
    if code in (-signal.SIGPROF, -signal.SIGXCPU):
        return f"CPU-time limit ({spec.cpu_s:g} s per call) exceeded"
    crashed = f"the tool's process crashed ({exit_status(code)})"
    if code == EXIT_MEMORY:  # unsaid: out of memory before it could say so, or its own exit
        crashed += f", the code it exits with past its memory limit ({spec.memory_mb} MiB)"
    if last_words := running.stderr.text():
        crashed += f"; its stderr ended: {last_words}"
    return crashed


def exit_status(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
