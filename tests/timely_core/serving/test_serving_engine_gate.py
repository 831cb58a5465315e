"""EngineGate: callers get the engine between two loop iterations, ahead of the loop."""

from __future__ import annotations

import threading
import time

from timely_core.serving.engine_gate import EngineGate


def _wait_until(predicate: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_a_waiting_caller_goes_before_the_next_iteration() -> None:
    gate = EngineGate()
    order: list[str] = []

    def caller() -> None:
        with gate.caller():
            order.append("caller")

    def next_iteration() -> None:
        with gate.loop():
            order.append("loop")

    with gate.loop():
        waiting = threading.Thread(target=caller)
        waiting.start()
        _wait_until(lambda: gate._callers_waiting == 1)
        loop = threading.Thread(target=next_iteration)
        loop.start()
        order.append("iteration")
    waiting.join(10)
    loop.join(10)
    assert order == ["iteration", "caller", "loop"]


def test_reentrant_in_one_thread() -> None:
    gate = EngineGate()
    with gate.loop(), gate.caller(), gate.caller():
        pass
    done = threading.Event()

    def other() -> None:
        with gate.caller():
            done.set()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    assert done.is_set()
