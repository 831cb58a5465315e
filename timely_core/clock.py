"""Injectable clocks: the scheduler reads time only through a `Clock`, so tests and
the simulator run in virtual time and the service runs on the monotonic clock."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since an arbitrary epoch."""

    def sleep_until(self, t_s: float) -> None:
        """Block (real) or jump (virtual) until `now() >= t_s`."""


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, t_s: float) -> None:
        delay = t_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class VirtualClock:
    """Time moves only when told to (`advance`, `sleep_until`)."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = start_s
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def advance(self, dt_s: float) -> None:
        if dt_s < 0:
            raise ValueError(f"cannot move a clock backwards (dt_s={dt_s})")
        with self._lock:
            self._now += dt_s

    def sleep_until(self, t_s: float) -> None:
        with self._lock:
            self._now = max(self._now, t_s)
