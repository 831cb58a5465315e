"""Workload composition: determinism, Table 3 presets, distinct agents, bad input."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.workload import PRESETS, WorkloadSpec, preset

CATALOG = load_catalog()


def test_presets_are_table_3() -> None:
    assert (PRESETS[1].eps, PRESETS[1].max_tpe, PRESETS[1].agents, PRESETS[1].duration_s) == (
        0.25,
        8,
        25,
        260.0,
    )
    assert PRESETS[2].max_tpe == 16 and PRESETS[2].agents == 42
    assert PRESETS[3].trace_ids == (9, 10, 11) and PRESETS[3].eps == 0.1


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    spec = preset(1)
    assert compose(spec, CATALOG) == compose(spec, CATALOG)
    other = compose(spec.model_copy(update={"seed": 1}), CATALOG)
    assert other.tasks != compose(spec, CATALOG).tasks


def test_wid1_tasks_match_the_catalog() -> None:
    trace = compose(preset(1), CATALOG)
    assert {t.trace_id for t in trace.tasks} == set(range(1, 9))
    for t in trace.tasks:
        spec = CATALOG[t.trace_id]
        assert (t.instruction, t.scene, t.urgency) == (spec.instruction, spec.scene, spec.urgency)
        assert t.tuf.initial_utility == (2.0 if spec.urgency == "urgent" else 1.0)
        assert 0 <= t.arrival_s < 260.0
    assert len({a.agent_id for a in trace.agents}) == 25


def test_event_rate_is_close_to_eps() -> None:
    spec = preset(1).model_copy(update={"duration_s": 20000.0})
    trace = compose(spec, CATALOG)
    events = len({t.event for t in trace.tasks})
    assert events == pytest.approx(0.25 * 20000, rel=0.05)
    per_event = Counter(t.event for t in trace.tasks)
    assert max(per_event.values()) == 8 and min(per_event.values()) == 1


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    max_tpe=st.integers(1, 6),
    ids=st.sets(st.integers(1, 11), min_size=1, max_size=11),
)
def test_tasks_of_an_event_use_distinct_agents_of_the_right_type(
    seed: int, max_tpe: int, ids: set[int]
) -> None:
    spec = WorkloadSpec(
        eps=1.0, max_tpe=max_tpe, trace_ids=tuple(sorted(ids)), agents=6, duration_s=30, seed=seed
    )
    trace = compose(spec, CATALOG)
    by_event: dict[int, list[str]] = {}
    for t in trace.tasks:
        by_event.setdefault(t.event, []).append(t.agent_id)
        assert t.agent_id.startswith(t.robot_type)
    for agents in by_event.values():
        assert len(agents) == len(set(agents)) <= max_tpe


def test_more_tasks_per_event_than_agents_is_refused() -> None:
    spec = WorkloadSpec(eps=1, max_tpe=9, trace_ids=(1,), agents=8, duration_s=10)
    with pytest.raises(LrtraceError, match="9 tasks per event need distinct agents"):
        compose(spec, CATALOG)


def test_unknown_trace_id_is_refused() -> None:
    spec = WorkloadSpec(eps=1, max_tpe=1, trace_ids=(1, 12), agents=8, duration_s=10)
    with pytest.raises(LrtraceError, match="unknown trace id 12"):
        compose(spec, CATALOG)


@pytest.mark.parametrize(
    ("ids", "expected"), [("1-3", (1, 2, 3)), ("1-3,9", (1, 2, 3, 9)), (4, (4,)), ([2, 5], (2, 5))]
)
def test_a_workload_takes_trace_ids_as_the_cli_does(ids: object, expected: tuple[int, ...]) -> None:
    spec = WorkloadSpec.model_validate(
        {"eps": 1, "max_tpe": 2, "trace_ids": ids, "agents": 3, "duration_s": 5}
    )
    assert spec.trace_ids == expected


def test_a_workload_names_bad_trace_ids() -> None:
    with pytest.raises(ValueError, match=r"not a list of trace ids: '1-x'"):
        WorkloadSpec.model_validate(
            {"eps": 1, "max_tpe": 2, "trace_ids": "1-x", "agents": 3, "duration_s": 5}
        )
