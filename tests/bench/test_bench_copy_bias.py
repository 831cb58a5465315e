"""bench/copy_bias.py's rule for the default bias: the largest of the grid that keeps
the unbiased held-out exact count and every LRTrace plan exact; its recorded run
chose the service's default."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from copy_bias import RESULTS, chosen, main  # noqa: E402

from timely_core.service_config import ServiceConfig  # noqa: E402


def row(bias: float, heldout_exact: int, lrtrace_exact: int) -> dict[str, Any]:
    return {
        "bias": bias,
        "heldout": {"exact": heldout_exact, "plans": 300},
        "lrtrace": {"exact": lrtrace_exact, "plans": 11},
    }


def test_the_largest_bias_keeping_both_gates_is_chosen() -> None:
    rows = [row(0, 188, 11), row(4, 191, 11), row(8, 188, 11), row(12, 190, 10), row(16, 170, 11)]
    assert chosen(rows) == 8  # 12 loses an LRTrace plan, 16 held-out plans
    assert chosen([row(0, 188, 11), row(2, 187, 11)]) == 0  # nothing keeps them: no bias


def test_the_recorded_run_chose_the_services_default() -> None:
    recorded = json.loads(RESULTS.read_text())
    assert recorded["chosen"] == chosen(recorded["rows"]) == ServiceConfig().copy_bias


@pytest.mark.parametrize("biases", ["2,4", "0,-1", ""])
def test_a_grid_without_the_unbiased_baseline_is_refused(biases: str) -> None:
    with pytest.raises(SystemExit):
        main(["--biases", biases])
