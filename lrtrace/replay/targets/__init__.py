"""Replay targets by name: `sim`, `service`, `ros`."""

from __future__ import annotations

from pathlib import Path

from lrtrace.errors import LrtraceError
from lrtrace.replay.target import ReplayTarget


def make_target(
    kind: str,
    profile: str,
    model: Path | None,
    threads: int | None,
    network_latency_s: float,
    tokenizer: Path | None = None,
    prefix_cache: bool = True,
    handling_strategy: str | None = None,
) -> ReplayTarget:
    """`prefix_cache=False`: every prompt prefilled whole (`ServiceConfig.prefix_cache`;
    for `service` the engine's own content-hash cache is off too). `handling_strategy`:
    `ServiceConfig.handling_strategy` (None: its default)."""
    if kind == "sim":
        from lrtrace.replay.targets.sim import SimTarget

        return SimTarget.from_profile(
            profile,
            tokenizer,
            network_latency_s=network_latency_s,
            prefix_cache=prefix_cache,
            handling_strategy=handling_strategy,
        )
    if kind == "service":
        from lrtrace.replay.targets.service import ServiceTarget

        return ServiceTarget.from_checkpoint(
            model,
            threads,
            network_latency_s=network_latency_s,
            prefix_cache=prefix_cache,
            handling_strategy=handling_strategy,
        )
    if kind == "ros":
        from lrtrace.replay.targets.ros import RosTarget

        if not prefix_cache or handling_strategy is not None:
            raise LrtraceError(
                "--no-prefix-cache and --handling-strategy apply to the sim and service "
                "targets; a ROS 2 planner's are set where it runs"
            )

        return RosTarget.connect(network_latency_s=network_latency_s)
    raise LrtraceError(f"unknown replay target {kind!r}; choose sim, service or ros")
