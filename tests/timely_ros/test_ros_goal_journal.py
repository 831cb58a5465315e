"""Durable intake (#26): the goal journal on its own (SQLite, WAL), and a planner
killed mid-goal whose successor reports the goal as interrupted, with what it was
doing, on /timely/interrupted, which the client reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from timely_ros.goal_journal import GoalJournal, JournalInUse

from tests.timely_ros.ros_support import (
    RosClient,
    StartNodes,
    executor_entry,
    lrtrace_goal_fields,
    sim_planner_entry,
    wait_until,
)


def test_open_goals_of_an_earlier_incarnation_are_reported_once(tmp_path: Path) -> None:
    path = tmp_path / "goals.sqlite"
    first = GoalJournal(path, "/timely_planner", "inc1")
    first.accepted("g1", "arm1", "clean the desk")
    first.progress("g1", "executing segment 2")
    first.accepted("g2", "drone1", "find the cat")
    first.ended("g2", "succeeded")
    other = GoalJournal(path, "/other/timely_planner", "x")  # a planner beside it
    other.accepted("g3", "arm2", "stack")
    first.close()  # a crash leaves it the same way: nothing ends the open goal

    second = GoalJournal(path, "/timely_planner", "inc2")
    [report] = second.interrupted()
    assert (report.goal_id, report.robot_id, report.incarnation) == ("g1", "arm1", "inc1")
    assert "while the goal was executing segment 2" in report.reason
    assert second.interrupted() == []  # settled
    assert second.outcome("g2") == "succeeded" and second.outcome("g3") is None
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_ended_goals_are_kept_bounded_and_a_closed_journal_ignores_writes(
    tmp_path: Path,
) -> None:
    journal = GoalJournal(tmp_path / "g.sqlite", "/p", "i", keep=5)
    for n in range(12):
        journal.accepted(f"g{n}", "arm1", "x")
        journal.ended(f"g{n}", "succeeded")
    rows = sqlite3.connect(tmp_path / "g.sqlite").execute("SELECT COUNT(*) FROM goals").fetchone()
    assert rows[0] == 5
    journal.close()
    journal.accepted("late", "arm1", "x")  # a goal thread ending after shutdown: no error
    journal.ended("late", "cancelled")


@pytest.mark.ros
def test_a_second_running_planner_of_the_same_name_is_refused_the_journal(
    tmp_path: Path,
) -> None:
    import os

    path = tmp_path / "goals.sqlite"
    first = GoalJournal(path, "/timely/timely_planner", "inc1")
    first.accepted("g1", "drone1", "find the cat")
    with pytest.raises(
        JournalInUse, match=rf"already runs with journal .* \(process {os.getpid()}\)"
    ):
        GoalJournal(path, "/timely/timely_planner", "inc2")
    other = GoalJournal(path, "/site_b/timely_planner", "inc3")  # another planner: its own rows
    other.close()
    assert [g.goal_id for g in first.interrupted()] == []  # nothing settled behind its back
    first.close()
    again = GoalJournal(path, "/timely/timely_planner", "inc4")  # the first one stopped
    assert [g.goal_id for g in again.interrupted()] == ["g1"]
    again.close()


def test_a_restarted_planner_reports_the_goals_it_lost(
    node_processes: StartNodes, ros_client: RosClient, tmp_path: Path
) -> None:
    from timely_ros.plan_client import PlanClient, make_goal

    planner = sim_planner_entry(tmp_path, journal_path=str(tmp_path / "journal" / "goals.sqlite"))
    robot = node_processes(executor_entry("arm1", "sim-arm", time_scale=3.0), "executors", "arm")
    first = node_processes(planner, "planner", "planner")
    robot.wait_for_output("robot arm1: sim-arm executor ready", 60)
    client = PlanClient(ros_client.node, planner_timeout_s=30.0)
    assert client.wait_for_server(60), first.output()
    task = lrtrace_goal_fields(10)
    call = client.send(make_goal("arm1", task["instruction"], scene=task["scene"]))
    wait_until(lambda: len(call.segments) >= 1, 60, "the first segment")
    robot.wait_for_output(r"event=segment_started robot=arm1", 30)
    first.proc.kill()
    first.proc.wait(10)
    second = node_processes(planner, "planner", "planner2")
    assert call.done.wait(60), second.output()[-3000:]
    assert call.planner_restarted, call.client_error
    reason = client.interrupted_reason(call, wait_s=30)
    assert reason is not None and "while the goal was executing segment 0" in reason, reason
    second.wait_for_output(rf"goal {call.goal_id} for arm1 \('Clean the desk'\): aborted", 10)
