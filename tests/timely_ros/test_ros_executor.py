"""`TimelyExecutor` shuts down without a callback handler failing after it: a handler
queued behind a busy pool thread used to run once the guard condition was gone, and
one the spinning thread took just as another thread shut the executor down failed
`spin` with "cannot schedule new futures after shutdown"."""

from __future__ import annotations

import gc
import threading
import warnings
from typing import Any

import pytest
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from timely_ros.executor import TimelyExecutor

from tests.timely_ros import ros_support

# One pool thread makes the queued-handler race deterministic; rclpy warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:MultiThreadedExecutor is used with a single")


def _handler_errors_after_shutdown(kind: type[MultiThreadedExecutor]) -> list[str]:
    """One pool thread blocked in a timer callback, more handlers queued behind it,
    then shutdown and release: the errors the executor's handlers ended with."""
    context = Context()
    rclpy.init(context=context, domain_id=ros_support.DOMAIN_ID)
    release, started = threading.Event(), threading.Event()
    executor = kind(num_threads=1, context=context)
    try:
        node = Node("executor_shutdown_probe", context=context)
        group = ReentrantCallbackGroup()

        def block() -> None:
            started.set()
            release.wait(10)

        node.create_timer(0.001, block, callback_group=group)
        node.create_timer(0.001, lambda: None, callback_group=group)
        executor.add_node(node)
        executor.spin_once(timeout_sec=2)
        assert started.wait(5), "the blocking callback never ran"
        for _ in range(3):  # handed to the pool, queued behind the blocked thread
            executor.spin_once(timeout_sec=0.5)
        handlers = list(executor._futures)
        assert any(not h.done() for h in handlers), "no handler was queued"
        executor.shutdown(timeout_sec=0, wait_for_threads=False)
        release.set()
        executor._executor.shutdown(wait=True)
        errors = [repr(e) for h in handlers if h.done() and (e := h.exception()) is not None]
        node.destroy_node()
        return errors
    finally:
        release.set()
        rclpy.try_shutdown(context=context)


def _errors_after_shutdown(kind: type[MultiThreadedExecutor]) -> list[str]:
    errors = _handler_errors_after_shutdown(kind)
    with warnings.catch_warnings():  # the cancelled handlers' coroutines, never started
        warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
        gc.collect()
    return errors


def test_ros_plain_executor_fails_a_handler_queued_at_shutdown() -> None:
    """The rclpy behaviour the Timely executor works around (if rclpy fixes it, this
    test says so and the workaround can go)."""
    errors = _errors_after_shutdown(MultiThreadedExecutor)
    if not errors:
        pytest.fail("rclpy no longer fails queued handlers at shutdown: drop TimelyExecutor")
    assert all("destruction was requested" in e for e in errors), errors


def test_ros_timely_executor_cancels_queued_handlers_at_shutdown() -> None:
    assert _errors_after_shutdown(TimelyExecutor) == []


def _spin_once_shut_down_mid_way(kind: type[MultiThreadedExecutor]) -> None:
    """One `spin_once` whose ready handler is taken, then the executor shut down
    (as by another thread) before the handler reaches the pool."""
    context = Context()
    rclpy.init(context=context, domain_id=ros_support.DOMAIN_ID)
    executor = kind(num_threads=2, context=context)
    try:
        node = Node("executor_taken_at_shutdown", context=context)
        node.create_timer(0.001, lambda: None)
        executor.add_node(node)
        take = executor.wait_for_ready_callbacks

        def take_then_shut_down(*args: Any, **kwargs: Any) -> Any:
            ready = take(*args, **kwargs)
            executor.shutdown(timeout_sec=0, wait_for_threads=False)
            return ready

        executor.wait_for_ready_callbacks = take_then_shut_down  # type: ignore[method-assign]
        executor.spin_once(timeout_sec=2)
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=context)


def test_ros_plain_executor_fails_spin_on_a_handler_taken_at_shutdown() -> None:
    with pytest.raises(RuntimeError, match="after shutdown"):
        _spin_once_shut_down_mid_way(MultiThreadedExecutor)


def test_ros_timely_executor_drops_a_handler_taken_at_shutdown() -> None:
    with warnings.catch_warnings():  # the dropped handler's coroutine, never started
        warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
        _spin_once_shut_down_mid_way(TimelyExecutor)
        gc.collect()
