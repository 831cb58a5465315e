"""Capacity planning: the boundary search, the target, the planner on the simulator
and `lrtrace capacity` end to end. Replays run in virtual time and are seeded, so
capacities are deterministic and compare exactly; no wall-clock time is asserted."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from lrtrace.capacity import (
    MAX_DURATION_S,
    CapacityPlanner,
    SearchConfig,
    Setting,
    replay_duration,
    start_size,
)
from lrtrace.capacity_search import find_boundary
from lrtrace.capacity_target import CapacityTarget, ClassValue, class_values, meets
from lrtrace.catalog import load_catalog
from lrtrace.cli import main
from lrtrace.fleet_mix import load_mix
from lrtrace.profiles import PAPER_PROFILE
from lrtrace.results_format import SegmentRecord, TaskRecord
from timely_core.scheduling.tuf import Tuf

CATALOG = load_catalog()
# Busy drones: a few robots load the paper's engine, so searches stay small.
TINY = "{name: tiny, robots: {drone: {events_per_s: 0.5, max_tasks_per_event: 4}}}"
SEARCH = SearchConfig(seeds=1, duration_s=20, min_tasks=3, max_robots=16, precision=0)


# -- the search ---------------------------------------------------------------------


class Monotone:
    """A synthetic test that passes up to `boundary` and records what was asked."""

    def __init__(self, boundary: int) -> None:
        self.boundary = boundary
        self.asked: list[int] = []

    def __call__(self, n: int) -> bool:
        self.asked.append(n)
        return n <= self.boundary


@pytest.mark.parametrize("start", [1, 3, 16, 64, 100])
def test_search_finds_the_exact_boundary_of_a_monotone_test(start: int) -> None:
    limit = 100
    for boundary in range(limit + 1):
        test = Monotone(boundary)
        found = find_boundary(test, start, limit)
        assert found.passed == boundary
        assert found.failed == (None if boundary == limit else boundary + 1)
        assert found.at_limit == (boundary == limit)
        asked = test.asked
        assert len(asked) == len(set(asked)) and all(1 <= n <= limit for n in asked)
        assert len(asked) <= 2 * math.ceil(math.log2(limit)) + 2
        assert found.tried == {n: n <= boundary for n in asked}


def test_search_precision_stops_within_its_resolution() -> None:
    for boundary in (0, 5, 99, 400, 999):
        exact, coarse = Monotone(boundary), Monotone(boundary)
        find_boundary(exact, 10, 1000)
        found = find_boundary(coarse, 10, 1000, precision=0.1)
        assert found.passed <= boundary < (found.failed or math.inf)
        assert found.failed is not None
        assert found.failed - found.passed <= max(1, int(0.1 * found.passed))
        assert len(coarse.asked) <= len(exact.asked)
    assert find_boundary(Monotone(2000), 1, 1000, 0.1).passed == 1000


def test_search_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="limit"):
        find_boundary(lambda n: True, 1, 0)
    with pytest.raises(ValueError, match="precision"):
        find_boundary(lambda n: True, 1, 10, precision=1.0)


# -- the target ---------------------------------------------------------------------


def record(urgency: str, response_s: float | None, n: int) -> TaskRecord:
    """A drone task whose first action started `response_s` after arrival (None: it
    never completed)."""
    segments = []
    if response_s is not None:
        segments = [
            SegmentRecord(
                index=0,
                text="x",
                statements=1,
                emitted_s=response_s - 0.008,
                dispatched_s=response_s,
                exec_start_s=response_s,
                exec_end_s=response_s + 2.0,
            )
        ]
    done = response_s is not None
    return TaskRecord(
        task_id=f"t{n}",
        trace_id=6 if urgency == "urgent" else 1,
        agent_id="drone1",
        robot_type="drone",
        urgency="urgent" if urgency == "urgent" else "normal",
        tuf=Tuf.preset("urgent" if urgency == "urgent" else "normal"),
        arrival_s=0.0,
        segments=segments,
        finished=done,
        success=done,
    )


def test_full_utility_means_a_response_within_the_ert_and_incomplete_tasks_count() -> None:
    urgent = [0.1, 0.2, 0.2001, None]  # ERT 0.2 s: the first two are at full utility
    normal = [0.5, 1.25, None]  # utilities 1, 0.5 (alpha -2 past 1 s), 0
    values = class_values(
        [record("urgent", r, i) for i, r in enumerate(urgent)]
        + [record("normal", r, 10 + i) for i, r in enumerate(normal)]
    )
    assert set(values) == {"urgent-drone", "normal-drone"}
    u, n = values["urgent-drone"], values["normal-drone"]
    assert (u.tasks, u.completed, u.value) == (4, 3, 0.5)
    assert (n.tasks, n.completed) == (3, 2)
    assert n.value == pytest.approx(1.5 / 3) and n.mean_utility == pytest.approx(0.5)


def cv(cls: str, value: float) -> ClassValue:
    return ClassValue(cls, cls.split("-")[0], 10, 10, value, value)


def test_rules_median_and_all() -> None:
    target = CapacityTarget()  # 95% urgent at full utility, normal at 90% of max
    seeds = [
        {"urgent-drone": cv("urgent-drone", 0.96), "normal-drone": cv("normal-drone", 0.91)},
        {"urgent-drone": cv("urgent-drone", 0.90), "normal-drone": cv("normal-drone", 0.99)},
        {"urgent-drone": cv("urgent-drone", 0.97)},  # no normal task in this seed
    ]
    ok, judged = meets(target, seeds, "median")
    assert ok and judged == {"normal-drone": pytest.approx(0.95), "urgent-drone": 0.96}
    ok, judged = meets(target, seeds, "all")
    assert not ok and judged == {"normal-drone": 0.91, "urgent-drone": 0.90}
    lenient = CapacityTarget(urgent_full_share=0.0, normal_utility_share=0.9)
    assert meets(lenient, seeds, "all")[0]  # a threshold of 0 never fails


def test_impossible_targets_are_refused() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 1"):
        CapacityTarget(urgent_full_share=1.5)
    with pytest.raises(ValidationError, match="asks nothing"):
        CapacityTarget(urgent_full_share=0, normal_utility_share=0)


# -- the planner on the simulator ---------------------------------------------------


@pytest.fixture(scope="module")
def planner(tokenizer: Any) -> CapacityPlanner:
    mix = load_mix(TINY, CATALOG)
    return CapacityPlanner(mix, CATALOG, PAPER_PROFILE, tokenizer, CapacityTarget(), SEARCH)


def test_capacity_is_the_last_passing_fleet_before_the_first_failing_one(
    planner: CapacityPlanner,
) -> None:
    result = planner.capacity(Setting("timely"))
    cap = result.capacity
    assert 1 <= cap < SEARCH.max_robots and result.boundary.failed == cap + 1
    assert result.points[cap].met and not result.points[cap + 1].met
    assert result.batch_cap == PAPER_PROFILE.max_batch_size
    assert result.kv_tokens == PAPER_PROFILE.kv_capacity_tokens
    # the failing side fails on the target's own terms
    failing = result.points[cap + 1].judged
    assert failing["urgent-drone"] < 0.95 or failing["normal-drone"] < 0.90
    # virtual time: the same fleet replays to the same verdict
    assert planner.evaluate(Setting("timely"), cap).judged == result.points[cap].judged


def test_sweep_smaller_batches_and_kv_memory_lower_capacity(
    planner: CapacityPlanner, tokenizer: Any
) -> None:
    from robot_models.prompts import prompt_prefix

    prefix = len(tokenizer.encode(prompt_prefix("drone")).ids)
    base, batch2, tiny_kv, more_kv = planner.run(
        [
            Setting("timely"),
            Setting("timely", max_batch=2),
            Setting("timely", kv_tokens=prefix + 128),  # the prefix, and 8 blocks more
            Setting("timely", kv_tokens=4 * PAPER_PROFILE.kv_capacity_tokens),
        ]
    )
    assert batch2.batch_cap == 2 and tiny_kv.kv_tokens == prefix + 128
    assert batch2.capacity < base.capacity
    assert tiny_kv.capacity < base.capacity
    assert more_kv.capacity >= base.capacity


def test_a_target_one_robot_misses_gives_capacity_zero(planner: CapacityPlanner) -> None:
    # fcfs sends the whole plan at once: an urgent drone plan takes longer than 0.2 s
    # to decode on the paper's engine even alone
    result = planner.capacity(Setting("fcfs"))
    assert result.capacity == 0 and result.boundary.failed == 1
    assert result.points[1].judged["urgent-drone"] < 0.95


def test_small_fleets_replay_longer_so_every_class_has_tasks() -> None:
    drones = load_mix("drones", CATALOG)
    search = SearchConfig(duration_s=60, min_tasks=20)
    start = start_size(drones, CATALOG, search)
    assert replay_duration(drones, start, CATALOG, search) == 60
    assert replay_duration(drones, start // 2, CATALOG, search) > 60
    # one drone: 0.01 events/s, 3 urgent tasks of 8: 20 tasks take 5333 s; capped
    assert replay_duration(drones, 1, CATALOG, search) == MAX_DURATION_S
    for robots in (start // 2, start):
        rates = drones.class_rates(robots, CATALOG)
        duration = replay_duration(drones, robots, CATALOG, search)
        assert min(rates.values()) * duration >= 20 - 1e-9


# -- the CLI ------------------------------------------------------------------------


def test_cli_end_to_end(
    tmp_path: Path, tokenizer_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cap.json"
    argv = ["capacity", "--mix", TINY, "--tokenizer", str(tokenizer_path), "-o", str(out)]
    argv += ["--policy", "timely,fcfs", "--seeds", "2", "--duration", "20"]
    argv += ["--min-tasks", "3", "--max-robots", "16", "--precision", "0"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    doc = json.loads(out.read_text())
    assert doc["format"] == "lrtrace-capacity" and doc["simulated"] is True
    assert doc["profile"] == PAPER_PROFILE.name and doc["mix"]["name"] == "tiny"
    assert doc["target"]["urgent_full_share"] == 0.95 and doc["search"]["rule"] == "median"
    timely, fcfs = doc["settings"]
    assert (timely["label"], fcfs["label"]) == ("timely", "fcfs")
    cap = timely["capacity"]
    assert cap >= 1 and timely["failed_at"] == cap + 1
    assert timely["capacity_counts"] == {"drone": cap}
    points = {p["robots"]: p for p in timely["points"]}
    assert set(points) == set(timely["search_order"])
    assert points[cap]["met"] and not points[cap + 1]["met"]
    assert all(len(p["runs"]) == 2 for p in points.values())
    assert fcfs["capacity"] == 0 and fcfs["failed_at"] == 1
    assert "fcfs: 1 robot fails" in captured.err  # one robot, not "1 robots"
    assert "capacity (robots)" in captured.out and "SIMULATION" in captured.out
    assert f"{cap} ({cap + 1} fails)" in captured.out
    assert f"timely: {cap} robots meets" in captured.err
    assert f"timely: {cap + 1} robots fails" in captured.err
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def bad(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lrtrace: error: "), err
    assert match in err, err


def test_cli_bad_inputs(
    tmp_path: Path, tokenizer_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["capacity", "-o", str(tmp_path / "c.json"), "--mix", TINY]
    bad(capsys, [*base, "--policy", "timely,lifo"], "unknown policy 'lifo'")
    bad(capsys, [*base, "--profile", "nope"], "unknown latency profile 'nope'")
    boat = "{robots: {boat: {events_per_s: 1}}}"
    bad(capsys, [*base, "--mix", boat], "robots.boat: unknown robot type 'boat'")
    bad(capsys, [*base, "--mix", "{robots: {}}"], "robots: Dictionary should have at least 1")
    bad(capsys, [*base, "--mix", "fleet-of-boats"], "unknown fleet mix 'fleet-of-boats'")
    bad(capsys, [*base, "--urgent-full", "1.5"], "--urgent-full: Input should be less than")
    bad(capsys, [*base, "--normal-utility", "-0.1"], "--normal-utility: Input should be")
    both_zero = [*base, "--urgent-full", "0", "--normal-utility", "0"]
    bad(capsys, both_zero, "CapacityTarget: the target asks nothing")
    bad(capsys, [*base, "--rule", "most"], "--rule: Input should be 'median' or 'all'")
    bad(capsys, [*base, "--seeds", "0"], "--seeds: Input should be greater than or equal to 1")
    bad(capsys, [*base, "--duration", "0"], "--duration: Input should be greater than 0")
    bad(capsys, [*base, "--max-batch", "0"], "--max-batch values must be >= 1")
    bad(capsys, [*base, "--kv-tokens", "4k"], "not a list of integers")
    bad(capsys, [*base, "--policy", "timely,timely"], "run label 'timely' would be used twice")
    bad(capsys, [*base, "--max-batch", "4,4"], "run label 'timely@4' would be used twice")
    bad(capsys, [*base, "--kv-tokens", "4096,4096"], "--kv-tokens 4096 is given twice")
    bad(capsys, [*base, "--mix", ""], "--mix is empty: give a built-in mix (drones")
    out_nowhere = ["capacity", "-o", str(tmp_path / "no" / "c.json"), "--mix", TINY]
    bad(capsys, out_nowhere, "cannot write")
    tiny_kv = [*base, "--kv-tokens", "64", "--tokenizer", str(tokenizer_path)]
    bad(capsys, tiny_kv, "--kv-tokens 64: too little KV memory for the robots' prompt prefixes")
