"""`timely plan`: one PlanTask goal; prints segments as they stream, then the result."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

import rclpy
from action_msgs.msg import GoalStatus
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from timely_interfaces.msg import Segment as SegmentMsg
from timely_interfaces.msg import Tuf as TufMsg

from timely_core.scheduling.tuf import Tuf
from timely_ros.config import planner_names
from timely_ros.goals import ended_by_shutdown
from timely_ros.plan_client import CANCEL_WAIT_S, PlanCall, PlanClient, make_goal
from timely_ros.plan_wait_notices import PlanWaitNotices
from timely_ros.robot_scene_watch import RobotSceneWatch, no_scene_note

# how long an ended goal's command waits for a planner status saying whether its robot
# had a scene (a status comes every status_period_s, at most 1 s)
SCENE_STATUS_WAIT_S = 1.2


def _print_segment(call: PlanCall, segment: SegmentMsg) -> None:
    skills = ", ".join(s.raw_text for s in segment.skills) or segment.text
    tail = " (final)" if segment.final else ""
    print(f"segment {segment.index}{tail}: {skills}", flush=True)


def _announce(call: PlanCall, timeout_s: float) -> None:
    """Say the goal was accepted, once the planner has said so: a rejected or
    unanswered goal gets its own message when the call ends."""
    if call.wait_answered(timeout_s) and call.accepted:
        print(f"goal {call.goal_id} accepted (timely cancel {call.goal_id})", file=sys.stderr)


def _cancel_and_wait(client: PlanClient, call: PlanCall) -> None:
    """Cancel the goal and wait for its end, so its robot has stopped when the
    command returns."""
    try:
        ended = not client.cancel_and_wait([call])
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting, the cancel is sent
        ended = False
    if not ended:
        print(
            f"timely plan: no answer to the cancel of goal {call.goal_id} after "
            f"{CANCEL_WAIT_S:g} s; check with timely status",
            file=sys.stderr,
        )


def _interrupted(client: PlanClient, call: PlanCall, detach: bool) -> None:
    """Ctrl-C while the goal runs: cancel it, or leave it running when asked to."""
    if detach:
        print(
            f"timely plan: interrupted; goal {call.goal_id} keeps running "
            f"(timely cancel {call.goal_id})",
            file=sys.stderr,
        )
        return
    print(f"timely plan: interrupted; cancelling goal {call.goal_id}", file=sys.stderr)
    _cancel_and_wait(client, call)
    if call.done.is_set():
        print(f"timely plan: goal {call.goal_id} cancelled", file=sys.stderr)


def run_plan(
    robot: str,
    instruction: str,
    urgent: bool,
    scene: str,
    dispatch: bool,
    wait_s: float,
    timeout_s: float,
    resubmit: int = 0,
    namespace: str = "timely",
    detach: bool = False,
    tuf: Tuf | None = None,
) -> int:
    """Exit status 0 on success, 1 on failure or a lost planner, 2 on rejection, 130
    on Ctrl-C. `tuf`: the goal's own time-utility function instead of a preset.
    `resubmit`: how many times a goal lost with its planner (it stopped responding,
    restarted, or aborted the goal as it shut down) is sent again once a planner is
    up. Ctrl-C (and SIGTERM or SIGHUP: client_signals.py) cancels the goal, as `ros2
    action send_goal` does, unless `detach`: then it keeps running."""
    # rclpy's own SIGINT handler would shut the context down before the cancel is sent
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = Node("timely_plan_cli")
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException):
            executor.spin()

    spinner = threading.Thread(target=spin, daemon=True)
    client: PlanClient | None = None
    call: PlanCall | None = None
    notices = PlanWaitNotices(node, planner_names(namespace), robot, turns=dispatch)
    scene_watch = None if scene else RobotSceneWatch(node, planner_names(namespace), robot)
    try:
        client = PlanClient(node, namespace)
        spinner.start()
        if not client.wait_for_server(wait_s):
            print(f"timely plan: no planner after {wait_s:g} s", file=sys.stderr)
            return 1
        goal = make_goal(
            robot,
            instruction,
            urgency=None if tuf is not None else "urgent" if urgent else "normal",
            scene=scene,
            dispatch=dispatch,
            tuf=None if tuf is None else TufMsg(**tuf.model_dump()),
        )
        call = client.send(goal, on_segment=_print_segment)
        notices.goal_id = call.goal_id
        while True:
            deadline = time.monotonic() + timeout_s
            _announce(call, timeout_s)
            if not call.done.wait(max(0.0, deadline - time.monotonic())):
                print(f"timely plan: no result after {timeout_s:g} s; cancelling", file=sys.stderr)
                _cancel_and_wait(client, call)
                return 1
            if call.client_error:
                print(f"timely plan: {call.client_error}", file=sys.stderr)
                restarted = call.planner_restarted
                report = client.interrupted_reason(call, wait_s=2.0) if restarted else None
                if report:
                    print(f"timely plan: the restarted planner reports: {report}", file=sys.stderr)
            elif resubmit > 0 and call.result is not None and ended_by_shutdown(call.result.error):
                print(f"timely plan: {call.result.error}; the goal ended with it", file=sys.stderr)
            else:
                break
            if resubmit <= 0:
                return 1
            resubmit -= 1
            if not client.wait_for_server(wait_s):
                print(f"timely plan: no planner after {wait_s:g} s", file=sys.stderr)
                return 1
            print("timely plan: resubmitting the goal", file=sys.stderr)
            call = client.send(goal, on_segment=_print_segment)
            notices.goal_id = call.goal_id
        notices.ended.set()
        if not call.accepted:
            print(f"timely plan: rejected: {client.rejection_reason(call)}", file=sys.stderr)
            return 2
        result = call.result
        assert result is not None
        if scene_watch is not None and scene_watch.scene(SCENE_STATUS_WAIT_S) == "":
            print(f"timely plan: {no_scene_note(robot)}", file=sys.stderr)
        if not result.success:
            if call.status == GoalStatus.STATUS_CANCELED and not call.cancel_requested:
                print(
                    f"timely plan: goal {call.goal_id} was cancelled by another client "
                    f"(timely cancel, or another operator): {result.error}",
                    file=sys.stderr,
                )
            else:
                print(f"timely plan: failed: {result.error}", file=sys.stderr)
            return 1
        for failure in result.recovered_failures:  # the plan went on from each
            print(f"recovered from a robot failure: {failure}", flush=True)
        print(
            f"plan: {result.plan}\nsegments {result.segment_count}, response "
            f"{result.response_time_s:.3f} s, waiting {result.waiting_time_s:.3f} s, "
            f"utility {result.utility:.3f}",
            flush=True,
        )
        return 0
    except KeyboardInterrupt:
        if client is not None and call is not None and not call.done.is_set():
            _interrupted(client, call, detach)
        return 130
    except ExternalShutdownException:
        return 130
    finally:
        rclpy.try_shutdown()
        if spinner.is_alive():
            spinner.join(timeout=5)
        node.destroy_node()
