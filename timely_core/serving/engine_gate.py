"""Exclusive use of the engine, with callers served ahead of the service loop.

The loop takes the gate for every iteration and would otherwise take it again at
once: a plain lock is not fair, so a `cancel` waiting for it could watch many
iterations go by, and the task it cancels could finish meanwhile. Here a waiting
caller (`cancel`, `register_robot`, `stats`) gets the engine at the end of the
current iteration, before the loop starts the next one. Re-entrant per thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class EngineGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: int | None = None
        self._depth = 0
        self._callers_waiting = 0

    @contextmanager
    def loop(self) -> Iterator[None]:
        """For one iteration of the service loop: waits while callers are waiting."""
        with self._enter(caller=False):
            yield

    @contextmanager
    def caller(self) -> Iterator[None]:
        """For an engine call from outside the loop: served before the next iteration."""
        with self._enter(caller=True):
            yield

    @contextmanager
    def _enter(self, caller: bool) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner != me:
                if caller:
                    self._callers_waiting += 1
                    try:
                        self._cond.wait_for(lambda: self._owner is None)
                    finally:
                        self._callers_waiting -= 1
                else:
                    self._cond.wait_for(lambda: self._owner is None and self._callers_waiting == 0)
                self._owner = me
            self._depth += 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._cond.notify_all()
