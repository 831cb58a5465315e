"""The PlanningService on the in-process vLLM engine (planner checkpoint, timely
policy, background thread, real clock): robots plan concurrently, every plan's
segments joined equal the task's golden LRTrace plan (greedy, unsegmented), segments
arrive in order, a cancelled task ends, and its KV is free."""

from __future__ import annotations

from typing import Any

from vllm_testkit import plan_with_service

ROBOTS = 12


def test_service_on_vllm_plans_equal_the_golden_plans(vllm_engine: Any) -> None:
    failures, stats = plan_with_service(vllm_engine, ROBOTS)
    assert not failures, "\n".join(failures)
    assert stats.succeeded == ROBOTS
    assert stats.segments_emitted > ROBOTS  # suspended and resumed on vLLM between segments
    memory = vllm_engine.memory()
    assert memory.device_blocks_free == memory.device_blocks_total
