"""A trace file's tasks are checked against the task catalog when it is loaded: a
trace id names an LRTrace task, so an unknown id, or a task whose instruction, scene
or urgency is not its trace id's, is listed with the trace's other problems."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from lrtrace import trace_format as tf
from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.workload import WorkloadSpec
from timely_core.scheduling.tuf import Tuf

CATALOG = load_catalog()
TRACE = compose(
    WorkloadSpec(eps=0.5, max_tpe=1, trace_ids=(1, 3, 6), agents=2, duration_s=30, seed=1),
    CATALOG,
)


def problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(LrtraceError) as caught:
        tf.loads(msgpack.packb(doc), "t.lrt")
    return [line.strip() for line in str(caught.value).splitlines()]


def first(trace_id: int) -> int:
    return next(i for i, t in enumerate(TRACE.tasks) if t.trace_id == trace_id)


def test_a_composed_trace_loads() -> None:
    assert tf.loads(tf.dumps(TRACE)) == TRACE


def test_an_unknown_trace_id_is_refused() -> None:
    doc = TRACE.model_dump(mode="json")
    doc["tasks"][0]["trace_id"] = 99
    (line,) = problems(doc)
    assert line.startswith(f"t.lrt: invalid trace: tasks.0.trace_id ({TRACE.tasks[0].task_id})")
    assert "unknown trace id 99; known ids: 1, 2" in line


def test_a_trace_id_that_is_not_the_tasks_is_refused() -> None:
    doc = TRACE.model_dump(mode="json")
    i = first(1)
    doc["tasks"][i]["trace_id"] = 3  # another drone task, with task 1's instruction
    lines = problems(doc)
    assert lines[0] == "t.lrt: invalid trace: 2 problems:"
    assert lines[1].startswith(f"tasks.{i}.instruction (") and "of trace 3" in lines[1]
    assert lines[2].startswith(f"tasks.{i}.scene (")


def test_an_urgency_that_is_not_the_tasks_is_refused() -> None:
    doc = TRACE.model_dump(mode="json")
    i = first(1)  # a normal task
    doc["tasks"][i]["urgency"] = "urgent"
    (line,) = problems(doc)
    assert f"tasks.{i}.urgency (" in line and "trace 1 is normal, not urgent" in line


def test_the_other_urgencys_tuf_is_refused_a_custom_one_kept() -> None:
    doc = TRACE.model_dump(mode="json")
    i = first(6)  # an urgent task
    doc["tasks"][i]["tuf"] = Tuf.normal().model_dump()
    (line,) = problems(doc)
    assert f"tasks.{i}.tuf (" in line and "the normal preset on an urgent task" in line
    custom = Tuf(expected_response_time_s=0.3, slope=-5.0, initial_utility=2.0)
    doc["tasks"][i]["tuf"] = custom.model_dump()
    assert tf.loads(msgpack.packb(doc)).tasks[i].tuf == custom
