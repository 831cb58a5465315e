"""Trace files: round trip, and one clear error for every kind of bad file."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from lrtrace import trace_format as tf
from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.problems import MAX_SHOWN
from lrtrace.workload import preset

TRACE = compose(preset(1).model_copy(update={"duration_s": 60.0}), load_catalog())


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "t.lrt"
    tf.write(TRACE, path)
    assert tf.read(path) == TRACE
    assert not (tmp_path / "t.lrt.tmp").exists()


@pytest.mark.parametrize("cut", [1, 10, 100, -1])
def test_truncated_file(cut: int) -> None:
    data = tf.dumps(TRACE)
    with pytest.raises(LrtraceError, match="truncated or malformed"):
        tf.loads(data[:cut])


def test_trailing_garbage() -> None:
    with pytest.raises(LrtraceError, match="trailing bytes"):
        tf.loads(tf.dumps(TRACE) + b"\x01")


def test_not_a_trace() -> None:
    with pytest.raises(LrtraceError, match="not an lrtrace trace"):
        tf.loads(msgpack.packb({"hello": 1}))
    with pytest.raises(LrtraceError, match="not an lrtrace trace"):
        tf.loads(msgpack.packb([1, 2, 3]))


def test_future_version() -> None:
    doc = TRACE.model_dump(mode="json")
    doc["version"] = 7
    with pytest.raises(LrtraceError, match="version 7 is not supported"):
        tf.loads(msgpack.packb(doc))


def test_invalid_field_is_named() -> None:
    doc = TRACE.model_dump(mode="json")
    doc["tasks"][3]["arrival_s"] = -1.0
    with pytest.raises(LrtraceError, match=r"tasks\.3\.arrival_s"):
        tf.loads(msgpack.packb(doc))


def test_arrivals_out_of_order() -> None:
    doc = TRACE.model_dump(mode="json")
    doc["tasks"][0]["arrival_s"], doc["tasks"][1]["arrival_s"] = 50.0, 1.0
    with pytest.raises(LrtraceError, match="time order"):
        tf.loads(msgpack.packb(doc))


def test_task_on_unknown_agent() -> None:
    doc = TRACE.model_dump(mode="json")
    doc["tasks"][0]["agent_id"] = "arm99"
    with pytest.raises(LrtraceError, match="is not a drone"):
        tf.loads(msgpack.packb(doc))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(LrtraceError, match="cannot read trace"):
        tf.read(tmp_path / "nope.lrt")


def test_every_problem_is_listed_one_per_line_with_its_place() -> None:
    doc = TRACE.model_dump(mode="json")
    doc["workload"]["eps"] = 0
    doc["tasks"][0]["urgency"] = "meh"
    doc["tasks"][2]["arrival_s"] = -1.0
    with pytest.raises(LrtraceError) as caught:
        tf.loads(msgpack.packb(doc), "t.lrt")
    first, *problems = str(caught.value).splitlines()
    ids = [t.task_id for t in TRACE.tasks]
    assert first == "t.lrt: invalid trace: 3 problems:"
    assert [p.split(":")[0].strip() for p in problems] == [
        "workload.eps",
        f"tasks.0.urgency ({ids[0]})",
        f"tasks.2.arrival_s ({ids[2]})",
    ]
    assert "more)" not in str(caught.value)


def test_every_inconsistency_is_listed_too() -> None:
    doc = TRACE.model_dump(mode="json")
    tasks = doc["tasks"]
    tasks[1]["agent_id"] = "arm99"
    tasks[4]["task_id"] = tasks[3]["task_id"]
    tasks[6]["arrival_s"] = 0.0
    with pytest.raises(LrtraceError) as caught:
        tf.loads(msgpack.packb(doc))
    problems = str(caught.value).splitlines()[1:]
    assert len(problems) == 3, problems
    assert (
        problems[0].strip().startswith(f"tasks.1.agent_id ({tasks[1]['task_id']}): agent 'arm99'")
    )
    assert "no such agent" in problems[0]
    assert problems[1].strip().startswith(f"tasks.4.task_id ({tasks[3]['task_id']}):")
    assert "(also tasks.3)" in problems[1]
    assert problems[2].strip().startswith(f"tasks.6.arrival_s ({tasks[6]['task_id']}):")
    assert "time order" in problems[2]


def test_a_long_list_is_capped_saying_how_many_more() -> None:
    doc = TRACE.model_dump(mode="json")
    for task in doc["tasks"][:25]:
        task["urgency"] = "meh"
    with pytest.raises(LrtraceError) as caught:
        tf.loads(msgpack.packb(doc))
    lines = str(caught.value).splitlines()
    assert lines[0].endswith("25 problems:") and lines[-1] == "  (+5 more)"
    assert len(lines) == 1 + MAX_SHOWN + 1


def test_an_arrival_after_the_workloads_duration_is_refused() -> None:
    """Also bounds arrival times: at 1e15 s the replay's 20 ms steps no longer add up."""
    doc = TRACE.model_dump(mode="json")
    doc["tasks"][-1]["arrival_s"] = 1e15
    with pytest.raises(LrtraceError, match=r"arrives at 1e\+15 s, after the workload's"):
        tf.loads(msgpack.packb(doc))
    doc = TRACE.model_dump(mode="json")
    doc["workload"]["duration_s"] = TRACE.tasks[-1].arrival_s / 2  # "engine busy 320%"
    with pytest.raises(LrtraceError, match=r"problems:\n.*after the workload's duration_s"):
        tf.loads(msgpack.packb(doc))
