"""Policies by name, as callers select them (`PlanningService(policy="timely")`)."""

from __future__ import annotations

from collections.abc import Callable

from timely_core.errors import UnknownPolicy
from timely_core.scheduling.policies.base import Policy
from timely_core.scheduling.policies.edf import EdfPolicy
from timely_core.scheduling.policies.fcfs import FcfsPolicy
from timely_core.scheduling.policies.infercept import InferceptPolicy
from timely_core.scheduling.policies.lamps import LampsPolicy
from timely_core.scheduling.policies.segmented_fcfs import SegmentedFcfsPolicy
from timely_core.scheduling.policies.static_priority import StaticPriorityPolicy
from timely_core.scheduling.policies.stream import StreamPolicy
from timely_core.scheduling.policies.timely import TimelyPolicy
from timely_core.scheduling.policies.vllm_like import VllmLikePolicy
from timely_core.scheduling.priority import DEFAULT_MIN_SLACK_S

_FACTORIES: dict[str, Callable[[], Policy]] = {
    "timely": TimelyPolicy,
    "fcfs": FcfsPolicy,
    "stream": StreamPolicy,
    "segmented-fcfs": SegmentedFcfsPolicy,
    "edf": EdfPolicy,
    "priority": StaticPriorityPolicy,
    "lamps": LampsPolicy,
    "infercept": InferceptPolicy,
    "vllm-like": VllmLikePolicy,
}

POLICY_NAMES: tuple[str, ...] = tuple(_FACTORIES)


def make_policy(name: str, min_slack_s: float = DEFAULT_MIN_SLACK_S) -> Policy:
    """The policy called `name`; `min_slack_s` is the floor of Eq. 4's L (timely)."""
    if name == "timely":
        return TimelyPolicy(min_slack_s=min_slack_s)
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise UnknownPolicy(
            f"unknown policy {name!r}; choose one of: {', '.join(POLICY_NAMES)}"
        ) from None
    return factory()
