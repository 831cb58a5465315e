"""Limits a plugin process applies to itself before it imports the plugin: no
network (a new network namespace, Linux `unshare(CLONE_NEWNET)` through libc since
Python 3.11 has no `os.unshare`), an address-space limit, and a CPU-time budget per
call.

The CPU budget: a profiling timer (`ITIMER_PROF`, the process's user and system
time, all its threads) armed with `cpu_s` when a call starts and disarmed when it
returns; past it the kernel sends SIGPROF, whose default action ends the process
wherever it is (also in C code holding the GIL). RLIMIT_CPU is the backstop (a
plugin that handles SIGPROF itself, or CPU burnt between calls): it counts whole
seconds of the process's life, so each call renews it to `used + cpu_s`, rounded
up, plus a second; past it the kernel sends SIGXCPU."""

from __future__ import annotations

import ctypes
import math
import os
import resource
import signal

CLONE_NEWNET = 0x40000000
NETWORK_ISOLATED = "isolated"
EXIT_MEMORY = 3  # the plugin ran out of memory (its process reports it, then exits)


def isolate_network() -> str:
    """Move this process into a new, empty network namespace. Returns
    NETWORK_ISOLATED, or why it could not (then the process still has network:
    needs root or CAP_SYS_ADMIN, or unprivileged user namespaces)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            return f"not isolated: unshare(CLONE_NEWNET) failed: {os.strerror(errno)}"
    except (OSError, AttributeError) as exc:
        return f"not isolated: {exc}"
    return NETWORK_ISOLATED


def limit_memory(megabytes: int) -> None:
    """Limit the process's address space to `megabytes`. Raises ValueError when it
    already maps that much: every allocation would then fail, at random places."""
    mapped = mapped_megabytes()
    if mapped is not None and mapped >= megabytes:
        raise ValueError(
            f"memory_mb={megabytes} is not more than the {mapped} MiB of address space "
            "the tool's process maps before its plugin loads; raise memory_mb"
        )
    limit = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def mapped_megabytes() -> int | None:
    """This process's address space (VmSize), or None where /proc does not say."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def cpu_used_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def start_cpu_budget(seconds: float) -> None:
    """Allow the call about to run `seconds` of CPU time (module docstring)."""
    backstop = math.ceil(cpu_used_s() + seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (backstop, resource.RLIM_INFINITY))
    signal.setitimer(signal.ITIMER_PROF, seconds)


def stop_cpu_budget() -> None:
    """The call returned: its CPU time no longer counts."""
    signal.setitimer(signal.ITIMER_PROF, 0)
