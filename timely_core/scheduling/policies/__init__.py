"""Scheduling policies, selectable by name: timely, fcfs, stream, segmented-fcfs,
edf, priority."""

from timely_core.scheduling.policies.base import DispatchMode, Policy
from timely_core.scheduling.policies.registry import POLICY_NAMES, make_policy

__all__ = ["POLICY_NAMES", "DispatchMode", "Policy", "make_policy"]
