"""bench/adapter_shapes.py on one variant and shape, a few steps: the adapter is
trained by the variants command, scored, and loaded into the engine with its bytes
and whether its KV is the base's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from adapter_shapes import main  # noqa: E402


def test_a_last_layer_adapter_is_measured_and_writes_the_base_kv(tmp_path: Path) -> None:
    out = tmp_path / "shapes.json"
    assert main(["lab-arm", "--shapes", "last-r2,qvo-r4", "--steps", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["complete"]
    last, qvo = result["rows"]
    assert (last["shape"], last["engine_bytes"], last["base_kv"]) == ("last-r2", 23_040, True)
    assert (qvo["shape"], qvo["engine_bytes"], qvo["base_kv"]) == ("qvo-r4", 65_536, False)
    for row in result["rows"]:
        assert row["steps"] == 2 and 0 <= row["exact"] <= 60 and row["base_exact"] == 23
