"""A client process that sends one PlanTask goal and spins until it is killed (the
reliability test kills it mid-goal).

    python -m tests.timely_ros.one_goal_client ROBOT_ID TRACE_ID
"""

from __future__ import annotations

import sys

import rclpy
from rclpy.node import Node
from timely_ros.executor import TimelyExecutor
from timely_ros.plan_client import PlanClient, make_goal

from tests.timely_ros.timeouts import TEST_PLANNER_TIMEOUT_S


def main(argv: list[str]) -> int:
    from robot_models.dataset import lrtrace_task

    robot_id, trace_id = argv[0], int(argv[1])
    rclpy.init()
    node = Node("one_goal_client")
    client = PlanClient(node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    executor = TimelyExecutor(num_threads=2)
    executor.add_node(node)
    if not client.wait_for_server(60):
        return 1
    task = lrtrace_task(trace_id)
    client.send(make_goal(robot_id, task.instruction, scene=task.scene))
    print("goal sent", flush=True)
    executor.spin()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
