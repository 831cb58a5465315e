"""bench/fleet_variants.py's variant set: the shipped LoRA adapters and full
fine-tunes, padded with random adapters only beyond them."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from fleet_variants import variant_adapters  # noqa: E402

from robot_models.variants.spec import VARIANTS_DIR, load_fleet  # noqa: E402


def test_eight_shipped_variants_need_no_random_padding(tmp_path: Path) -> None:
    adapters = variant_adapters(8, tmp_path, full_tunes=True)
    assert list(adapters) == [*load_fleet(), "warehouse-drone-full"]
    assert adapters["warehouse-drone-full"] == VARIANTS_DIR / "warehouse-drone-full"
    assert not list(tmp_path.iterdir())  # nothing random written


def test_random_adapters_pad_beyond_the_shipped_ones(tmp_path: Path) -> None:
    adapters = variant_adapters(4, tmp_path, robot_type="arm")
    shipped = [n for n, s in load_fleet().items() if s.robot_type == "arm"]
    assert len(shipped) == 3
    assert list(adapters) == [*shipped, "random-0"]
    assert (adapters["random-0"] / "adapter_model.safetensors").is_file()
