"""The drone loads the real-engine benches replay: WID 1 and 2 of Table 3 at another
rate and duration, the rest of each preset kept; a bad rate is refused by name."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from lrtrace.drone_loads import drone_loads
from lrtrace.workload import WorkloadSpec


def test_wid1_and_wid2_at_another_rate_and_duration() -> None:
    # Table 3's tasks per event and agents, the drones' traces, the rate and duration given
    expected = {
        key: WorkloadSpec(
            name=f"WID{key[-1]}-like {level} load (vLLM-CPU)",
            eps=24.0,
            max_tpe=max_tpe,
            trace_ids=tuple(range(1, 9)),
            agents=agents,
            duration_s=12.0,
        )
        for key, level, max_tpe, agents in (("wid1", "low", 8, 25), ("wid2", "high", 16, 42))
    }
    assert drone_loads(12.0, 24.0, "vLLM-CPU") == expected


def test_a_bad_rate_or_duration_is_named() -> None:
    with pytest.raises(ValidationError, match="eps"):
        drone_loads(12.0, 0.0, "CPU")
    with pytest.raises(ValidationError, match="duration_s"):
        drone_loads(-1.0, 18.0, "CPU")
