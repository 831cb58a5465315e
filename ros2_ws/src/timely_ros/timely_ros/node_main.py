"""The console entry of a single-node process: init, spin on a `TimelyExecutor`,
and shut down cleanly on Ctrl-C or an external shutdown."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from timely_ros.bringup import until_shut_down
from timely_ros.config import ConfigError
from timely_ros.executor import TimelyExecutor
from timely_ros.stop_signals import StopSignals

N = TypeVar("N", bound=Node)


def run_node(
    make_node: Callable[[], N], threads: Callable[[N], int], args: list[str] | None
) -> int:
    rclpy.init(
        args=args if args is not None else sys.argv,
        signal_handler_options=SignalHandlerOptions.NO,  # StopSignals owns them
    )
    with StopSignals() as signals:  # through the clean-up too
        node: N | None = None
        try:
            node = make_node()
            executor = TimelyExecutor(num_threads=threads(node))
            executor.add_node(node)
            stop = until_shut_down([node], sys.argv[0])
            while rclpy.ok() and not signals.requested and not stop():
                executor.spin_once(timeout_sec=0.1)
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        except ConfigError as err:  # bad parameters: one line, not a traceback
            print(f"{sys.argv[0]}: {err}", file=sys.stderr)
            return 2
        finally:
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
    return 0
