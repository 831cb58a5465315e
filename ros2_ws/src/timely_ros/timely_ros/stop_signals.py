"""Ctrl-C, SIGTERM and SIGHUP (a closed terminal) as a request to stop that the
spin loop polls, for the node processes (`timely up`, `timely demo`, the nodes' own
entry points).

rclpy's own handlers shut the context down and then chain to Python's, so a
KeyboardInterrupt still lands in the main thread at an arbitrary later bytecode:
often inside the clean-up that the first signal started, which then dies half
done with exit status -2. Owning the signals instead (rclpy initialised with
`SignalHandlerOptions.NO`) makes a stop one path: the loop sees the flag, the
nodes stop serving and are destroyed, the process exits 0. A repeated signal
while stopping is absorbed; the stop is bounded (`bringup.spin`: a few seconds).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopSignals:
    """Within `with StopSignals() as stop:`, SIGINT/SIGTERM/SIGHUP set `stop.requested`
    instead of raising. The previous handlers come back on exit unless a stop was
    requested: then the process is ending, and a late signal must not interrupt
    its last clean-up either."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous: dict[int, object] = {}
        self.received: list[str] = []

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def event(self) -> threading.Event:
        """Set by a stop request: for loops that wait on an event (the demo's replay)."""
        return self._event

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signal.Signals(signum).name)
        self._event.set()

    def __enter__(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # started ignoring it (`nohup`, a shell's background job): keep so
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if self.requested:  # the process is on its way out: later signals stay absorbed
            return
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
