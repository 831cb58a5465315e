"""Trace files: round trip, and one clear error for every kind of bad file."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from lrtrace import trace_format as tf
from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
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
