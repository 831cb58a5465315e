"""The multi-threaded executor every Timely process spins, with a clean shutdown.

rclpy's `MultiThreadedExecutor.shutdown` destroys the executor's guard condition
before its thread pool stops (the base class's wait for outstanding work is skipped
in the rclpy this project installs). A callback handler already handed to the pool
but not yet started then runs after the guard is gone, fails on `gc.trigger()`, and
rclpy prints "The following exception was never retrieved: cannot use Destroyable
because destruction was requested" when its task is collected: it ended one in
two `timely demo` runs. Cancelling the queued handlers first closes that window;
handlers already running finish as before; a handler the spinning thread takes
just as the pool closes is dropped the same way, not raised from `spin`. A
cancelled handler's coroutine is dropped unstarted, which Python reports as "never
awaited": expected here, so that one warning is filtered.
"""

from __future__ import annotations

import warnings
from typing import Any

from rclpy.executors import MultiThreadedExecutor

warnings.filterwarnings(
    "ignore",
    message="coroutine 'Executor._make_handler.<locals>.handler' was never awaited",
    category=RuntimeWarning,
)


class TimelyExecutor(MultiThreadedExecutor):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stopping = False

    def shutdown(self, timeout_sec: float | None = None, *, wait_for_threads: bool = True) -> bool:
        self._stopping = True
        # the pool is rclpy's ThreadPoolExecutor; not started -> never started
        self._executor.shutdown(wait=False, cancel_futures=True)
        return super().shutdown(timeout_sec, wait_for_threads=wait_for_threads)

    def spin_once(self, timeout_sec: float | None = None) -> None:
        try:
            super().spin_once(timeout_sec)
        except RuntimeError as error:
            # a handler taken just as the pool closed: dropped, like the queued ones
            if not (self._stopping and "after shutdown" in str(error)):
                raise
