"""Run labels are unique: reports and `record --run` tell runs apart by label, so a
policy or batch cap given twice is refused before any run, never merged."""

from __future__ import annotations

import pytest
from rich.console import Console

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.replay.runner import replay, run_labels
from lrtrace.replay.target import ReplayTarget
from lrtrace.workload import preset


def test_labels_name_policy_and_batch_cap() -> None:
    assert run_labels(["timely", "fcfs"], [None]) == ["timely", "fcfs"]
    assert run_labels(["timely"], [2, 8]) == ["timely@2", "timely@8"]


@pytest.mark.parametrize(
    ("policies", "batches", "label"),
    [(["timely", "fcfs", "timely"], [None], "timely"), (["fcfs"], [4, 2, 4], "fcfs@4")],
)
def test_a_label_twice_is_refused_naming_it(
    policies: list[str], batches: list[int | None], label: str
) -> None:
    with pytest.raises(LrtraceError, match=rf"run label '{label}' would be used twice"):
        run_labels(policies, batches)


class Untouchable:
    """A target the runner must not reach."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the replay reached the target ({name})")


def test_replay_refuses_before_touching_the_target() -> None:
    trace = compose(preset(1).model_copy(update={"duration_s": 5.0}), load_catalog())
    target: ReplayTarget = Untouchable()  # type: ignore[assignment]
    with pytest.raises(LrtraceError, match=r"run label 'fcfs' would be used twice"):
        replay(trace, target, ["fcfs", "fcfs"], [None], None, Console())
