"""Mixed batches of LoRA variants: every generation's greedy output, in one batch with
the base and other variants, equals transformers' with its adapter merged."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_testkit import check_memory, drive, random_prompts, save_checkpoint
from lora_testkit import (
    PLANNER,
    VARIANTS,
    hf_merged_greedy,
    plan_jobs,
    planner_prompts,
    random_adapter,
)

from timely_core.engine.protocol import SamplingParams
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

NEW_TOKENS = 12
PARAMS = SamplingParams(max_tokens=NEW_TOKENS)
PLAN_TOKENS = 64
SHIPPED = ("warehouse-drone", "heavy-drone", "packing-arm")


def test_random_adapters_in_one_batch_match_hf_merged(tmp_path: Path) -> None:
    base = save_checkpoint(tmp_path / "base", "llama", seed=5)
    adapters = {f"v{i}": random_adapter(base, tmp_path / f"v{i}", seed=i) for i in range(3)}
    engine = TorchEngine(
        base, EngineConfig(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    )
    for name, path in adapters.items():
        engine.load_adapter(name, path)
    prompts = random_prompts(3, 8, 60)
    variants: list[str | None] = [None, "v0", "v1", "v2", "v0", None, "v2", "v1"]
    got = drive(engine, prompts, PARAMS, [0, 0, 0, 0, 1, 1, 3, 3], variants=list(variants))
    for prompt, variant, output in zip(prompts, variants, got, strict=True):
        adapter = adapters[variant] if variant else None
        assert output == hf_merged_greedy(base, adapter, prompt, NEW_TOKENS), variant
    # the adapters matter: the same prompt decodes differently under each
    same = prompts[0]
    outs = drive(engine, [same] * 4, PARAMS, variants=[None, "v0", "v1", "v2"])
    assert len({tuple(o) for o in outs}) == 4
    check_memory(engine)


REQUESTS = {
    "drone_move": ("drone", "visible: door, lamp", "Fly forward 450 cm, then turn left 90 degrees"),
    "drone_search": ("drone", "visible: door, rack", "Can you find my wallet?"),
    "arm_desk": (
        "arm",
        "on table: cup, pen, paper; places: tote, caddy, chute, rack",
        "Clean the desk",
    ),
}


@pytest.mark.slow
def test_shipped_variants_mixed_with_base_match_hf_merged() -> None:
    """The planner and its shipped fleet variants in one batch, each robot's prefix
    registered per variant: every plan equals transformers' with the adapter merged."""
    prefixes, prompts = planner_prompts(PLANNER, REQUESTS)
    engine = TorchEngine(PLANNER, EngineConfig(device_kv_bytes=2**25, host_kv_bytes=0))
    for name in SHIPPED:
        engine.load_adapter(name, VARIANTS / name)
    jobs: list[tuple[str, str | None]] = [
        ("drone_move", None),
        ("drone_move", "heavy-drone"),
        ("drone_search", "warehouse-drone"),
        ("drone_search", None),
        ("arm_desk", "packing-arm"),
        ("arm_desk", None),
    ]
    out = plan_jobs(engine, jobs, prefixes, prompts, PLAN_TOKENS)
    for i, (key, variant) in enumerate(jobs):
        adapter = VARIANTS / variant if variant else None
        reference = hf_merged_greedy(PLANNER, adapter, prompts[key], PLAN_TOKENS)
        assert prompts[key] + out[i] == reference, (key, variant)
    # the variants plan differently from the base on the same prompt
    assert out[0] != out[1] and out[2] != out[3] and out[4] != out[5]
    check_memory(engine)
