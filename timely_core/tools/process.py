"""The service's side of one plugin process: start it, send it calls, read its
replies on a thread of its own, and keep it alive.

Calls go out through a writer thread, so `submit` never waits on the process
(a hung plugin that stops reading fills its socket; only the writer blocks, until
the process is killed). The process answers calls in order, so the oldest
unanswered call is the one it is working on; its wall time counts from when the
previous reply arrived (or from its sending, if the process was idle). A crash,
a breach of the CPU or memory limit, or a call past its wall time (the process is
then killed) ends that call with an error saying which; the process is started
again and the calls queued behind it are sent to the new one, so other tasks go on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from timely_core.errors import ServiceError
from timely_core.tools.channel import Channel, ChannelClosed, call_to_wire, reply_from_wire
from timely_core.tools.plugin import ToolCall, ToolReply
from timely_core.tools.sandbox import EXIT_MEMORY
from timely_core.tools.spec import ToolSpec
from timely_core.tools.stderr_tail import StderrTail

log = logging.getLogger(__name__)
START_TIMEOUT_S = 60.0  # importing the plugin on a loaded machine
TICK_S = 0.02  # how often the reader looks at the wall time of the call in progress


class ToolStartError(ServiceError, RuntimeError):
    """The plugin's process could not be started (bad import path, plugin error)."""


@dataclass(frozen=True)
class ToolInfo:
    """What the plugin said it consumes when its process started."""

    skills: frozenset[str]
    partial: bool
    validates: bool
    network: str  # "allowed", "isolated", or "not isolated: why"
    streams: bool = False  # hands the robot elements of calls as they are decoded


@dataclass
class PendingCall:
    request_id: int
    call: ToolCall
    sent_s: float = 0.0
    context: Any = None  # the router's, handed back with the reply


ReplyHandler = Callable[[PendingCall, ToolReply], None]


@dataclass
class _Running:
    proc: subprocess.Popen[bytes]
    channel: Channel
    stderr: StderrTail
    killed_for: str = ""  # why the host killed it, if it did
    fatal: str = ""  # what the process reported before ending
    busy_since_s: float = field(default_factory=time.monotonic)


class PluginProcess:
    def __init__(self, spec: ToolSpec, on_reply: ReplyHandler) -> None:
        self.spec = spec
        self._on_reply = on_reply
        self._lock = threading.Lock()
        self._pending: deque[PendingCall] = deque()  # sent (or to be sent), unanswered
        self._next_id = 0
        self._running: _Running | None = None
        self._closed = False
        self.restarts = 0
        self._running, self.info = self._start()
        # messages for a process, sent in order; those for a process that ended are
        # dropped (its unanswered calls are sent again to the next one)
        self._outbox: queue.SimpleQueue[tuple[_Running, dict[str, Any]] | None] = (
            queue.SimpleQueue()
        )
        self._writer = threading.Thread(
            target=self._write_loop, name=f"tool-{spec.name}-out", daemon=True
        )
        self._reader = threading.Thread(
            target=self._read_loop, name=f"tool-{spec.name}", daemon=True
        )
        self._writer.start()
        self._reader.start()

    @property
    def pid(self) -> int | None:
        running = self._running
        return None if running is None else running.proc.pid

    def submit(self, call: ToolCall, context: Any = None) -> PendingCall:
        """Queue `call`; its reply (or the error that ended it) reaches `on_reply`."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"tool {self.spec.name!r} was closed")
            self._next_id += 1
            pending = PendingCall(self._next_id, call, time.monotonic(), context)
            if not self._pending and self._running is not None:
                self._running.busy_since_s = pending.sent_s
            self._pending.append(pending)
            if self._running is not None:
                self._outbox.put((self._running, call_to_wire(pending.request_id, call)))
        return pending

    def end_task(self, task_id: str) -> None:
        with self._lock:
            if self._running is not None and not self._closed:
                self._outbox.put((self._running, {"op": "end", "task": task_id}))

    def close(self) -> None:
        """Stop the process; unanswered calls end with an error."""
        with self._lock:
            self._closed = True
            running, self._running = self._running, None
            orphans = list(self._pending)
            self._pending.clear()
        self._outbox.put(None)
        if threading.current_thread() is not self._writer:
            self._writer.join(timeout=5.0)
        if running is not None:
            self._send(running, {"op": "stop"})
            try:
                running.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                _kill(running.proc)
                running.proc.wait()
            _kill(running.proc)  # whatever the plugin started and left behind
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5.0)  # it sees the end of the channel
        if running is not None:
            running.channel.close()
        for pending in orphans:
            self._on_reply(pending, ToolReply.error(f"tool {self.spec.name!r} was closed"))

    # ------------------------------------------------------------------ process

    def _start(self) -> tuple[_Running, ToolInfo]:
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
            start_new_session=True,  # its own process group: what it starts ends with it
        )
        child.close()
        assert proc.stderr is not None
        stderr = StderrTail(proc.stderr, f"tool-{self.spec.name}")
        channel = Channel(parent)
        spec = self.spec
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
                proc.wait(timeout=5.0)
        if hello is None or hello.get("op") != "ready":
            ended = proc.poll()
            _kill(proc)
            proc.wait()
            channel.close()
            if hello is not None:
                why = str(hello.get("message", hello))
            elif ended is None:
                why = f"no answer in {START_TIMEOUT_S:g} s"
            else:
                why = f"its process ended ({_exit_status(ended)}) before it answered"
            if last_words := stderr.text():
                why += f"; its stderr ended: {last_words}"
            raise ToolStartError(f"tool {spec.name!r} ({spec.plugin}) did not start: {why}")
        return _Running(proc, channel, stderr), ToolInfo(
            skills=frozenset(str(s) for s in hello["skills"]),
            partial=bool(hello["partial"]),
            validates=bool(hello["validates"]),
            network=str(hello["network"]),
            streams=bool(hello.get("streams", False)),
        )

    def _send(self, running: _Running, message: dict[str, Any]) -> None:
        with contextlib.suppress(ChannelClosed):  # the reader sees the end, restarts it
            running.channel.send(message)

    def _write_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            running, message = item
            if running is self._running:
                self._send(running, message)

    # ------------------------------------------------------------------ reader

    def _read_loop(self) -> None:
        while True:
            running = self._running
            if running is None:
                return  # closed
            try:
                message = running.channel.receive(TICK_S)
            except (ChannelClosed, ValueError):
                if not self._recover(running):
                    return
                continue
            if message is None:
                self._check_wall_time(running)
                continue
            if message.get("op") == "fatal":
                running.fatal = str(message.get("reason", "fatal error"))
                continue
            self._answered(running, message)

    def _answered(self, running: _Running, message: dict[str, Any]) -> None:
        with self._lock:
            if not self._pending or self._pending[0].request_id != message.get("id"):
                log.warning("tool %r answered an unknown call: %r", self.spec.name, message)
                return
            pending = self._pending.popleft()
            running.busy_since_s = time.monotonic()
        try:
            reply = reply_from_wire(message)
        except ValueError as exc:
            reply = ToolReply.error(f"the tool sent a malformed reply: {exc}")
        self._on_reply(pending, reply)

    def _check_wall_time(self, running: _Running) -> None:
        with self._lock:
            busy = bool(self._pending)
            over = time.monotonic() - running.busy_since_s > self.spec.wall_s
        if busy and over and not running.killed_for:
            running.killed_for = f"wall-time limit ({self.spec.wall_s:g} s per call) exceeded"
            _kill(running.proc)

    def _recover(self, running: _Running) -> bool:
        """The process ended: fail the call it was on, start a new one, resend the
        rest. False when closed or the new process cannot start."""
        code = running.proc.wait()
        _kill(running.proc)  # whatever the plugin started and left behind
        running.channel.close()
        reason = self._reason(running, code)
        with self._lock:
            if self._closed:
                return False
            victim = self._pending.popleft() if self._pending else None
            self._running = None
        if victim is not None:
            self._on_reply(victim, ToolReply.error(reason))
        log.warning("tool %r: %s; restarting it", self.spec.name, reason)
        try:
            restarted, _ = self._start()
        except ToolStartError as exc:
            with self._lock:
                orphans = list(self._pending)
                self._pending.clear()
                self._closed = True
            for pending in orphans:
                self._on_reply(pending, ToolReply.error(f"{reason}; then {exc}"))
            return False
        with self._lock:
            if self._closed:
                self._send(restarted, {"op": "stop"})
                restarted.proc.wait()
                restarted.channel.close()
                return False
            self.restarts += 1
            self._running = restarted
            for pending in self._pending:
                self._outbox.put((restarted, call_to_wire(pending.request_id, pending.call)))
        return True

    def _reason(self, running: _Running, code: int) -> str:
        spec = self.spec
        if running.killed_for:
            return running.killed_for
        if running.fatal:  # the worker said so before it exited
            return f"memory limit ({spec.memory_mb} MiB) exceeded"
        if code == -signal.SIGXCPU:
            return f"CPU-time limit ({spec.cpu_s:g} s per call) exceeded"
        crashed = f"the tool's process crashed ({_exit_status(code)})"
        if code == EXIT_MEMORY:  # unsaid: out of memory before it could say so, or its own exit
            crashed += f", the code it exits with past its memory limit ({spec.memory_mb} MiB)"
        if last_words := running.stderr.text():
            crashed += f"; its stderr ended: {last_words}"
        return crashed


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the tool's process group: the worker and anything its plugin started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _exit_status(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
