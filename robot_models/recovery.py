"""The scripted planners' recovery after a failure observation: retry the failed
segment, then go on with the rest of the known plan. Used where plans are
replayed rather than generated (the ROS planner's `simulated` engine, the
closed-loop bench), so the rollback path can be exercised without a checkpoint
trained on observations."""

from __future__ import annotations

from robot_models.language import FAILED_MARK


def retry_after_failure(plan: str, written: str) -> str | None:
    """What follows `written` (the generated text, with failure observations as
    lines `<segment>->failed(...)`) when it ends with a failure observation: the
    failed segment again and the rest of `plan`. None when it does not end with
    one, or the text that ran and the failed segment are not how `plan` goes."""
    last = written.rstrip("\n").rsplit("\n", 1)[-1]
    if not written.endswith("\n") or FAILED_MARK not in last:
        return None
    done = failed = ""  # the plan text the robot ran, failed attempts taken out
    for line in written.split("\n"):
        if FAILED_MARK in line:
            failed = line[: line.rindex(FAILED_MARK)].strip()
            kept = done.rstrip()
            done = kept[: -len(failed)] if failed and kept.endswith(failed) else kept
        else:
            done += line
    rest = plan[len(done) :]
    return rest if plan.startswith(done) and rest.startswith(failed) else None
