"""bench/fleet_traffic_service.py at a small size: every contender serves every task,
the 8 shipped variants resident in the one engine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from fleet_traffic_service import main  # noqa: E402


def test_a_short_run_serves_every_task_of_every_contender(tmp_path: Path) -> None:
    out = tmp_path / "fleet_traffic_service.json"
    assert main(["--eps", "2", "--duration", "2", "--agents", "8", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(result["resident_weights"]["variants"]) == 8
    rows = result["rows"]
    assert [r["contender"] for r in rows.values()] == [
        "variants, timely",
        "variants, fcfs",
        "base, timely",
    ]
    for row in rows.values():
        assert row["tasks"] > 0 and row["succeeded"] == row["tasks"]
        assert row["plan_tokens"] > 0 and row["engine_busy_s"] > 0
    tagged = rows["2 eps, variants, timely"]["per_variant_utility_of_max"]
    assert "base" not in tagged and len(tagged) >= 2  # agents on their variants
    assert rows["2 eps, base, timely"]["per_variant_utility_of_max"] == {}
