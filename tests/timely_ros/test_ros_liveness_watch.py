"""The heartbeat bookkeeping (no DDS): silence past the timeout, comebacks,
restarts, malformed heartbeats; and the status message's goal counts."""

from __future__ import annotations

from types import SimpleNamespace

from builtin_interfaces.msg import Time
from timely_ros.config import planner_params
from timely_ros.liveness import Beat, LivenessWatch, heartbeat_payload, parse_heartbeat
from timely_ros.status import GoalCounts, status_msg


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_source_is_gone_after_the_timeout_and_back_with_its_next_beat() -> None:
    clock = FakeClock()
    watch = LivenessWatch(2.0, clock)
    assert watch.silent_s("arm1") is None and watch.responding("arm1")  # never heard
    assert watch.beat(Beat("arm1", "a")) == (False, False)
    clock.t += 1.9
    assert watch.responding("arm1") and watch.newly_gone() == []
    clock.t += 0.2
    assert not watch.responding("arm1")
    assert watch.newly_gone() == ["arm1"] and watch.newly_gone() == []  # reported once
    assert watch.not_responding() == ["arm1"]
    assert watch.beat(Beat("arm1", "a")) == (True, False)  # back, same process
    assert watch.responding("arm1") and watch.not_responding() == []
    assert watch.beat(Beat("arm1", "b")) == (False, True)  # restarted
    assert watch.incarnation("arm1") == "b"


def test_heartbeats_round_trip_and_garbage_is_ignored() -> None:
    assert parse_heartbeat(heartbeat_payload("timely_planner", "abc", 0.2)) == Beat(
        "timely_planner", "abc"
    )
    for garbage in ("", "{", "[]", '{"source": "x"}', "null"):
        assert parse_heartbeat(garbage) is None


def test_status_counts_goals_done_apart_from_plans_written() -> None:
    params = planner_params({"robots": ["arm1"], "arm1": {"type": "arm"}})
    stats = SimpleNamespace(
        policy="timely",
        queued=5,  # 2 new + 3 suspended generations re-queued for their next segment
        waiting_first=2,
        running=1,
        suspended=3,
        kv_device_blocks_free=10,
        kv_device_blocks_total=20,
        submitted=9,
        succeeded=6,
        failed=1,
        rejected=1,
        cancelled=1,
        segments_emitted=30,
    )
    goals = GoalCounts(rejected=2, succeeded=4, accepted=9, aborted=2, cancelled=1)
    msg = status_msg(stats, None, params, goals, Time(), "inc1", ["arm1"])
    assert msg.queue_length == 2 and msg.suspended_generations == 3
    assert (msg.tasks_completed, msg.plans_completed) == (4, 6)
    # the goals' counts as their clients saw them, not the service's: a plan written
    # to its end whose robot then failed (or was cancelled) is no success
    assert (msg.tasks_submitted, msg.tasks_failed, msg.tasks_cancelled) == (9, 2, 1)
    assert msg.tasks_rejected == 2
    assert msg.incarnation == "inc1" and list(msg.robots_not_responding) == ["arm1"]


def test_diagnostics_flag_a_full_queue_and_a_silent_robot() -> None:
    from diagnostic_msgs.msg import DiagnosticStatus
    from timely_interfaces.msg import ServiceStatus
    from timely_ros.diagnostics import diagnostics

    params = planner_params(
        {"robots": ["arm1", "drone1"], "arm1": {"type": "arm"}, "drone1": {"type": "drone"}}
    )
    status = ServiceStatus(
        queue_length=250,  # of max_queue 256
        kv_device_used_fraction=0.5,
        incarnation="inc1",
        robot_ids=["arm1", "drone1"],
        robot_states=["not responding (executing segment 1)", "idle"],
        robot_goal_ids=["ab" * 16, ""],
        robots_not_responding=["arm1"],
    )
    planner, arm, drone = diagnostics(status, params, "/timely_planner", Time()).status
    assert planner.level == DiagnosticStatus.WARN and "queue 250 of 256" in planner.message
    assert {kv.key: kv.value for kv in planner.values}["incarnation"] == "inc1"
    assert arm.level == DiagnosticStatus.ERROR and arm.hardware_id == "arm1"
    assert arm.name == "/timely_planner: robot arm1" and "not responding" in arm.message
    assert drone.level == DiagnosticStatus.OK and drone.message == "idle"
    # a robot whose executor was never heard from: its goals would fail
    unheard = diagnostics(status, params, "/p", Time(), never_heard=["drone1", "arm1"])
    _, arm, drone = unheard.status
    assert arm.level == DiagnosticStatus.ERROR  # heard, then gone: the worse state
    assert drone.level == DiagnosticStatus.WARN
    assert drone.message == "idle; no heartbeat from its executor yet"
