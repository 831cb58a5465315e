"""The console entry of a single-node process: init, spin on a `TimelyExecutor`,
and shut down cleanly on Ctrl-C, SIGTERM or an external shutdown, in the order
`timely up` does (`bringup.spin`: goals stopped, executor shut down, node destroyed).

Each `--params-file` is read as `timely up` reads its config before rcl reads it:
rcl would take a key given twice (the last wins) and answer an unreadable file with
an RCLError traceback. Only the file is checked here, not its sections: a parameter
file may hold other nodes' (`/**:` with `use_sim_time`), and the node validates its
own parameters when it configures."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from timely_ros.bringup import spin, until_shut_down
from timely_ros.config import ConfigError, read_params_file
from timely_ros.stop_signals import StopSignals

# rcl's ROS arguments that take a value (`--ros-args -r __ns:=/drone1 --params-file F`)
_VALUED = {"-r", "--remap", "-p", "--param", "--params-file", "-e", "--enclave",
           "--log-level", "--log-config-file", "--log-file-name"}  # fmt: skip


def params_files(argv: Sequence[str]) -> list[str]:
    """The files `--params-file` names among the ROS arguments (`--ros-args` to `--`);
    ConfigError for one without a file."""
    files: list[str] = []
    ros = False
    args = iter(argv)
    for arg in args:
        if arg in ("--ros-args", "--"):
            ros = arg == "--ros-args"
        elif ros and arg in _VALUED:
            value = next(args, None)
            if arg == "--params-file":
                if value is None:
                    raise ConfigError("--params-file needs a file")
                files.append(value)
    return files


def check_params_files(argv: Sequence[str]) -> None:
    """ConfigError naming the first `--params-file` rcl could not read as a parameter
    file: unreadable, not UTF-8, not YAML, a key given twice, or not a mapping of
    node sections."""
    for path in params_files(argv):
        doc = read_params_file(path)
        if not isinstance(doc, dict):
            raise ConfigError(
                f"{path} must be a mapping of node sections (`/**/timely_planner:`), "
                f"got {type(doc).__name__ if doc is not None else 'an empty file'}"
            )


def run_node(make_node: Callable[[], Node], args: list[str] | None) -> int:
    argv = args if args is not None else sys.argv
    try:
        check_params_files(argv)
    except ConfigError as err:
        print(f"{sys.argv[0]}: {err}", file=sys.stderr)
        return 2
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)  # StopSignals owns them
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
