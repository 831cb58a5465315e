"""Scheduling policies, selectable by name: timely, fcfs, stream, segmented-fcfs,
edf, priority; and LAMPS's call-waiting lamps, infercept, vllm-like."""

from timely_core.scheduling.policies.base import CallPolicy, DispatchMode, Policy
from timely_core.scheduling.policies.registry import POLICY_NAMES, make_policy

__all__ = ["POLICY_NAMES", "CallPolicy", "DispatchMode", "Policy", "make_policy"]
