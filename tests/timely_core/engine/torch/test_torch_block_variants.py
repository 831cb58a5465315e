"""Full fine-tunes as block variants in mixed batches: every generation's greedy
output, batched with the base, a LoRA variant and other full fine-tunes, equals
transformers' on its own checkpoint (the fine-tune's, or the base with the adapter
merged), through suspension, preemption and a registered prefix."""

from __future__ import annotations

from pathlib import Path

import pytest
from block_testkit import full_finetune
from engine_testkit import check_memory, drive, hf_greedy, random_prompts, save_checkpoint
from lora_testkit import (
    PLANNER,
    VARIANTS,
    hf_merged_greedy,
    plan_jobs,
    planner_prompts,
    random_adapter,
)

from timely_core.engine.protocol import HandlingStrategy, SamplingParams
from timely_core.engine.sequence import KvLocation
from timely_core.engine.torch.config import EngineConfig
from timely_core.engine.torch.engine import TorchEngine

NEW_TOKENS = 12
PARAMS = SamplingParams(max_tokens=NEW_TOKENS)
# two fine-tunes that both own layers.1.ffn (three weights for one block in one batch)
EARLY = {"embedding", "layers.0.input_norm", "layers.0.attention", "layers.1.ffn", "norm"}
LATE = {"layers.1.attention", "layers.1.post_attention_norm", "layers.1.ffn", "lm_head"}
REQUESTS = {
    "drone_move": ("drone", "visible: door, lamp", "Fly forward 450 cm, then turn left 90 degrees"),
    "drone_search": ("drone", "visible: door, rack", "Can you find my wallet?"),
    "arm_desk": ("arm", "on table: cup, pen, paper", "Clean the desk"),
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("block_fleet")
    base = save_checkpoint(root / "base", "llama", seed=11)
    return {
        "base": base,
        "lora": random_adapter(base, root / "lora", seed=3),
        "early": full_finetune(base, root / "early", seed=1, blocks=EARLY),
        "late": full_finetune(base, root / "late", seed=2, blocks=LATE),
    }


def _engine(fleet: dict[str, Path], **config: object) -> TorchEngine:
    settings: dict[str, object] = dict(block_size=8, device_kv_bytes=2**22, host_kv_bytes=2**22)
    settings.update(config)
    engine = TorchEngine(fleet["base"], EngineConfig.model_validate(settings))
    for name in ("lora", "early", "late"):
        engine.load_adapter(name, fleet[name])
    return engine


def _reference(fleet: dict[str, Path], variant: str | None, prompt: list[int], n: int) -> list[int]:
    if variant == "lora":
        return hf_merged_greedy(fleet["base"], fleet["lora"], prompt, n)
    return hf_greedy(fleet[variant or "base"], prompt, n)


def test_mixed_batch_matches_hf_on_each_checkpoint(fleet: dict[str, Path]) -> None:
    engine = _engine(fleet)
    assert {v.name: v.kind for v in engine.resident_weights().variants} == {
        "lora": "lora",
        "early": "blocks",
        "late": "blocks",
    }
    prompts = random_prompts(21, 9, 50)
    variants: list[str | None] = [
        None,
        "late",
        "lora",
        "early",
        "late",
        None,
        "early",
        "lora",
        "late",
    ]
    arrivals = [0, 0, 0, 0, 1, 2, 2, 4, 5]  # prefills of some beside decodes of others
    got = drive(engine, prompts, PARAMS, arrivals, variants=variants)
    for prompt, variant, output in zip(prompts, variants, got, strict=True):
        assert output == _reference(fleet, variant, prompt, NEW_TOKENS), variant
    # a batch of one fine-tune's rows only runs its blocks over the whole batch
    alone = drive(engine, prompts[:3], PARAMS, [0, 0, 1], variants=["late"] * 3)
    for prompt, output in zip(prompts[:3], alone, strict=True):
        assert output == _reference(fleet, "late", prompt, NEW_TOKENS)
    # the fine-tunes matter: one prompt decodes four ways
    outs = drive(engine, [prompts[0]] * 4, PARAMS, variants=[None, "lora", "early", "late"])
    assert len({tuple(o) for o in outs}) == 4
    check_memory(engine)


def test_suspended_and_preempted_block_variants_resume_exactly(fleet: dict[str, Path]) -> None:
    """Swapped and discarded KV of a fine-tune comes back as its own: a swap-in copies
    it, a recompute (a discard, and preemption under a tight KV budget) runs the
    fine-tune's blocks again."""
    tight = 12 * TorchEngine(fleet["base"], EngineConfig(block_size=8)).bytes_per_block
    engine = _engine(fleet, device_kv_bytes=tight, preemption_strategy=HandlingStrategy.DISCARD)
    prompts = random_prompts(33, 4, 30)
    variants: list[str | None] = ["late", "early", None, "lora"]
    for i, (prompt, variant) in enumerate(zip(prompts, variants, strict=True)):
        engine.add(i, prompt, PARAMS, variant=variant)
    out: dict[int, list[int]] = {i: [] for i in range(4)}
    left_device: set[int] = set()
    live = [0, 1, 2, 3]
    for iteration in range(400):
        if iteration == 3:
            engine.suspend(0, HandlingStrategy.SWAP)
            engine.suspend(1, HandlingStrategy.DISCARD)
            live = [2, 3]
        if iteration == 6:
            engine.resume(0)
            engine.resume(1)
            live = sorted({*live, 0, 1})
        for o in engine.step(live):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
        left_device |= {i for i in live if engine.generation(i).kv is not KvLocation.DEVICE}
        if not live and iteration > 6:
            break
    assert left_device, "the tight budget preempted no generation"
    for i, (prompt, variant) in enumerate(zip(prompts, variants, strict=True)):
        assert prompt + out[i] == _reference(fleet, variant, prompt, NEW_TOKENS), variant
    check_memory(engine)


@pytest.mark.slow
def test_shipped_full_finetune_mixed_with_lora_and_base_matches_hf() -> None:
    """The planner, its warehouse LoRA and its warehouse full fine-tune in one batch,
    each robot's prefix registered per variant: every plan equals transformers' on its
    own checkpoint."""
    prefixes, prompts = planner_prompts(PLANNER, REQUESTS)
    engine = TorchEngine(PLANNER, EngineConfig(device_kv_bytes=2**25, host_kv_bytes=0))
    engine.load_adapter("warehouse-drone", VARIANTS / "warehouse-drone")
    full = engine.load_adapter("warehouse-drone-full", VARIANTS / "warehouse-drone-full")
    assert full.nbytes < engine.model.weights_nbytes / 2
    jobs: list[tuple[str, str | None]] = [
        ("drone_search", "warehouse-drone-full"),
        ("drone_search", None),
        ("drone_move", "warehouse-drone-full"),
        ("drone_search", "warehouse-drone"),
        ("arm_desk", None),
    ]
    tokens = 48
    out = plan_jobs(engine, jobs, prefixes, prompts, tokens)
    for i, (key, variant) in enumerate(jobs):
        if variant == "warehouse-drone":
            reference = hf_merged_greedy(PLANNER, VARIANTS / variant, prompts[key], tokens)
        else:
            path = VARIANTS / variant if variant else PLANNER
            reference = hf_greedy(path, prompts[key], tokens)
        assert prompts[key] + out[i] == reference, (key, variant)
    assert out[0] != out[1]  # the full fine-tune plans otherwise than the base
    check_memory(engine)
