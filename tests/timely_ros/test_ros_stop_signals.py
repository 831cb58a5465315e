"""`StopSignals`: SIGINT, SIGTERM and SIGHUP become a stop request the spin loop polls."""

from __future__ import annotations

import os
import signal
import time

import pytest
from timely_ros.stop_signals import STOP_SIGNALS, StopSignals


def _deliver(sig: signal.Signals, stop: StopSignals) -> None:
    os.kill(os.getpid(), sig)
    deadline = time.monotonic() + 5
    while not stop.requested and time.monotonic() < deadline:
        time.sleep(0.01)  # Python runs the handler between bytecodes of this thread


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hangup"])
def test_a_signal_requests_a_stop_and_later_ones_stay_absorbed(first: signal.Signals) -> None:
    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        with StopSignals() as stop:
            assert not stop.requested
            _deliver(first, stop)
            assert stop.requested and stop.received == [first.name]
        os.kill(os.getpid(), signal.SIGINT)  # after the block: no KeyboardInterrupt
        time.sleep(0.05)
        assert stop.received == [first.name, "SIGINT"]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_without_a_stop_the_previous_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    with StopSignals() as stop:
        assert signal.getsignal(signal.SIGINT) != before
    assert not stop.requested
    assert signal.getsignal(signal.SIGINT) == before
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)


def test_a_signal_the_process_ignores_stays_ignored() -> None:
    """A process started with SIGINT ignored (`nohup`, a non-interactive shell's
    background job) is not made to stop on it."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with StopSignals() as stop:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert not stop.requested
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
