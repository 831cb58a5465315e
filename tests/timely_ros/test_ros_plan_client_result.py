"""A PlanCall is complete when its result arrives: the result repeats every segment,
so feedback that is late or lost (rclpy delivers results before feedback; a busy
machine delays the topic) costs no segment and no grace wait, and a feedback that
arrives after the result is not counted twice."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.timely_ros.ros_support import TEST_PLANNER_TIMEOUT_S, RosClient, wait_until

NAMESPACE = "fake_planner"


def _segment(index: int, final: bool) -> Any:
    from timely_interfaces.msg import Segment

    return Segment(task_id="task-x", robot_id="drone1", index=index, text=f"tu({index});",
                   final=final)  # fmt: skip


class FakePlanner:
    """A PlanTask server that streams only the first `streamed` of three segments as
    feedback, then returns a result that carries all three."""

    def __init__(self, client: RosClient, streamed: int) -> None:
        self.streamed = streamed
        self.sent_feedback = threading.Event()
        self.server = client.serve_plan_task(NAMESPACE, self._execute)

    def _execute(self, goal_handle: Any) -> Any:
        from timely_interfaces.action import PlanTask

        segments = [_segment(i, final=i == 2) for i in range(3)]
        for segment in segments[: self.streamed]:
            goal_handle.publish_feedback(PlanTask.Feedback(segment=segment))
        self.sent_feedback.set()
        goal_handle.succeed()
        return PlanTask.Result(success=True, segment_count=3, segments=segments)


@pytest.mark.ros
@pytest.mark.parametrize("streamed", [0, 2, 3])
def test_the_result_completes_the_call_with_every_segment_once(
    ros_client: RosClient, streamed: int
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    planner = FakePlanner(ros_client, streamed)
    client = PlanClient(
        ros_client.node, namespace=NAMESPACE, planner_timeout_s=TEST_PLANNER_TIMEOUT_S
    )
    assert client.wait_for_server(30)
    seen: list[int] = []
    call = client.send(
        make_goal("drone1", "turn around", robot_type="drone"),
        on_segment=lambda _call, segment: seen.append(segment.index),
    )
    assert call.done.wait(30)
    assert call.status == GoalStatus.STATUS_SUCCEEDED
    assert [s.index for s in call.segments] == [0, 1, 2]
    assert len(call.segment_times) == 3
    assert sorted(seen) == [0, 1, 2]  # each segment reported once, late ones included
    # feedback still in flight after the result changes nothing
    assert planner.sent_feedback.wait(5)
    threading.Event().wait(0.3)
    assert [s.index for s in call.segments] == [0, 1, 2] and sorted(seen) == [0, 1, 2]
    planner.server.destroy()


@pytest.mark.ros
def test_a_long_lived_client_keeps_no_future_per_goal(ros_client: RosClient) -> None:
    """rclpy 9.1.2 leaks a future per goal sent (ros2/rclpy#1532); the executor walks
    them on every action event, so a long-lived client slowed down with every goal.
    Ours holds only the futures of requests still in flight."""
    from timely_ros.plan_client import PlanClient, make_goal

    FakePlanner(ros_client, streamed=3)
    client = PlanClient(
        ros_client.node, namespace=NAMESPACE, planner_timeout_s=TEST_PLANNER_TIMEOUT_S
    )
    assert client.wait_for_server(30)
    for _ in range(5):
        calls = [client.send(make_goal("drone1", "turn around", robot_type="drone"))
                 for _ in range(20)]  # fmt: skip
        for call in calls:
            assert call.done.wait(30)
    futures = client._client._futures
    # after 100 goals, at most the last goal's result request may still be in flight,
    # once rclpy has run its removal tasks (a leak keeps about 100)
    wait_until(lambda: len(futures) <= 2, 10, "at most 2 futures kept after 100 goals")
