"""`timely lifecycle`: read or change the planner's lifecycle state, through the
standard lifecycle services (`<node>/get_state`, `<node>/change_state`), as
`ros2 lifecycle get|set` does on a full ROS 2 install. Ctrl-C ends it with exit
status 130, as the other commands (a transition already asked for goes on)."""

from __future__ import annotations

import sys
from typing import Any

import rclpy
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetAvailableTransitions, GetState
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from timely_ros.config import PLANNER_NODE, planner_names

TRANSITIONS = ("configure", "activate", "deactivate", "cleanup", "shutdown")


def _call(node: Node, client: Any, request: Any, wait_s: float) -> Any:
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=wait_s)
    return future.result() if future.done() else None


def _possible(node: Node, planner: str, wait_s: float) -> list[str] | None:
    """The transitions the planner can take now, or None when it does not say."""
    client: Any = node.create_client(
        GetAvailableTransitions, f"{planner}/get_available_transitions"
    )
    if not client.wait_for_service(timeout_sec=wait_s):
        return None
    answer = _call(node, client, GetAvailableTransitions.Request(), wait_s)
    if answer is None:
        return None
    return [t.transition.label for t in answer.available_transitions]


def _listed(possible: list[str]) -> str:
    if not possible:
        return "it takes no transition any more: restart the planner"
    return "possible: " + ", ".join(dict.fromkeys(possible))


def run_lifecycle(transition: str, wait_s: float, namespace: str) -> int:
    """Print the planner's state, or take it through `transition` (the answer waits
    for the transition itself: a configure loads the model first)."""
    if transition not in ("get", *TRANSITIONS):
        print(f"timely lifecycle: unknown transition {transition!r}", file=sys.stderr)
        return 2
    planner = planner_names(namespace).absolute(PLANNER_NODE)
    # Ctrl-C as a plain KeyboardInterrupt: rclpy's handler would also shut the
    # context down under the waits, which then end as if the planner were missing
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = Node("timely_lifecycle_cli")
    try:
        return _run(node, planner, transition, wait_s)
    except KeyboardInterrupt:
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def _run(node: Node, planner: str, transition: str, wait_s: float) -> int:
    """The state, or the transition taken (see run_lifecycle)."""
    get: Any = node.create_client(GetState, f"{planner}/get_state")
    if not get.wait_for_service(timeout_sec=wait_s):
        print(
            f"timely lifecycle: no managed planner at {planner} after {wait_s:g} s",
            file=sys.stderr,
        )
        return 1
    before = _call(node, get, GetState.Request(), wait_s)
    if before is None:
        print(f"timely lifecycle: {planner} did not answer", file=sys.stderr)
        return 1
    if transition == "get":
        print(f"{planner}: {before.current_state.label}")
        return 0
    possible = _possible(node, planner, wait_s)
    if possible is not None and transition not in possible:
        print(
            f"timely lifecycle: {planner} is {before.current_state.label}: {transition} "
            f"is not possible from there ({_listed(possible)})",
            file=sys.stderr,
        )
        return 1
    change: Any = node.create_client(ChangeState, f"{planner}/change_state")
    change.wait_for_service(timeout_sec=wait_s)
    request = ChangeState.Request(transition=Transition(label=transition))
    # a configure loads the model, a deactivate drains goals: allow for both
    answer = _call(node, change, request, max(wait_s, 600.0))
    after = _call(node, get, GetState.Request(), wait_s)
    state = after.current_state.label if after is not None else "unknown"
    if after is None and transition == "shutdown" and answer is not None and answer.success:
        state = "finalized"  # `timely up` stops once its planner is shut down
    if answer is None or not answer.success:
        print(
            f"timely lifecycle: {transition} failed: {planner} stays {state} "
            f"(from {before.current_state.label}; the planner's log says why)",
            file=sys.stderr,
        )
        return 1
    print(f"{planner}: {before.current_state.label} -> {state}")
    return 0
