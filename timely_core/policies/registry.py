"""Policies by name, as callers select them (`PlanningService(policy="timely")`)."""

from __future__ import annotations

from collections.abc import Callable

from timely_core.errors import UnknownPolicy
from timely_core.policies.base import Policy
from timely_core.policies.edf import EdfPolicy
from timely_core.policies.fcfs import FcfsPolicy
from timely_core.policies.segmented_fcfs import SegmentedFcfsPolicy
from timely_core.policies.static_priority import StaticPriorityPolicy
from timely_core.policies.stream import StreamPolicy
from timely_core.policies.timely import TimelyPolicy

_FACTORIES: dict[str, Callable[[], Policy]] = {
    "timely": TimelyPolicy,
    "fcfs": FcfsPolicy,
    "stream": StreamPolicy,
    "segmented-fcfs": SegmentedFcfsPolicy,
    "edf": EdfPolicy,
    "priority": StaticPriorityPolicy,
}

POLICY_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def make_policy(name: str) -> Policy:
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise UnknownPolicy(
            f"unknown policy {name!r}; choose one of: {', '.join(POLICY_NAMES)}"
        ) from None
    return factory()
