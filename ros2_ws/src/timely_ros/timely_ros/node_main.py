"""The console entry of a single-node process: init, spin on a `TimelyExecutor`,
and shut down cleanly on Ctrl-C, SIGTERM or an external shutdown, in the order
`timely up` does (`bringup.spin`: goals stopped, executor shut down, node destroyed)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from timely_ros.bringup import spin, until_shut_down
from timely_ros.config import ConfigError
from timely_ros.stop_signals import StopSignals


def run_node(make_node: Callable[[], Node], args: list[str] | None) -> int:
    rclpy.init(
        args=args if args is not None else sys.argv,
        signal_handler_options=SignalHandlerOptions.NO,  # StopSignals owns them
    )
    with StopSignals() as signals:  # through the clean-up too
        try:
            try:
                node = make_node()
            except ConfigError as err:  # bad parameters: one line, not a traceback
                print(f"{sys.argv[0]}: {err}", file=sys.stderr)
                return 2
            shut_down = until_shut_down([node], sys.argv[0])
            spin([node], until=lambda: signals.requested or shut_down())
        finally:
            rclpy.try_shutdown()
    return 0
