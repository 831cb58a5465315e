"""The robot runs a segment with the plan's semantics: conditions decide, variables
carry over between a task's segments, a return ends the plan. No ROS needed."""

from __future__ import annotations

import threading

import pytest
from timely_ros.backends.base import Progress, SkillFailed
from timely_ros.segment_runner import SegmentRunner, SegmentStopped

from robot_models.skills import Skill, SkillSet, SkillValue


class RecordingDrone:
    """A backend that records every call and answers perception from a script."""

    def __init__(self, answers: dict[str, str] | None = None, fail: str = "") -> None:
        self._skills = SkillSet.load("drone")
        self.answers = answers or {}
        self.fail = fail
        self.calls: list[str] = []

    @property
    def skill_set(self) -> SkillSet:
        return self._skills

    def run(
        self, skill: Skill, args: tuple[SkillValue, ...], stop: threading.Event, progress: Progress
    ) -> str:
        self.calls.append(f"{skill.short}({','.join(map(repr, args))})")
        if skill.short == self.fail:
            raise SkillFailed("motor stalled")
        progress(1.0, skill.name)
        return self.answers.get(skill.short, "")

    def halt(self) -> None:
        return None

    def close(self) -> None:
        return None


def _no_progress(_i: int, _f: float, _s: str) -> None:
    return None


def test_a_false_condition_skips_its_body() -> None:
    drone = RecordingDrone({"sw": "False"})
    runner = SegmentRunner(drone, "drone")
    out = runner.run("t1", "?sw('cat')==True{tp();->True;}", threading.Event(), _no_progress)
    assert drone.calls == ["sw('cat')"]
    assert not out.returned


def test_a_true_condition_runs_its_body_and_the_return_ends_the_plan() -> None:
    drone = RecordingDrone({"sw": "True"})
    runner = SegmentRunner(drone, "drone")
    out = runner.run("t1", "?sw('cat')==True{tp();->True;}", threading.Event(), _no_progress)
    assert drone.calls == ["sw('cat')", "tp()"]
    assert out.returned and out.value == "True"
    # a later segment of the same task does nothing once the plan has returned
    later = runner.run("t1", "mf(100);", threading.Event(), _no_progress)
    assert drone.calls == ["sw('cat')", "tp()"] and later.calls == 0
    # another task is not affected
    runner.run("t2", "mf(100);", threading.Event(), _no_progress)
    assert drone.calls[-1] == "mf(100)"


def test_variables_carry_over_between_segments_of_a_task() -> None:
    drone = RecordingDrone({"ox": "0.25"})
    runner = SegmentRunner(drone, "drone")
    runner.run("t1", "_1=ox('cup');", threading.Event(), _no_progress)
    runner.run("t1", "lg(_1);", threading.Event(), _no_progress)
    assert drone.calls == ["ox('cup')", "lg(0.25)"]
    with pytest.raises(ValueError, match="_1"):  # another task has no such variable
        runner.run("t2", "lg(_1);", threading.Event(), _no_progress)


def test_bad_text_is_rejected_before_anything_moves() -> None:
    drone = RecordingDrone()
    runner = SegmentRunner(drone, "drone")
    with pytest.raises(ValueError, match="syntax"):
        runner.run("t1", "mf(100);tc(90));", threading.Event(), _no_progress)
    with pytest.raises(ValueError, match="zz"):
        runner.run("t2", "mf(100);zz(3);", threading.Event(), _no_progress)
    assert drone.calls == []


def test_a_failing_skill_names_itself_and_a_stop_ends_the_segment() -> None:
    runner = SegmentRunner(RecordingDrone(fail="tp"), "drone")
    with pytest.raises(SkillFailed, match="take_picture: motor stalled"):
        runner.run("t1", "mf(50);tp();", threading.Event(), _no_progress)
    stop = threading.Event()
    stop.set()
    drone = RecordingDrone()
    with pytest.raises(SegmentStopped):
        SegmentRunner(drone, "drone").run("t1", "mf(50);", stop, _no_progress)
    assert drone.calls == []


def test_segment_0_of_a_reused_task_id_starts_a_new_plan() -> None:
    """A planner that restarted may reuse a task id: the robot must run the new plan,
    not skip it because the old plan with that id had returned."""
    drone = RecordingDrone({"sw": "True"})
    runner = SegmentRunner(drone, "drone")
    runner.run("task-0", "?sw('cat')==True{->True;}", threading.Event(), _no_progress, 0)
    out = runner.run("task-0", "mf(100);", threading.Event(), _no_progress, 0)
    assert drone.calls == ["sw('cat')", "mf(100)"] and out.calls == 1
    # and its variables are the new plan's, not the old one's
    runner.run("task-1", "_1=sw('cup');", threading.Event(), _no_progress, 0)
    with pytest.raises(ValueError, match="_1"):
        runner.run("task-1", "tu(_1);", threading.Event(), _no_progress, 0)
