"""bench/fleet_traffic.py on the shipped fleet (both robot types, the LoRA variants
and the full fine-tune): every contender plans each request as the one engine does,
in the throughput runs and with arrivals over time; a budget too small for a
per-variant engine is recorded as such, each contender's repeats are kept, and the
robots of each type get their own type's prompts and variants."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import fleet_traffic  # noqa: E402
import fleet_traffic_tuf  # noqa: E402

from robot_models.variants.spec import VARIANTS_DIR, load_fleet  # noqa: E402


def test_shipped_fleet_contenders_plan_alike(tmp_path: Path) -> None:
    out = tmp_path / "shipped.json"
    argv = ["--fleet", "shipped", "--per-variant", "1", "--max-tokens", "3"]
    argv += ["--memory-mb", "96,140", "--repeats", "2", "--out", str(out)]
    argv += ["--tuf-eps", "4", "--tuf-duration-s", "1.5", "--tuf-memory-mb", "140"]
    assert fleet_traffic.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["variants"] == [*load_fleet(), "warehouse-drone-full"]
    (tuf,) = result["tuf"]
    assert set(tuf["tasks_by_robot_type"]) == {"drone", "arm"}
    assert sum(tuf["tasks_by_robot_type"].values()) == tuf["tasks"]
    for key, row in tuf["contenders"].items():
        assert row["served"] == tuf["tasks"], key
        if key != "one_engine":
            assert row["tokens_equal_one_engine"] == tuf["tasks"], key
    small, ample = result["runs"]
    assert small["per_variant_engines"]["fits"] is False  # its prefix leaves no room
    for row in (small, ample):
        assert row["one_engine"]["served"] == 8
        assert len(row["one_engine"]["device_s_runs"]) == 2
    assert ample["per_variant_engines"]["tokens_equal_one_engine"] == 8
    assert ample["merge_per_variant"]["tokens_equal_one_engine"] == 8
    assert small["merge_per_variant"]["tokens_equal_one_engine"] == 8


def test_each_variant_gets_its_robot_types_prompt() -> None:
    types = {"packing-arm": "arm", "heavy-drone": "drone"}
    prefixes, requests = fleet_traffic.fleet_requests(types, per_variant=2)
    assert set(prefixes) == {"arm", "drone"} and prefixes["arm"] != prefixes["drone"]
    assert [r.variant for r in requests] == ["packing-arm", "heavy-drone"] * 2
    for r in requests:
        assert r.robot_type == types[r.variant]
        assert r.prompt[: len(prefixes[r.robot_type])] == prefixes[r.robot_type]
        assert r.prefix_id == f"{r.robot_type}@{r.variant}"
    full = {"warehouse-drone-full": VARIANTS_DIR / "warehouse-drone-full"}
    assert fleet_traffic.variant_robot_types(full) == {"warehouse-drone-full": "drone"}


def test_a_trace_of_two_robot_types_tags_each_robot_with_its_types_variants() -> None:
    types = {"heavy-drone": "drone", "warehouse-drone": "drone", "lab-arm": "arm"}
    prefixes, requests = fleet_traffic_tuf.trace_requests(types, 6.0, 3.0, 0)
    assert {r.robot_type for r in requests} == {"drone", "arm"}
    for r in requests:
        assert types[r.variant] == r.robot_type
        assert r.prompt[: len(prefixes[r.robot_type])] == prefixes[r.robot_type]
    assert {r.urgency for r in requests if r.robot_type == "arm"} == {"normal"}
    assert [r.arrival_s for r in requests] == sorted(r.arrival_s for r in requests)
