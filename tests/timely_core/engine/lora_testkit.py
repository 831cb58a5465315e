"""LoRA helpers of the engine tests: random peft adapters, HF greedy with an adapter
merged (peft `merge_and_unload`), the shipped fleet variants."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch
from engine_testkit import hf_generate

from timely_core.engine.protocol import Engine, SamplingParams
from timely_core.engine.variants import VariantEngine

REPO = Path(__file__).resolve().parents[3]
PLANNER = REPO / "robot_models" / "checkpoints" / "planner"
VARIANTS = REPO / "robot_models" / "checkpoints" / "variants"
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def random_adapter(base: Path, out: Path, seed: int, rank: int = 4, alpha: int = 8) -> Path:
    """A peft LoRA adapter of `base` with random (not zero) B factors, saved to `out`."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=TARGETS, init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(str(out))
    return out


def hf_merged_greedy(
    base: Path, adapter: Path | None, prompt: list[int], max_new_tokens: int
) -> list[int]:
    """Prompt + greedy continuation from transformers with `adapter` merged (batch 1)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload().eval()
    return hf_generate(model, prompt, max_new_tokens)


def planner_prompts(
    planner: Path, requests: dict[str, tuple[str, str, str]]
) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Each robot type's prefix, and per request (robot, scene, task) its prompt,
    prefix + request, by the robot_models.prompts contract."""
    from tokenizers import Tokenizer

    from robot_models.prompts import format_request, prompt_prefix

    tokenizer = Tokenizer.from_file(str(planner / "tokenizer.json"))
    robots = {robot for robot, _, _ in requests.values()}
    prefixes = {r: tokenizer.encode(prompt_prefix(r)).ids for r in robots}
    prompts = {
        key: prefixes[robot] + tokenizer.encode(format_request(scene, task)).ids
        for key, (robot, scene, task) in requests.items()
    }
    return prefixes, prompts


def plan_jobs(
    engine: VariantEngine,
    jobs: list[tuple[str, str | None]],
    prefixes: dict[str, list[int]],
    prompts: dict[str, list[int]],
    max_tokens: int,
) -> dict[int, list[int]]:
    """Job i is (request key, variant); the key's robot (before `_`) prefix is
    registered once per variant, every job added at once and stepped together until
    all finish. Returns the generated ids per job."""
    for key, variant in dict.fromkeys(jobs):
        robot = key.split("_")[0]
        engine.register_prefix(f"{robot}@{variant}", prefixes[robot], variant=variant)
    params = SamplingParams(max_tokens=max_tokens)
    for i, (key, variant) in enumerate(jobs):
        robot = key.split("_")[0]
        engine.add(i, prompts[key], params, prefix_id=f"{robot}@{variant}", variant=variant)
    out: dict[int, list[int]] = {i: [] for i in range(len(jobs))}
    live = list(range(len(jobs)))
    while live:
        for o in cast(Engine, engine).step(live):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
    return out
