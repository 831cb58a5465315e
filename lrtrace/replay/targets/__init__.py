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
) -> ReplayTarget:
    if kind == "sim":
        from lrtrace.replay.targets.sim import SimTarget

        return SimTarget.from_profile(profile, tokenizer, network_latency_s=network_latency_s)
    if kind == "service":
        from lrtrace.replay.targets.service import ServiceTarget

        return ServiceTarget.from_checkpoint(model, threads, network_latency_s=network_latency_s)
    if kind == "ros":
        from lrtrace.replay.targets.ros import RosTarget

        return RosTarget.connect(network_latency_s=network_latency_s)
    raise LrtraceError(f"unknown replay target {kind!r}; choose sim, service or ros")
