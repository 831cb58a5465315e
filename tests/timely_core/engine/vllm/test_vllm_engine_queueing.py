"""vLLM's own queue behind the in-process engine (`max_requests` above `max_num_seqs`):
a step may list more generations than vLLM runs, vLLM queues the rest by its
`scheduling_policy` (fcfs: arrival order, the ranking ignored; priority: the
ranking), and every generation still completes."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import ValidationError
from vllm_testkit import robot_prompts

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.vllm.config import VllmConfig

TOKENS = 6


def run_queued(planner: Path, policy: Literal["fcfs", "priority"]) -> list[int]:
    """Four generations added in id order 0-3 on an engine that runs two at a time,
    ranked 3, 2, 1, 0; returns the ids in the order their first token came."""
    from timely_core.engine.vllm.engine import VllmEngine

    engine = VllmEngine(
        planner, VllmConfig(max_num_seqs=2, max_requests=4, scheduling_policy=policy)
    )
    try:
        assert engine.max_generations == 4
        assert engine.llm.vllm_config.scheduler_config.policy == policy  # vLLM's own
        _, prompts = robot_prompts()
        engine.set_ranking([3, 2, 1, 0])
        for gen_id in range(4):
            engine.add(gen_id, prompts[gen_id], SamplingParams(max_tokens=TOKENS))
        live, first, produced = [0, 1, 2, 3], [], dict.fromkeys(range(4), 0)
        for _ in range(1000):
            if not live:
                break
            for out in engine.step(list(live)):  # all listed; vLLM runs two
                if produced[out.gen_id] == 0:
                    first.append(out.gen_id)
                produced[out.gen_id] += 1
                if out.finished:
                    live.remove(out.gen_id)
        assert produced == dict.fromkeys(range(4), TOKENS)
        return first
    finally:
        engine.close()


def test_vllm_fcfs_queues_in_arrival_order_whatever_the_ranking(planner: Path) -> None:
    first = run_queued(planner, "fcfs")
    assert set(first[:2]) == {0, 1}
    assert set(first[2:]) == {2, 3}


def test_vllm_priority_queues_by_the_ranking(planner: Path) -> None:
    first = run_queued(planner, "priority")
    assert set(first[:2]) == {3, 2}
    assert set(first[2:]) == {0, 1}


def test_max_requests_below_max_num_seqs_is_refused() -> None:
    with pytest.raises(ValidationError, match="max_requests=2 is less than max_num_seqs=4"):
        VllmConfig(max_num_seqs=4, max_requests=2)
