"""SIGTERM and SIGHUP as Ctrl-C for the client commands (`timely plan`, `status`,
`cancel`, `approve`, `scene`, `lifecycle`).

`kill`, `timeout`, systemd and a closed terminal stop a process with SIGTERM or
SIGHUP, whose default ends it at once: `timely plan` then left its goal running on
the robot, and the other commands died in rclpy with a traceback. Raising
KeyboardInterrupt instead sends every stop down the path Ctrl-C takes (a plan's
goal is cancelled, the command exits quietly). The commands initialise rclpy with
`SignalHandlerOptions.NO`, so rclpy does not take these signals over.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

AS_CTRL_C = (signal.SIGTERM, signal.SIGHUP)


class ClientStop:
    """Which of `AS_CTRL_C` stopped the command, if one did."""

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None

    def exit_status(self, status: int) -> int:
        """A command that ended on the interrupt (130) exits 128 + the signal's
        number, as a shell reports a process ended by it."""
        if status == 130 and self.signal is not None:
            return 128 + int(self.signal)
        return status


@contextmanager
def stop_signals_as_ctrl_c() -> Iterator[ClientStop]:
    """Within the block, SIGTERM and SIGHUP raise KeyboardInterrupt in the main
    thread; a signal the process was started ignoring (`nohup`) stays ignored."""
    stop = ClientStop()

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        if stop.signal is None:  # a repeat while stopping is absorbed
            stop.signal = signal.Signals(signum)
            raise KeyboardInterrupt

    previous = {}
    for sig in AS_CTRL_C:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            previous[sig] = signal.signal(sig, interrupt)
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
