"""Replay targets by name: `sim`, `service`, `ros`."""

from __future__ import annotations

from pathlib import Path

from lrtrace.errors import LrtraceError
from lrtrace.replay.target import ReplayTarget
from lrtrace.replay.targets.common import ReplayServiceOptions
from lrtrace.replay.targets.variant_source import VariantSource


def make_target(
    kind: str,
    profile: str,
    model: Path | None,
    threads: int | None,
    network_latency_s: float,
    tokenizer: Path | None = None,
    options: ReplayServiceOptions | None = None,
    variants: VariantSource | None = None,
) -> ReplayTarget:
    """`options`: the replay service's prefix cache, KV handling strategy and KV
    prefetch (default: the service's own; without the prefix cache the `service`
    target's engine content-hash cache is off too). `variants`: where the `service`
    target loads the trace's fleet variants (default: the shipped ones)."""
    options = options or ReplayServiceOptions()
    if kind == "sim":
        from lrtrace.replay.targets.sim import SimTarget

        return SimTarget.from_profile(
            profile,
            tokenizer,
            network_latency_s=network_latency_s,
            options=options,
        )
    if kind == "service":
        from lrtrace.replay.targets.service import ServiceTarget

        return ServiceTarget.from_checkpoint(
            model,
            threads,
            network_latency_s=network_latency_s,
            options=options,
            variants=variants,
        )
    if kind == "ros":
        from lrtrace.replay.targets.ros import RosTarget

        changed = options.changed()
        if changed:
            verb = "applies" if len(changed) == 1 else "apply"
            raise LrtraceError(
                f"{', '.join(changed)} {verb} to the sim and service targets only; "
                "a ROS 2 planner's KV settings are set where it runs (its planner config)"
            )

        return RosTarget.connect(network_latency_s=network_latency_s)
    raise LrtraceError(f"unknown replay target {kind!r}; choose sim, service or ros")
