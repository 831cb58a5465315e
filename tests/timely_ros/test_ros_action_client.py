"""timely_ros.ActionClient against rclpy's construction order: the client has its
lock by the time its node hands it to an executor (rclpy adds it to the node first,
and a spinning executor then calls into it)."""

from __future__ import annotations

from typing import Any

import pytest
from timely_interfaces.action import PlanTask
from timely_ros.action_client import ActionClient

from tests.timely_ros.ros_support import RosClient

pytestmark = pytest.mark.ros


def test_the_lock_exists_when_the_node_first_sees_the_client(
    ros_client: RosClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = ros_client.node
    seen: list[bool] = []
    add_waitable = node.add_waitable

    def record(waitable: Any) -> None:
        seen.append(hasattr(waitable, "_lock"))
        waitable.get_num_entities()  # what a spinning executor does with a new waitable
        add_waitable(waitable)

    monkeypatch.setattr(node, "add_waitable", record)
    action = ActionClient(node, PlanTask, "plan_task_lock_test")
    assert seen == [True]
    action.destroy()
