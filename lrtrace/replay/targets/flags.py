"""Which `lrtrace replay` flags act on which target.

A flag the chosen target ignores (`--threads` with the simulator, which runs no torch)
would let a user believe a setting was applied that was not, so it is refused, naming
the flag and the target, before any target is built. A flag left at its default is
never refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from lrtrace.errors import LrtraceError

APPLIES_TO: Final[dict[str, tuple[str, ...]]] = {
    "--model": ("service",),  # the checkpoint the real engine loads
    "--threads": ("service",),  # torch threads of the real engine
    "--tokenizer": ("sim",),  # the service's is the checkpoint's own
    "--profile": ("sim",),  # the latency profile of the simulated engine
    "--max-batch": ("sim", "service"),  # a ROS 2 planner's is its planner config
}
"""Flag -> the targets it acts on. The KV flags (--no-prefix-cache, --handling-strategy,
--kv-prefetch) are refused for `ros` by `make_target` itself."""


def refuse_ignored(target: str, given: Iterable[str]) -> None:
    """Raise LrtraceError for the first of the `given` flags (those set to a value
    other than their default) that `target` would ignore."""
    for flag in given:
        targets = APPLIES_TO.get(flag, (target,))
        if target not in targets:
            raise LrtraceError(
                f"{flag} has no effect with --target {target}: it applies to "
                f"--target {' and '.join(targets)} only"
            )
