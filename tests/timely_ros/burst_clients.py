"""A burst of PlanTask clients in one process (the many-clients test runs five).

    python -m tests.timely_ros.burst_clients OUT.json START_MONO CLIENTS ROBOT_PREFIX ROBOTS

Each client is its own node and ActionClient; all send their goal at the same
monotonic instant START_MONO, and the process writes what every client got back.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import rclpy
from rclpy.node import Node
from timely_ros.executor import TimelyExecutor
from timely_ros.plan_client import PlanCall, PlanClient, make_goal

from tests.timely_ros.timeouts import TEST_PLANNER_TIMEOUT_S

DRONE_TASKS = (1, 2, 3, 4, 5, 6, 7, 8)  # LRTrace drone tasks; 6-8 urgent


def _record(call: PlanCall) -> dict[str, object]:
    result = call.result
    return {
        "robot_id": call.goal.robot_id,
        "accepted": call.accepted,
        "status": call.status,
        "success": bool(result and result.success),
        "error": result.error if result else call.client_error,
        "segment_count": result.segment_count if result else -1,
        "indices": [s.index for s in call.segments],
        "task_ids": sorted({s.task_id for s in call.segments}),
        "sent_at": call.sent_at,
        "finished_at": call.finished_at,
    }


def main(argv: list[str]) -> int:
    from robot_models.dataset import lrtrace_task

    out, start, clients, prefix, robots = (
        argv[0],
        float(argv[1]),
        int(argv[2]),
        argv[3],
        int(argv[4]),
    )
    offset = int(argv[5]) if len(argv) > 5 else 0
    rclpy.init()
    executor = TimelyExecutor(num_threads=4)
    nodes = [Node(f"burst_client_{offset + i}") for i in range(clients)]
    plan_clients = [PlanClient(node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S) for node in nodes]
    for node in nodes:
        executor.add_node(node)
    calls: list[PlanCall] = []
    try:
        for pc in plan_clients:
            if not pc.wait_for_server(60):
                raise SystemExit("no planner")
        # wait for the common start instant so all processes burst together
        while time.monotonic() < start:
            executor.spin_once(timeout_sec=max(0.0, min(0.05, start - time.monotonic())))
        for i, pc in enumerate(plan_clients):
            n = offset + i
            task = lrtrace_task(DRONE_TASKS[n % len(DRONE_TASKS)])
            goal = make_goal(
                f"{prefix}{n % robots + 1}",
                task.instruction,
                urgency=task.urgency,
                scene=task.scene,
                dispatch=False,
            )
            calls.append(pc.send(goal))
        deadline = time.monotonic() + 120
        while not all(c.done.is_set() for c in calls) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        # keep spinning briefly so no late feedback is left in flight
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
    finally:
        Path(out).write_text(json.dumps([_record(c) for c in calls]))
        # what the test checks is written; rclpy's teardown of 20 nodes once hung
        # past the test's wait (a full CI run, every goal done in 4.6 s), so a stuck
        # teardown ends the process, saying so
        watchdog = threading.Timer(30.0, _teardown_hung)
        watchdog.daemon = True
        watchdog.start()
        executor.shutdown(timeout_sec=1.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


def _teardown_hung() -> None:
    print("burst_clients: rclpy teardown hung for 30 s; results were written", file=sys.stderr)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
