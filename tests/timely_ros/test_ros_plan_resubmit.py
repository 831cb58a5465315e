"""`timely plan --resubmit N` against a PlanTask server that aborts the first goal
as a planner does when it shuts down (`goals.shutting_down`): the command sends the
goal again and reports the second answer; without --resubmit the abort is the
command's failure. A goal that failed on its own plan is never resent."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import RosClient, timely_cli

pytestmark = pytest.mark.ros

NAMESPACE = "resubmit_planner"


class AbortingPlanner:
    """Aborts its first goal with `first_error`, then plans every later one."""

    def __init__(self, client: RosClient, first_error: str) -> None:
        self.first_error = first_error
        self.goals = 0
        self._lock = threading.Lock()
        self.server = client.serve_plan_task(NAMESPACE, self._execute)

    def _execute(self, goal_handle: Any) -> Any:
        from timely_interfaces.action import PlanTask

        with self._lock:
            self.goals += 1
            first = self.goals == 1
        if first:
            goal_handle.abort()
            return PlanTask.Result(success=False, error=self.first_error)
        goal_handle.succeed()
        return PlanTask.Result(success=True, plan="tu(90);")


def _plan(tmp_path: Path, *options: str) -> Any:
    return timely_cli(
        tmp_path,
        "--namespace",
        NAMESPACE,
        "plan",
        "--robot",
        "drone1",
        "--no-dispatch",
        *options,
        "turn around",
    )


def test_a_goal_aborted_by_the_planners_shutdown_is_sent_again(
    ros_client: RosClient, tmp_path: Path
) -> None:
    from timely_ros.goals import shutting_down

    planner = AbortingPlanner(ros_client, shutting_down(f"/{NAMESPACE}/timely_planner"))
    done = _plan(tmp_path, "--resubmit", "1")
    assert done.returncode == 0, done.stderr
    assert "is shutting down; the goal ended with it" in done.stderr
    assert "resubmitting the goal" in done.stderr and "plan: tu(90);" in done.stdout
    assert planner.goals == 2


@pytest.mark.parametrize(
    ("error", "options"),
    [
        ("planner /x/timely_planner is shutting down", ()),  # not asked to resubmit
        ("robot drone1 rejected segment 0", ("--resubmit", "1")),  # the plan's own failure
    ],
    ids=["no-resubmit", "own-failure"],
)
def test_other_ends_are_the_commands_failure(
    ros_client: RosClient, tmp_path: Path, error: str, options: tuple[str, ...]
) -> None:
    planner = AbortingPlanner(ros_client, error)
    done = _plan(tmp_path, *options)
    assert done.returncode == 1, done.stderr
    assert f"timely plan: failed: {error}" in done.stderr
    assert planner.goals == 1
