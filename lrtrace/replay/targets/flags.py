"""Which `lrtrace replay` flags act on which target, and on which policy.

A flag the chosen target ignores (`--threads` with the simulator, which runs no torch)
would let a user believe a setting was applied that was not, so it is refused, naming
the flag and the target, before any target is built. A flag not given is never
refused (given with its default's value, it is: the user asked for something).
So is `--handling-strategy` when every policy of the replay brings its own (lamps,
infercept, vllm-like); with some that do and some that do not, a note says which
ignore it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from lrtrace.errors import LrtraceError

APPLIES_TO: Final[dict[str, tuple[str, ...]]] = {
    "--model": ("service",),  # the checkpoint the real engine loads
    "--threads": ("service",),  # torch threads of the real engine
    "--tokenizer": ("sim",),  # the service's is the checkpoint's own
    "--profile": ("sim",),  # the latency profile of the simulated engine
    "--max-batch": ("sim", "service"),  # a ROS 2 planner's is its planner config
    "--variants-dir": ("service",),  # where the trace's fleet variants are loaded from
    "--zoo": ("service",),  # a block zoo: the base model and the variants
    "--zoo-base": ("service",),
}
"""Flag -> the targets it acts on. The KV flags (--no-prefix-cache, --handling-strategy,
--kv-prefetch) are refused for `ros` by `make_target` itself."""


def refuse_ignored(target: str, given: Iterable[str]) -> None:
    """Raise LrtraceError for the first of the `given` flags (those on the command
    line) that `target` would ignore."""
    for flag in given:
        targets = APPLIES_TO.get(flag, (target,))
        if target not in targets:
            raise LrtraceError(
                f"{flag} has no effect with --target {target}: it applies to "
                f"--target {' and '.join(targets)} only"
            )


def strategy_ignored_by(policies: Sequence[str], strategy: str | None) -> str | None:
    """With `--handling-strategy` given: LrtraceError if every policy brings its own
    strategy (the flag would change nothing), else a note naming those that ignore it
    (None when none does, or the flag is not given)."""
    from timely_core.scheduling.policies.base import CallPolicy
    from timely_core.scheduling.policies.registry import make_policy

    if strategy is None:
        return None
    own = [p for p in policies if isinstance(make_policy(p), CallPolicy)]
    if not own:
        return None
    if len(own) == len(policies):
        raise LrtraceError(
            f"--handling-strategy has no effect with --policy {','.join(own)}: lamps, "
            "infercept and vllm-like bring their own"
        )
    others = [p for p in policies if p not in own]
    theirs = "brings its" if len(own) == 1 else "bring their"
    return (
        f"--handling-strategy {strategy} applies to {', '.join(others)} only; "
        f"{', '.join(own)} {theirs} own"
    )
