"""A goal the planner never answers (its request or the answer lost on the way) ends
the client's call after `answer_timeout_s` with an error saying so, instead of
waiting forever; and if the planner accepts it late after all, it is cancelled.
Against a real PlanTask server in the test process that answers only when told."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    TEST_PLANNER_TIMEOUT_S,
    RosClient,
    assert_stopped_unrun,
    run_until_cancelled,
    wait_until,
)

NAMESPACE = "mute_planner"


@pytest.mark.ros
def test_an_unanswered_goal_ends_the_call_and_is_cancelled_if_accepted_late(
    ros_client: RosClient,
) -> None:
    from rclpy.action import ActionServer, CancelResponse, GoalResponse
    from rclpy.callback_groups import ReentrantCallbackGroup
    from timely_interfaces.action import PlanTask
    from timely_ros.plan_client import PlanClient, make_goal
    from timely_ros.qos import action_server_qos

    answer = threading.Event()
    events: list[str] = []

    def on_goal(_goal: Any) -> GoalResponse:
        answer.wait(20)  # the request is "lost" until the test says otherwise
        events.append("accepted")
        return GoalResponse.ACCEPT

    def on_cancel(_handle: Any) -> CancelResponse:
        events.append("cancel requested")
        return CancelResponse.ACCEPT

    def execute(handle: Any) -> Any:
        if not run_until_cancelled(handle, 5.0):  # planning and the robot's motion
            events.append("stopped")
            return PlanTask.Result(success=False, error="cancelled")
        events.append("ran to the end")
        return PlanTask.Result(success=True)

    server = ActionServer(
        ros_client.node,
        PlanTask,
        f"/{NAMESPACE}/plan_task",
        execute,
        goal_callback=on_goal,
        cancel_callback=on_cancel,
        callback_group=ReentrantCallbackGroup(),
        **action_server_qos(),
    )
    try:
        client = PlanClient(
            ros_client.node,
            namespace=NAMESPACE,
            answer_timeout_s=0.5,
            planner_timeout_s=TEST_PLANNER_TIMEOUT_S,
        )
        assert client.wait_for_server(10)
        call = client.send(make_goal("drone1", "take off"))
        assert call.done.wait(10), "the unanswered goal never ended"
        assert call.accepted is None and call.result is None
        assert "the planner did not answer the goal within 0.5 s" in call.client_error
        assert "drone1" in call.client_error
        answer.set()  # the planner accepts it after all: it must not run on
        wait_until(lambda: "stopped" in events or "ran to the end" in events, 10, "the end")
        assert_stopped_unrun(events)
    finally:
        answer.set()
        server.destroy()
