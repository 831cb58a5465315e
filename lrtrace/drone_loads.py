"""The paper's drone workloads (WID 1 and 2, Table 3) at another event rate and
duration: the rate at which a real engine on a given machine contends, where the
paper's 0.25 events/s would leave a small planner idle. Both keep the paper's
relation of WID 1 to WID 2 (the same rate; up to 8 tasks per event on 25 agents vs up
to 16 on 42), taken from the presets so the two cannot drift apart. The real-engine
benches (bench/lrtrace_paper.py --real, bench/lrtrace_vllm.py) replay these.
"""

from __future__ import annotations

from lrtrace.workload import WorkloadSpec, preset

_LOADS = {"wid1": (1, "low"), "wid2": (2, "high")}


def drone_loads(duration_s: float, eps: float, label: str) -> dict[str, WorkloadSpec]:
    """WID 1 and 2 ("wid1", "wid2") at `eps` events/s for `duration_s` s, named
    "WID1-like low load (<label>)" and so on; a bad rate or duration is refused by
    `WorkloadSpec`'s validation, naming the field."""
    return {
        key: WorkloadSpec.model_validate(
            preset(wid).model_dump()
            | {
                "name": f"WID{wid}-like {level} load ({label})",
                "eps": eps,
                "duration_s": duration_s,
            }
        )
        for key, (wid, level) in _LOADS.items()
    }
