"""The service's side of one plugin process: send it calls, read its replies on a
thread of its own, and keep it alive (starting and ending one process: spawn.py).

Calls go out through a writer thread, so `submit` never waits on the process
(a hung plugin that stops reading fills its socket; only the writer blocks, until
the process is killed). The process answers calls in order, so the oldest
unanswered call is the one it is working on; its wall time counts from when the
previous reply arrived (or from its sending, if the process was idle). A crash,
a breach of the CPU or memory limit, or a call past its wall time (the process is
then killed) ends that call with an error saying which; the process is started
again and the calls queued behind it are sent to the new one, so other tasks go on.

The reader thread, which also watches the wall time and restarts the process,
never dies of one bad message or of a bug: a message over the channel's limit or
not a msgpack map (the stream is lost), or anything unexpected while reading,
kills the process with that reason (logged), which fails the call it was on, and
the process is restarted.

A start that fails (the plugin's `__init__` raised: a licence server unreachable,
say) fails the calls waiting for it with its error, and the tool is down: until a
retry time each call fails at once (`ToolUnavailable`, naming the tool, the start
error and when it is tried again); the first call after it starts the process
again (in the reader thread, the call queued meanwhile). The delay between tries
doubles from RETRY_FIRST_S to RETRY_MAX_S; a start that succeeds resets it.

`due_s` is when the process will at the latest have answered, failed or given up
what it is doing (a call within its wall time, a start within its timeout): the
router waits for a verdict for as long as the tool keeps to that (router.py).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import signal
import subprocess
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from timely_core.tools.channel import (
    ChannelClosed,
    ChannelError,
    call_to_wire,
    encode,
    reply_from_wire,
)
from timely_core.tools.plugin import ToolCall, ToolReply
from timely_core.tools.spawn import (
    KEEPER_EXIT_S,
    START_TIMEOUT_S,
    Running,
    ToolInfo,
    ToolStartError,
    end,
    kill,
    reap,
    spawn,
    why_ended,
)
from timely_core.tools.spec import ToolSpec

__all__ = ["PendingCall", "PluginProcess", "ToolInfo", "ToolStartError", "ToolUnavailable"]

log = logging.getLogger(__name__)
TICK_S = 0.02  # how often the reader looks at the wall time of the call in progress
RETRY_FIRST_S = 1.0  # after a failed start, the first call this much later tries again
RETRY_MAX_S = 30.0  # the delay doubles up to this
# a restart: the old process's end, the new one's start, and its end if that failed
RESTART_BOUND_S = START_TIMEOUT_S + 2 * KEEPER_EXIT_S


class ToolUnavailable(RuntimeError):
    """The tool is down (its last start failed) and not yet due to be tried again."""


@dataclass
class PendingCall:
    request_id: int
    call: ToolCall
    sent_s: float = 0.0
    context: Any = None  # the router's, handed back with the reply
    wire: bytes = b""  # the call as sent (again, to a restarted process)


ReplyHandler = Callable[[PendingCall, ToolReply], None]


@dataclass(frozen=True)
class _Down:
    """The last start failed with `why`; calls before `retry_s` fail at once."""

    why: str
    retry_s: float
    delay_s: float


class PluginProcess:
    def __init__(self, spec: ToolSpec, on_reply: ReplyHandler) -> None:
        self.spec = spec
        self._on_reply = on_reply
        self._lock = threading.Lock()
        self._pending: deque[PendingCall] = deque()  # sent (or to be sent), unanswered
        self._next_id = 0
        self._closed = False
        self._starting_since: float | None = None  # a (re)start is due or under way
        self._ended_by = ""  # why the last process ended, until the next start
        self._down: _Down | None = None
        self._wake = threading.Event()  # a call for a tool that is down
        self.restarts = 0
        self._running: Running | None
        self._running, self.info = spawn(spec)
        # messages for a process, sent in order; those for a process that ended are
        # dropped (its unanswered calls are sent again to the next one)
        self._outbox: queue.SimpleQueue[tuple[Running, bytes] | None] = queue.SimpleQueue()
        self._writer = threading.Thread(
            target=self._write_loop, name=f"tool-{spec.name}-out", daemon=True
        )
        self._reader = threading.Thread(
            target=self._read_loop, name=f"tool-{spec.name}", daemon=True
        )
        self._writer.start()
        self._reader.start()
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        """The process running the plugin (None while it restarts)."""
        running = self._running
        return None if running is None else running.worker_pid

    def submit(self, call: ToolCall, context: Any = None) -> PendingCall:
        """Queue `call`; its reply (or the error that ended it) reaches `on_reply`.
        Raises RuntimeError if the tool was closed or the call cannot be sent (over
        the channel's limit), ToolUnavailable if the tool is down."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"tool {self.spec.name!r} was closed")
            now = time.monotonic()
            down = self._down
            if self._running is None and self._starting_since is None and down is not None:
                if now < down.retry_s:
                    raise ToolUnavailable(
                        f"tool {self.spec.name!r} is down: its last start failed ({down.why}); "
                        f"the next call from {down.retry_s - now:.1f} s on starts it again"
                    )
                self._starting_since = now
                self._wake.set()
            try:
                wire = encode(call_to_wire(self._next_id + 1, call))
            except (ValueError, TypeError, OverflowError) as exc:
                name = self.spec.name
                raise RuntimeError(f"the call cannot be sent to tool {name!r}: {exc}") from None
            self._next_id += 1
            pending = PendingCall(self._next_id, call, now, context, wire)
            if not self._pending and self._running is not None:
                self._running.busy_since_s = pending.sent_s
            self._pending.append(pending)
            if self._running is not None:
                self._outbox.put((self._running, wire))
        return pending

    def end_task(self, task_id: str) -> None:
        with self._lock:
            if self._running is not None and not self._closed:
                self._outbox.put((self._running, encode({"op": "end", "task": task_id})))

    def due_s(self) -> float:
        """When (monotonic) the process will at the latest have answered or failed
        the call it is on, or finished or given up a restart; now when it has no
        process (down or closed: its calls were answered)."""
        with self._lock:
            if self._starting_since is not None:
                return self._starting_since + RESTART_BOUND_S
            if self._running is not None:
                return self._running.busy_since_s + self.spec.wall_s + TICK_S
            return time.monotonic()

    def close(self) -> None:
        """Stop the process; unanswered calls end with an error."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running, self._running = self._running, None
            orphans = list(self._pending)
            self._pending.clear()
            self._starting_since = None
        _LIVE.discard(self)
        self._wake.set()
        self._outbox.put(None)
        if threading.current_thread() is not self._writer:
            self._writer.join(timeout=5.0)
        if running is not None:
            self._send(running, {"op": "stop"})
            try:
                running.proc.wait(timeout=2.0)  # the keeper ends the plugin's leftovers
            except subprocess.TimeoutExpired:
                end(running.proc)
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5.0)  # it sees the end of the channel
        if running is not None:
            running.channel.close()
        for pending in orphans:
            self._deliver(pending, ToolReply.error(f"tool {self.spec.name!r} was closed"))

    def abandon(self) -> None:
        """Kill the process without waiting and start none again (at the service's
        exit: its keeper ends what the plugin started)."""
        with self._lock:
            self._closed = True
            running = self._running
        self._wake.set()
        if running is not None:
            kill(running.proc)

    # ------------------------------------------------------------------ writer

    def _send(self, running: Running, message: dict[str, Any] | bytes) -> None:
        data = message if isinstance(message, bytes) else encode(message)
        with contextlib.suppress(ChannelClosed):  # the reader sees the end, restarts it
            running.channel.send_encoded(data)

    def _write_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            running, data = item
            if running is self._running:
                try:
                    self._send(running, data)
                except Exception:  # never seen; its call then ends past its wall time
                    log.exception("tool %r: a message could not be sent", self.spec.name)

    # ------------------------------------------------------------------ reader

    def _read_loop(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                running, starting = self._running, self._starting_since is not None
            try:
                if running is not None:
                    self._read(running)
                elif starting:
                    self._start_again()
                else:  # down: the next due call wakes it
                    self._wake.wait(0.5)
                    self._wake.clear()
            except Exception as exc:  # the reader must go on
                log.exception("tool %r: reading its replies failed", self.spec.name)
                if running is not None:
                    with contextlib.suppress(Exception):
                        self._fail(running, f"the service failed reading its replies ({exc!r})")
                time.sleep(TICK_S)

    def _read(self, running: Running) -> None:
        try:
            message = running.channel.receive(TICK_S)
        except ChannelClosed:
            self._recover(running)
            return
        except ChannelError as exc:  # the stream is lost: only a new process helps
            self._fail(running, f"the tool's process sent {exc}")
            return
        if message is None:
            self._check_wall_time(running)
        elif message.get("op") == "fatal":
            running.fatal = str(message.get("reason", "fatal error"))
        else:
            self._answered(running, message)

    def _answered(self, running: Running, message: dict[str, Any]) -> None:
        try:
            reply = reply_from_wire(message)
        except (ValueError, TypeError) as exc:
            reply = ToolReply.error(f"the tool sent a malformed reply: {exc}")
        with self._lock:
            if self._closed:
                return  # its calls were ended by `close`
            if not self._pending or self._pending[0].request_id != message.get("id"):
                log.warning("tool %r answered an unknown call: %.200r", self.spec.name, message)
                return
            pending = self._pending.popleft()
            running.busy_since_s = time.monotonic()
        self._deliver(pending, reply)

    def _deliver(self, pending: PendingCall, reply: ToolReply) -> None:
        """Hand a reply on; the handler's own failure is logged, the tool goes on."""
        try:
            self._on_reply(pending, reply)
        except Exception:
            log.exception("tool %r: the reply handler failed", self.spec.name)

    def _check_wall_time(self, running: Running) -> None:
        now = time.monotonic()
        with self._lock:
            busy = bool(self._pending)
            over = now - running.busy_since_s > self.spec.wall_s
        if busy and over and not running.killed_for:
            self._kill(running, f"wall-time limit ({self.spec.wall_s:g} s per call) exceeded")
        elif running.killed_for and now - running.busy_since_s > self.spec.wall_s + KEEPER_EXIT_S:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(running.proc.pid, signal.SIGKILL)  # its keeper did not end it

    def _kill(self, running: Running, reason: str) -> None:
        if not running.killed_for:
            running.killed_for = reason
        kill(running.proc)

    def _fail(self, running: Running, reason: str) -> None:
        """Kill the process for `reason` and recover: the call it was on fails."""
        self._kill(running, reason)
        self._recover(running)

    def _recover(self, running: Running) -> None:
        """The process ended: fail the call it was on; the loop starts a new one,
        which gets the calls queued behind it."""
        with self._lock:
            if self._running is not running:
                return  # closed, or already recovered
            self._starting_since = time.monotonic()
        code = reap(running.proc)  # the keeper ends once the worker did, its tree killed
        running.channel.close()
        reason = why_ended(running, code, self.spec)
        with self._lock:
            if self._closed:
                return
            victim = self._pending.popleft() if self._pending else None
            self._running = None
            self._ended_by = reason
        log.warning("tool %r: %s; restarting it", self.spec.name, reason)
        if victim is not None:
            self._deliver(victim, ToolReply.error(reason))

    def _start_again(self) -> None:
        try:
            restarted, _ = spawn(self.spec)
        except Exception as exc:  # any failure to start is the tool down
            why = exc.why if isinstance(exc, ToolStartError) else f"{type(exc).__name__}: {exc}"
            self._went_down(why)
            return
        with self._lock:
            closed = self._closed
            if not closed:
                self.restarts += 1
                self._running, self._starting_since = restarted, None
                self._down, self._ended_by = None, ""
                restarted.busy_since_s = time.monotonic()
                for pending in self._pending:
                    self._outbox.put((restarted, pending.wire))
        if closed:
            self._send(restarted, {"op": "stop"})
            end(restarted.proc)
            restarted.channel.close()

    def _went_down(self, why: str) -> None:
        """A start failed: the calls waiting for it fail, and so do those before
        the next try (submit)."""
        now = time.monotonic()
        with self._lock:
            if self._closed:
                return
            last = self._down
            delay = RETRY_FIRST_S if last is None else min(2 * last.delay_s, RETRY_MAX_S)
            self._down = _Down(why, now + delay, delay)
            self._starting_since = None
            orphans = list(self._pending)
            self._pending.clear()
            after, self._ended_by = self._ended_by, ""
        what = f"did not start again after {after}" if after else "did not start again"
        message = (
            f"tool {self.spec.name!r} {what}: {why}; the next call from {delay:g} s on "
            "starts it again"
        )
        log.warning("%s", message)
        for pending in orphans:
            self._deliver(pending, ToolReply.error(message))


_LIVE: weakref.WeakSet[PluginProcess] = weakref.WeakSet()


@atexit.register
def _abandon_all() -> None:
    """A service that exits without `close_tools()`: its tools' processes end now
    (their keepers would see the service gone a moment later) and none restarts."""
    for process in list(_LIVE):
        process.abandon()
