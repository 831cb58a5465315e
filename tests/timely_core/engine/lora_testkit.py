"""LoRA helpers of the engine tests: random peft adapters, HF greedy with an adapter
merged (peft `merge_and_unload`), the shipped fleet variants."""

from __future__ import annotations

from pathlib import Path

import torch
from engine_testkit import hf_generate

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
