"""bench/zoo_serving.py end to end with one round: the zoo serves the shipped fleet
with the folders' bytes and plans, and holds a block two fine-tunes share once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from zoo_serving import main  # noqa: E402


def test_one_round_serves_the_fleet_from_the_zoo_as_from_its_folders(tmp_path: Path) -> None:
    out = tmp_path / "zoo_serving.json"
    assert main(["--rounds", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(result["variants"]) == 8
    fleet, two = result["fleet"], result["two_finetunes"]
    assert fleet["zoo"] == fleet["folders"]
    assert two["zoo"]["total_bytes"] < two["folders"]["total_bytes"]
    second = two["zoo"]["variant_bytes"]["warehouse-drone-full-b"]
    assert 0 < second < two["folders"]["variant_bytes"]["warehouse-drone-full-b"]
    assert all(row["equal"] for row in result["plans"].values())
    assert result["zoo"]["stored_bytes"] < result["zoo"]["folders_bytes"]
