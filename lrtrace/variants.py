"""Fleet variants in a trace: which fine-tune each agent plans with.

`lrtrace compose --variants drone=heavy-drone,warehouse-drone` gives a robot type's
agents those variants in turn (drone1 the first, drone2 the second, drone3 the first
again); `base` in the list is the base model. The `service` target loads the
variants the trace's agents name (from the shipped variant folders, another folder
of them, or a block zoo) and registers each agent on its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from lrtrace.errors import LrtraceError
from lrtrace.trace_format import VARIANT_PATTERN, Agent, TraceFile

BASE = "base"  # in --variants: the base model (a trace stores "" for it)


def parse_variants(flags: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """`TYPE=NAME[,NAME...]` flags -> robot type -> variant names ("" for `base`)."""
    by_type: dict[str, tuple[str, ...]] = {}
    for flag in flags:
        robot_type, sep, names_text = flag.partition("=")
        names = [n.strip() for n in names_text.split(",")]
        if not sep or not robot_type.strip() or not all(names):
            raise LrtraceError(
                f"--variants {flag!r}: give TYPE=NAME[,NAME...], e.g. drone=heavy-drone,base"
            )
        robot_type = robot_type.strip()
        if robot_type in by_type:
            raise LrtraceError(f"--variants: robot type {robot_type!r} is given twice")
        for name in names:
            if name != BASE and not re.match(VARIANT_PATTERN, name):
                raise LrtraceError(
                    f"--variants {flag!r}: variant name {name!r}: a letter, then letters, "
                    "digits, '_', '.' or '-' (at most 64)"
                )
        by_type[robot_type] = tuple("" if n == BASE else n for n in names)
    return by_type


def with_variants(trace: TraceFile, by_type: dict[str, tuple[str, ...]]) -> TraceFile:
    """The trace with each listed type's agents given its variants in turn."""
    types = sorted({a.robot_type for a in trace.agents})
    for robot_type in by_type:
        if robot_type not in types:
            raise LrtraceError(
                f"--variants: the trace has no {robot_type} agents (its robot types: "
                f"{', '.join(types)})"
            )
    seen: dict[str, int] = {}
    agents: list[Agent] = []
    for agent in trace.agents:
        names = by_type.get(agent.robot_type)
        index = seen.get(agent.robot_type, 0)
        seen[agent.robot_type] = index + 1
        variant = names[index % len(names)] if names else agent.variant
        agents.append(agent.model_copy(update={"variant": variant}))
    return trace.model_copy(update={"agents": tuple(agents)})


def trace_variants(trace: TraceFile) -> list[str]:
    """The variants the trace's agents name, in first-use order."""
    return list(dict.fromkeys(a.variant for a in trace.agents if a.variant))


def variant_counts(agents: Sequence[Agent]) -> str:
    """`drone: heavy-drone x2, base x2` for the compose summary."""
    parts = []
    for robot_type in sorted({a.robot_type for a in agents}):
        counts: dict[str, int] = {}
        for agent in agents:
            if agent.robot_type == robot_type:
                name = agent.variant or BASE
                counts[name] = counts.get(name, 0) + 1
        parts.append(f"{robot_type}: " + ", ".join(f"{n} x{c}" for n, c in counts.items()))
    return "; ".join(parts)
