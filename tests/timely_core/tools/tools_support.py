"""What the tool tests share: replies collected by task, a call to send, whether
a process is still running, and a service in a process of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from timely_core.tools.plugin import ToolCall, ToolReply
from timely_core.tools.process import PendingCall

HERE = str(Path(__file__).parent)
REPO = str(Path(__file__).parents[3])


def host_process(script: str) -> subprocess.Popen[str]:
    """Another Python running `script` from the repository (a service with a tool),
    its stdout a pipe to read."""
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO},
    )


class Replies:
    """The `on_reply` of a PluginProcess: each task's last reply, to wait for."""

    def __init__(self) -> None:
        self.by_task: dict[str, ToolReply] = {}
        self._cond = threading.Condition()

    def __call__(self, pending: PendingCall, reply: ToolReply) -> None:
        with self._cond:
            self.by_task[pending.call.task_id] = reply
            self._cond.notify_all()

    def wait(self, task: str, timeout_s: float = 60.0) -> ToolReply:
        with self._cond:
            assert self._cond.wait_for(lambda: task in self.by_task, timeout_s), task
            return self.by_task[task]


def call(task: str, *args: object, skill: str = "fault") -> ToolCall:
    return ToolCall(task, "r1", 0, skill, tuple(args), True, f"{skill}(...)")  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """Running (not ended, nor a zombie waiting for its new parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kill_sleepers(pids: Iterable[int]) -> None:
    """Leave no `sleep` a test plugin started behind, whatever the test found (a
    pid is killed only while it is still such a `sleep`)."""
    for pid in pids:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if command.startswith(b"sleep\x00") and alive(pid):
            os.kill(pid, signal.SIGKILL)
