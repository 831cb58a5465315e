"""`timely`: bring up nodes, send a plan, publish a scene, watch or cancel goals, or run
the demo.

timely up CONFIG.yaml [--only planner|executors]
timely plan --robot drone1 [--urgent | --respond-within S [--zero-after S] [--utility U]]
    [--scene TEXT] [--no-dispatch] [--resubmit N] [--detach] "find the cat"
timely scene --robot drone1 [--topic /drone1/scene] "a sofa, a cat under the table"
timely status [--watch]
timely cancel [GOAL_ID ...] [--robot drone1] [--all]
timely approve [--deny] [--reason TEXT] [REQUEST_ID | --robot drone1 | --list]
timely lifecycle get|configure|activate|deactivate|cleanup|shutdown
timely demo [--config CONFIG.yaml] [--duration S] [--seed S]
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
from collections.abc import Sequence

from pydantic import ValidationError

from timely_core.request import MAX_INSTRUCTION_CHARS, MAX_SCENE_CHARS
from timely_core.scheduling.tuf import Tuf
from timely_ros.client_signals import stop_signals_as_ctrl_c
from timely_ros.config import ConfigError, check_robot_id

LIFECYCLE_COMMANDS = ("get", "configure", "activate", "deactivate", "cleanup", "shutdown")
WAIT_HELP = "seconds to wait for the planner (default 5; inf: for ever)"
# commands that talk to a running planner: SIGTERM and SIGHUP stop them as Ctrl-C does
CLIENT_COMMANDS = ("plan", "scene", "status", "cancel", "approve", "lifecycle")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="timely", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--namespace",
        default="timely",
        help="the planner's namespace, for the commands that talk to it (default timely)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the planner and robot executors of a config")
    up.add_argument("config", help="bring-up YAML (ROS 2 parameter-file format)")
    up.add_argument(
        "--only",
        choices=("all", "planner", "executors"),
        default="all",
        help="start only the planner or only the robot executors (default all)",
    )

    plan = sub.add_parser("plan", help="send one PlanTask goal and print what streams back")
    plan.add_argument("instruction", type=_instruction, help="what the robot should do")
    plan.add_argument("--robot", required=True, type=_robot_id, help="robot id, e.g. drone1")
    urgency = plan.add_mutually_exclusive_group()
    urgency.add_argument("--urgent", action="store_true", help="urgent TUF preset")
    urgency.add_argument(
        "--respond-within",
        type=_positive_seconds,
        default=None,
        metavar="S",
        help="own time-utility: full utility if the first action starts within S seconds",
    )
    plan.add_argument(
        "--zero-after",
        type=_positive_seconds,
        default=None,
        metavar="S",
        help="with --respond-within: utility falls linearly to 0 at S seconds "
        "(default 1.5 x --respond-within)",
    )
    plan.add_argument(
        "--utility",
        type=float,
        default=None,
        metavar="U",
        help="with --respond-within: the task's utility, its weight against other "
        "robots' tasks (default 1; the urgent preset's is 2)",
    )
    plan.add_argument("--scene", type=_plan_scene, default="", help="what the robot perceives")
    plan.add_argument("--no-dispatch", action="store_true", help="plan only, do not execute")
    plan.add_argument("--wait", type=_seconds, default=5.0, help=WAIT_HELP)
    plan.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=300.0,
        help="seconds to wait for the result; then the goal is cancelled (default 300)",
    )
    plan.add_argument(
        "--resubmit",
        type=_count,
        default=0,
        help="times to resend a goal lost because the planner stopped responding, restarted "
        "or shut down (default 0)",
    )
    plan.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C leave the goal running (by default Ctrl-C cancels it)",
    )

    scene = sub.add_parser("scene", help="publish what a robot perceives (its scene topic)")
    scene.add_argument("scene", help="the scene text; empty withdraws the robot's scene")
    scene.add_argument("--robot", required=True, type=_robot_id, help="robot id, e.g. drone1")
    scene.add_argument("--topic", type=_topic, help="scene topic (default /<robot>/scene)")
    scene.add_argument("--wait", type=_seconds, default=5.0, help=WAIT_HELP)

    status = sub.add_parser("status", help="the planner's queue, memory and robots")
    status.add_argument("--watch", action="store_true", help="keep the table live (Ctrl-C ends)")
    status.add_argument("--wait", type=_seconds, default=5.0, help=WAIT_HELP)

    cancel = sub.add_parser("cancel", help="cancel PlanTask goals")
    cancel.add_argument("goal_ids", nargs="*", help="goal ids (hex, as timely plan/status print)")
    cancel.add_argument("--robot", type=_robot_id, help="cancel every goal of this robot")
    cancel.add_argument("--all", action="store_true", help="cancel every goal")
    cancel.add_argument("--wait", type=_seconds, default=5.0, help=WAIT_HELP)

    approve = sub.add_parser(
        "approve", help="approve or deny a segment waiting for an operator; --list them"
    )
    approve.add_argument(
        "request_id", nargs="?", default="", help="as --list prints it, or enough of it"
    )
    approve.add_argument("--robot", type=_robot_id, help="the robot's oldest waiting segment")
    approve.add_argument("--deny", action="store_true", help="deny: the goal ends, nothing sent")
    approve.add_argument("--reason", default="", help="why (shown in the goal's error)")
    approve.add_argument("--list", action="store_true", help="list the waiting segments")
    approve.add_argument("--wait", type=_seconds, default=5.0, help=WAIT_HELP)

    lifecycle = sub.add_parser(
        "lifecycle", help="the planner's lifecycle state (get), or a transition to take"
    )
    lifecycle.add_argument("transition", choices=LIFECYCLE_COMMANDS)
    lifecycle.add_argument("--wait", type=_seconds, default=5.0, help=WAIT_HELP)

    demo = sub.add_parser("demo", help="planner + simulated fleet + a short WID 1-style replay")
    demo.add_argument("--config", default=None, help="bring-up YAML (default: config/demo.yaml)")
    demo.add_argument(
        "--duration", type=_positive_seconds, default=20.0, help="seconds of task arrivals"
    )
    demo.add_argument("--seed", type=int, default=7)
    return parser


def plan_tuf(
    respond_within_s: float | None, zero_after_s: float | None, utility: float | None
) -> Tuf | None:
    """`timely plan`'s own time-utility function (TimelyLLM Eq. 1) from its options;
    None for a preset. ConfigError naming the option that is wrong."""
    if respond_within_s is None:
        given = [
            n for n, v in (("--zero-after", zero_after_s), ("--utility", utility)) if v is not None
        ]
        if given:
            raise ConfigError(f"{' and '.join(given)} needs --respond-within")
        return None
    if utility is not None and not utility > 0:  # before the slope, which it decides
        raise ConfigError(f"--utility must be a number > 0, got {utility:g}")
    zero_s = 1.5 * respond_within_s if zero_after_s is None else zero_after_s
    if zero_s <= respond_within_s:
        raise ConfigError(
            f"--zero-after ({zero_s:g} s) must be later than --respond-within "
            f"({respond_within_s:g} s)"
        )
    beta = 1.0 if utility is None else utility
    loss = "the utility it loses per second"
    names = {
        "expected_response_time_s": "--respond-within",
        "initial_utility": "--utility",
        "slope": f"--zero-after ({loss})"
        if zero_after_s is not None
        else f"--respond-within (with --zero-after at its default, 1.5 x it: {loss})",
    }
    try:  # flat first: a slope out of range is --zero-after's only when the rest is valid
        flat = Tuf(expected_response_time_s=respond_within_s, slope=0.0, initial_utility=beta)
        slope = -beta / (zero_s - respond_within_s)
        return Tuf.model_validate({**flat.model_dump(), "slope": slope})
    except ValidationError as err:
        first = err.errors()[0]
        raise ConfigError(f"{names[str(first['loc'][0])]}: {first['msg']}") from None


def _seconds(text: str) -> float:
    """A time to wait for the planner: a number > 0 (inf: for ever). Finding it over
    DDS always takes some time, so 0 could only ever fail."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 (inf: for ever), got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    """A duration: a finite number > 0, one a thread can wait (beyond TIMEOUT_MAX,
    about 292 years, Event.wait raises OverflowError)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    if value > threading.TIMEOUT_MAX:
        raise argparse.ArgumentTypeError(
            f"expected seconds <= {threading.TIMEOUT_MAX:.3g}, got {text!r}"
        )
    return value


def _count(text: str) -> int:
    """How many times: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def _robot_id(text: str) -> str:
    """A robot id as the planner takes it (config.ROBOT_ID_PATTERN), checked before
    any planner is contacted: every command that names a robot uses this check."""
    try:
        return check_robot_id(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _topic(text: str) -> str:
    """A scene topic given on purpose: an empty one is a mistake, not the default."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "the topic is empty; leave --topic out for the robot's own (/<robot>/scene)"
        )
    return text


def _instruction(text: str) -> str:
    """What to plan: not blank, not over the planner's length (it would reject it)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the instruction is empty: say what the robot should do")
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise argparse.ArgumentTypeError(
            f"the instruction has {len(text)} characters; the planner takes at most "
            f"{MAX_INSTRUCTION_CHARS}"
        )
    return text


def _plan_scene(text: str) -> str:
    """A goal's scene: not over the planner's length (it would reject the goal)."""
    if len(text) > MAX_SCENE_CHARS:
        raise argparse.ArgumentTypeError(
            f"the scene has {len(text)} characters; the planner takes at most {MAX_SCENE_CHARS}"
        )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command not in CLIENT_COMMANDS:
        return _run(args)
    try:
        with stop_signals_as_ctrl_c() as stop:
            status = _run(args)
    except KeyboardInterrupt:  # a signal as the command returned
        status = 130
    return stop.exit_status(status)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "up":
            from timely_ros.bringup import up
            from timely_ros.config import load_bringup

            return up(load_bringup(args.config), args.only)
        if args.command == "plan":
            from timely_ros.plan_cli import run_plan

            return run_plan(
                robot=args.robot,
                instruction=args.instruction,
                urgent=args.urgent,
                tuf=plan_tuf(args.respond_within, args.zero_after, args.utility),
                scene=args.scene,
                dispatch=not args.no_dispatch,
                wait_s=args.wait,
                timeout_s=args.timeout,
                resubmit=args.resubmit,
                namespace=args.namespace,
                detach=args.detach,
            )
        if args.command == "scene":
            from timely_ros.scene_cli import run_scene

            return run_scene(args.robot, args.scene, args.topic or "", args.wait)
        if args.command == "status":
            from timely_ros.status_cli import run_status

            return run_status(args.watch, args.wait, args.namespace)
        if args.command == "cancel":
            from timely_ros.cancel_cli import run_cancel

            return run_cancel(args.goal_ids, args.robot or "", args.all, args.wait, args.namespace)
        if args.command == "approve":
            from timely_ros.approve_cli import run_approve

            return run_approve(
                args.request_id,
                args.robot or "",
                args.deny,
                args.list,
                args.reason,
                args.wait,
                args.namespace,
            )
        if args.command == "lifecycle":
            from timely_ros.lifecycle_cli import run_lifecycle

            return run_lifecycle(args.transition, args.wait, args.namespace)
        from timely_ros.demo import run_demo

        return run_demo(config_path=args.config, duration_s=args.duration, seed=args.seed)
    except ConfigError as err:
        print(f"timely: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C where a command does not end on it itself
        return 130


if __name__ == "__main__":
    sys.exit(main())
