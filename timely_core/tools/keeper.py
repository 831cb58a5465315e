"""Keeps a plugin's process tree together, so that what a plugin starts ends with it.

A process group is not enough: a child started with `start_new_session=True`
leaves it, and the worker, killed with SIGKILL past its wall time, can clean up
nothing. So the worker's process forks first thing (`split`): the parent stays
behind as the keeper, a Linux child subreaper (`PR_SET_CHILD_SUBREAPER`) that runs
no plugin code; the child goes on as the worker. Any descendant the plugin
orphans (a daemon, a child whose parent died) is re-parented to the keeper
instead of init. When the worker ends, for any reason, the keeper kills every
process left below it, then exits with the worker's status (its exit code, or
the signal that ended it), which the service reads as the worker's.

The keeper ends the worker (and so the tree) on SIGTERM, the service's way to
kill a tool (process.py), and when its own parent, the service's process, is
gone: killed, or exited without closing its tools. The worker dies with the
keeper (`PR_SET_PDEATHSIG`)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
PARENT_POLL_S = 0.2  # how soon the keeper notices the service's process gone
TREE_KILL_S = 5.0  # at most this long to kill what is left (a process stuck in the kernel)
_WATCHED = {signal.SIGCHLD, signal.SIGTERM}


def split(channel_fd: int) -> None:
    """Fork; returns in the worker only. The keeper keeps no copy of the channel
    (the service sees its end when the worker's process ends) and never returns."""
    service = os.getppid()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # not inherited by the worker
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)  # none lost before the wait
    keeper = os.getpid()
    worker = os.fork()
    if worker == 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != keeper:  # the keeper died before the line above
            os._exit(1)
        return
    os.close(channel_fd)
    _prctl(PR_SET_NAME, b"timely-keeper")
    status = _keep(worker, service)
    _end_descendants()
    _exit_as(status)


def _keep(worker: int, service: int) -> int:
    """Reap what ends below the keeper until the worker does; its wait status."""
    while True:
        info = signal.sigtimedwait(_WATCHED, PARENT_POLL_S)
        if (info is not None and info.si_signo == signal.SIGTERM) or os.getppid() != service:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)
        status = _reap(worker)
        if status is not None:
            return status


def _reap(worker: int) -> int | None:
    """Reap every ended child (orphans re-parented here, too); the worker's wait
    status if it was among them."""
    found = None
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid == worker:
                found = status
    return found


def _end_descendants() -> None:
    """Kill every process below the keeper: its children first; theirs are then
    re-parented here, and killed in the next round, until none is left."""
    deadline = time.monotonic() + TREE_KILL_S
    while time.monotonic() < deadline:
        for child in children(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        except ChildProcessError:
            return  # none left, living or ended
        time.sleep(0.01)


def children(pid: int) -> list[int]:
    """The children of `pid` (living or not yet reaped)."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as listing:
                found.extend(int(child) for child in listing.read().split())
        return found
    except (FileNotFoundError, NotADirectoryError):  # a kernel without CONFIG_PROC_CHILDREN
        return [p for p in _all_pids() if _parent(p) == pid]


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _exit_as(status: int) -> None:
    """End the keeper as the worker ended: with its exit code, or by its signal
    (with no core dump of the keeper's own)."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        os._exit(code)
    _prctl(PR_SET_DUMPABLE, 0)
    with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
        signal.signal(-code, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
    os.kill(os.getpid(), -code)
    os._exit(128 - code)  # not reached: the signal ended the worker, so it ends the keeper


def _prctl(option: int, value: int | bytes) -> None:
    """prctl(2) through libc (Python has no binding); failures are ignored: the
    keeper then does less, the worker still runs."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        arg = ctypes.c_char_p(value) if isinstance(value, bytes) else ctypes.c_ulong(value)
        libc.prctl(option, arg, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
