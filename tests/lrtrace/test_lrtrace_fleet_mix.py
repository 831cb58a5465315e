"""Fleet mixes (validation against the catalog, proportional fleets) and the traces
composed for a fleet of N robots."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from lrtrace.catalog import load_catalog
from lrtrace.errors import LrtraceError
from lrtrace.fleet_compose import compose_fleet
from lrtrace.fleet_mix import builtin_mixes, load_mix

CATALOG = load_catalog()
MIX = load_mix(
    "{name: m, robots: {drone: {share: 3, events_per_s: 0.2, max_tasks_per_event: 4},"
    " arm: {share: 1, trace_ids: '9,11', events_per_s: 0.1, max_tasks_per_event: 2}}}",
    CATALOG,
)


def test_builtin_mixes_load() -> None:
    assert {"drones", "drones-arms"} <= set(builtin_mixes())
    drones = load_mix("drones", CATALOG)
    assert drones.robots["drone"].trace_ids == tuple(range(1, 9))
    # WID 1 per robot: at 25 drones, 0.25 events/s
    assert 25 * drones.robots["drone"].events_per_s == pytest.approx(0.25)


def test_defaults_and_ranges() -> None:
    assert MIX.robots["drone"].trace_ids == tuple(range(1, 9))  # all of the type's tasks
    assert MIX.robots["arm"].trace_ids == (9, 11)


@pytest.mark.parametrize("robots", [1, 2, 3, 4, 5, 7, 10, 99, 1000])
def test_counts_are_proportional_and_sum_to_the_fleet(robots: int) -> None:
    counts = MIX.counts(robots)
    assert sum(counts.values()) == robots
    assert abs(counts["drone"] - 0.75 * robots) < 1 and abs(counts["arm"] - 0.25 * robots) < 1


def test_class_rates_scale_with_the_fleet() -> None:
    # 300 drones: 300 x 0.2 events/s x 2.5 tasks per event, 3 of 8 tasks urgent
    rates = MIX.class_rates(400, CATALOG)
    assert rates["urgent-drone"] == pytest.approx(300 * 0.2 * 2.5 * 3 / 8)
    assert rates["normal-arm"] == pytest.approx(100 * 0.1 * 1.5)
    assert MIX.class_rates(800, CATALOG)["normal-arm"] == pytest.approx(2 * rates["normal-arm"])
    # one robot: a drone, no arm; its bursts are capped at one task
    assert MIX.class_rates(1, CATALOG) == pytest.approx(
        {"normal-drone": 0.2 * 5 / 8, "urgent-drone": 0.2 * 3 / 8}
    )


def test_fleet_trace_matches_the_mix() -> None:
    trace = compose_fleet(MIX, 40, 400.0, seed=4, catalog=CATALOG)
    assert Counter(a.robot_type for a in trace.agents) == {"drone": 30, "arm": 10}
    assert trace == compose_fleet(MIX, 40, 400.0, seed=4, catalog=CATALOG)
    assert trace != compose_fleet(MIX, 40, 400.0, seed=5, catalog=CATALOG)
    assert all(a.arrival_s <= b.arrival_s for a, b in pairwise(trace.tasks))
    by_event: dict[int, list[str]] = {}
    for task in trace.tasks:
        assert task.trace_id in MIX.robots[task.robot_type].trace_ids
        by_event.setdefault(task.event, []).append(task.agent_id)
    for agents in by_event.values():
        assert len(agents) == len(set(agents)) <= 4  # distinct robots, one burst
        assert len({a.rstrip("0123456789") for a in agents}) == 1  # one robot type per event
    classes = Counter(CATALOG[t.trace_id].task_class for t in trace.tasks)
    for cls, rate in MIX.class_rates(40, CATALOG).items():
        expected = rate * 400.0
        assert abs(classes[cls] - expected) < 4 * expected**0.5 + 10, (cls, classes, expected)


def test_bursts_are_capped_at_the_types_robots() -> None:
    trace = compose_fleet(MIX, 2, 2000.0, seed=0, catalog=CATALOG)  # 2 drones, 0 arms
    assert {a.agent_id for a in trace.agents} == {"drone1", "drone2"}
    sizes = Counter(t.event for t in trace.tasks).values()
    assert max(sizes) == 2


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("{robots: {dron: {events_per_s: 0.1}}}", "robots.dron: unknown robot type 'dron'"),
        ("{robots: {}}", "robots: Dictionary should have at least 1 item"),
        (
            "{robots: {drone: {events_per_s: 0.1, trace_ids: [9]}}}",
            "robots.drone.trace_ids: trace 9",
        ),
        ("{robots: {drone: {events_per_s: 0.1, trace_ids: [12]}}}", "unknown trace id 12"),
        ("{robots: {drone: {events_per_s: 0.1, trace_ids: []}}}", "robots.drone.trace_ids"),
        ("{robots: {drone: {events_per_s: 0}}}", "robots.drone.events_per_s"),
        ("{robots: {drone: {share: -1, events_per_s: 1}}}", "robots.drone.share"),
        ("{robots: {drone: {events_per_s: 1, max_tasks_per_event: 0}}}", "max_tasks_per_event"),
        ("{robots: {drone: {events_per_s: 1, colour: red}}}", "robots.drone.colour"),
        ("{robots: {drone: {events_per_s: 1, trace_ids: 1-x}}}", "not a list of trace ids"),
        ("{robots: {drone: {events_per_s: 1}}", "not valid YAML"),
        ("{fleet: 3}", "robots: Field required"),
        ("no-such-mix", "unknown fleet mix 'no-such-mix'; built in: drones"),
    ],
)
def test_bad_mixes_name_the_field(spec: str, match: str) -> None:
    with pytest.raises(LrtraceError) as err:
        load_mix(spec, CATALOG)
    assert match in str(err.value) and "\n" not in str(err.value)


def test_mix_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("name: f\nrobots:\n  arm:\n    events_per_s: 0.01\n")
    assert load_mix(str(path), CATALOG).robots["arm"].trace_ids == (9, 10, 11)
    path.write_text("- 1\n")
    with pytest.raises(LrtraceError, match="must be a mapping"):
        load_mix(str(path), CATALOG)
