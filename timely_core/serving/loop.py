"""The service loop: engine iterations run by a background thread on a real clock
(`start`/`stop`), or stepped by the caller in virtual time (`run`), where the
clock jumps to the next arrival (or scene prefill) when nothing else can happen.
Each pass prefills a published scene if one is due, then runs an iteration; it holds
the state's `engine_gate` (and its `lock` only around the bookkeeping); deliveries
run after each iteration, outside both.

A started loop is stopped at interpreter exit too (`atexit`): a daemon thread still
inside an engine step while the interpreter tears down can crash the process (torch
segfaults), so a program that exits without `stop()` ends cleanly.
"""

from __future__ import annotations

import atexit
import threading
import weakref

from timely_core.serving.iteration import ServiceIteration
from timely_core.serving.scene_prefill import ScenePrefill
from timely_core.serving.state import ServiceState


class ServiceLoop:
    def __init__(self, state: ServiceState) -> None:
        self._state = state
        self._iteration = ServiceIteration(state)
        self._scenes = ScenePrefill(state)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Run the loop in a background thread (no-op if it runs already)."""
        state = self._state
        with state.lock:
            if self._thread is not None:
                return
            state.stopping = False
            self._thread = threading.Thread(
                target=self._serve, name="planning-service", daemon=True
            )
            self._thread.start()
            _RUNNING.add(self)

    def stop(self, timeout_s: float) -> None:
        """Stop the background thread; unfinished tasks stay as they are."""
        state = self._state
        with state.wake:
            state.stopping = True
            state.signal_work()
            thread, self._thread = self._thread, None
        _RUNNING.discard(self)
        if thread is not None:
            thread.join(timeout_s)

    def _serve(self) -> None:
        state = self._state
        while True:
            with state.wake:
                if state.stopping:
                    return
            started = state.clock.now()
            with state.engine_gate.loop():
                worked = self._pass()
            with state.wake:
                if not (worked or state.deliveries or state.work_signalled or state.stopping):
                    state.wake.wait(self._idle_wait_s())
            state.run_deliveries()
            if worked:  # no idle wait in this pass
                state.loop_busy_s += state.clock.now() - started

    def _pass(self) -> bool:
        """A due scene prefill, then one iteration. True if the engine worked."""
        prefilled = self._scenes.run_due()
        return self._iteration.run_guarded() or prefilled

    def _next_event_s(self) -> float | None:
        """When something is due that nothing running will wake the loop for: the
        next arrival, scene prefill or unpinning. Call holding `lock`."""
        state = self._state
        if state.scenes.unpin_pending:  # memory let go for a waiting task: now
            return state.clock.now()
        times = [t for t in (state.next_arrival_s(), state.scenes.next_due_s()) if t is not None]
        return min(times) if times else None

    def _idle_wait_s(self) -> float:
        state = self._state
        next_event = self._next_event_s()
        if next_event is None:
            return state.config.idle_wait_s
        return min(max(next_event - state.clock.now(), 0.0), state.config.idle_wait_s)

    def run(self, until_s: float | None, max_iterations: int) -> None:
        """Step until the clock reaches `until_s` (None: until idle), sleeping the
        clock to the next arrival or scene prefill when nothing else can happen."""
        state = self._state
        for _ in range(max_iterations):
            started = state.clock.now()
            with state.engine_gate.loop():
                with state.lock:
                    done = until_s is not None and state.clock.now() >= until_s
                worked = True if done else self._pass()
                with state.lock:
                    next_event = None if done else self._next_event_s()
            state.run_deliveries()
            if done:
                return
            if worked:
                state.loop_busy_s += state.clock.now() - started
                continue
            if self._iteration.tool_waits:  # tools answer in real time: wait for one
                self._iteration.tool_waits.wait(state.config.idle_wait_s)
                continue
            if next_event is None or (until_s is not None and next_event > until_s):
                if until_s is not None:
                    state.clock.sleep_until(until_s)
                return
            state.clock.sleep_until(next_event)
        raise RuntimeError(f"the service did not become idle within {max_iterations} iterations")


_RUNNING: weakref.WeakSet[ServiceLoop] = weakref.WeakSet()  # started, not stopped
EXIT_STOP_TIMEOUT_S = 10.0  # an engine step in progress ends first


@atexit.register
def _stop_at_exit() -> None:
    """Stop every loop still running when the interpreter exits."""
    for loop in list(_RUNNING):
        loop.stop(EXIT_STOP_TIMEOUT_S)
