"""`stop_signals_as_ctrl_c`: SIGTERM and SIGHUP stop a client command as Ctrl-C
does (KeyboardInterrupt in the main thread), and its exit status says which signal
ended it; a signal the process ignores stays ignored; the handlers come back."""

from __future__ import annotations

import os
import signal
import time

import pytest
from timely_ros.client_signals import AS_CTRL_C, stop_signals_as_ctrl_c


@pytest.mark.parametrize("sig", AS_CTRL_C, ids=lambda s: s.name)
def test_the_signal_interrupts_as_ctrl_c_and_names_itself_in_the_exit_status(
    sig: signal.Signals,
) -> None:
    before = {s: signal.getsignal(s) for s in AS_CTRL_C}
    with pytest.raises(KeyboardInterrupt), stop_signals_as_ctrl_c() as stop:
        os.kill(os.getpid(), sig)
        time.sleep(5)  # interrupted at once
    assert stop.signal == sig
    assert stop.exit_status(130) == 128 + int(sig)  # as a shell reports the signal
    assert stop.exit_status(0) == 0  # a command that ended well on its own
    assert {s: signal.getsignal(s) for s in AS_CTRL_C} == before


def test_no_signal_leaves_the_exit_status_and_a_repeat_is_absorbed() -> None:
    with stop_signals_as_ctrl_c() as stop:
        pass
    assert stop.signal is None and stop.exit_status(130) == 130
    with pytest.raises(KeyboardInterrupt), stop_signals_as_ctrl_c() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    with stop_signals_as_ctrl_c() as again:
        again.signal = signal.SIGTERM  # already stopping
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # no second KeyboardInterrupt


def test_a_signal_the_process_ignores_stays_ignored() -> None:
    """`nohup timely plan ...`: a hangup must not stop the command."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals_as_ctrl_c() as stop:
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
        assert stop.signal is None
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
