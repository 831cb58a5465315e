"""`timely plan`: one PlanTask goal; prints segments as they stream, then the result."""

from __future__ import annotations

import contextlib
import sys
import threading

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from timely_interfaces.msg import Segment as SegmentMsg

from timely_ros.plan_client import PlanCall, PlanClient, make_goal


def _print_segment(call: PlanCall, segment: SegmentMsg) -> None:
    skills = ", ".join(s.raw_text for s in segment.skills) or segment.text
    tail = " (final)" if segment.final else ""
    print(f"segment {segment.index}{tail}: {skills}", flush=True)


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
) -> int:
    """Exit status 0 on success, 1 on failure or a lost planner, 2 on rejection.
    `resubmit`: how many times a goal lost with its planner (it stopped responding
    or restarted) is sent again once a planner is up."""
    rclpy.init()
    node = Node("timely_plan_cli")
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException):
            executor.spin()

    spinner = threading.Thread(target=spin, daemon=True)
    try:
        client = PlanClient(node, namespace)
        spinner.start()
        if not client.wait_for_server(wait_s):
            print(f"timely plan: no planner after {wait_s:g} s", file=sys.stderr)
            return 1
        goal = make_goal(
            robot,
            instruction,
            urgency="urgent" if urgent else "normal",
            scene=scene,
            dispatch=dispatch,
        )
        call = client.send(goal, on_segment=_print_segment)
        print(f"goal {call.goal_id} sent (timely cancel {call.goal_id})", file=sys.stderr)
        while True:
            if not call.done.wait(timeout_s):
                client.cancel(call)
                print(f"timely plan: no result after {timeout_s:g} s; cancelled", file=sys.stderr)
                return 1
            if not call.client_error:
                break
            print(f"timely plan: {call.client_error}", file=sys.stderr)
            report = client.interrupted_reason(call, wait_s=2.0) if call.planner_restarted else None
            if report:
                print(f"timely plan: the restarted planner reports: {report}", file=sys.stderr)
            if resubmit <= 0:
                return 1
            resubmit -= 1
            if not client.wait_for_server(wait_s):
                print(f"timely plan: no planner after {wait_s:g} s", file=sys.stderr)
                return 1
            print("timely plan: resubmitting the goal", file=sys.stderr)
            call = client.send(goal, on_segment=_print_segment)
        if not call.accepted:
            print(f"timely plan: rejected: {client.rejection_reason(call)}", file=sys.stderr)
            return 2
        result = call.result
        assert result is not None
        if not result.success:
            print(f"timely plan: failed: {result.error}", file=sys.stderr)
            return 1
        print(
            f"plan: {result.plan}\nsegments {result.segment_count}, response "
            f"{result.response_time_s:.3f} s, waiting {result.waiting_time_s:.3f} s, "
            f"utility {result.utility:.3f}",
            flush=True,
        )
        return 0
    except (KeyboardInterrupt, ExternalShutdownException):
        return 130
    finally:
        rclpy.try_shutdown()
        if spinner.is_alive():
            spinner.join(timeout=5)
        node.destroy_node()
