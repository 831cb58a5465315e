"""Helpers of the engine tests: tiny random-weight Llama/Qwen2 checkpoints saved in
HF format, HF greedy references, driver loops (`drive_to_end`: past generations
the engine fails on their own) and the memory invariant."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, cast

import torch

from timely_core.engine.protocol import (
    Engine,
    GenerationsFailed,
    HandlingStrategy,
    SamplingParams,
    StepOutput,
)
from timely_core.engine.torch.engine import TorchEngine
from timely_core.engine.variants import VariantEngine

VOCAB = 512
EOS = 3


def save_checkpoint(path: Path, kind: str, seed: int = 0, **overrides: Any) -> Path:
    """Build a random-weight GQA model with transformers and save it to `path`."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedModel,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    shape: dict[str, Any] = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=EOS,
        bos_token_id=1,
        initializer_range=0.08,
    )
    shape.update(overrides)
    torch.manual_seed(seed)
    model: PreTrainedModel
    if kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**shape))
        # random biases too, so a missing bias would change the output
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                torch.nn.init.normal_(proj.bias, std=0.1)
    else:
        model = LlamaForCausalLM(LlamaConfig(**shape))
    model.save_pretrained(path)
    return path


def hf_greedy(path: Path, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Prompt + greedy continuation from transformers' own `generate` (batch 1)."""
    from transformers import AutoModelForCausalLM

    model = _hf_models.get(path)
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        _hf_models[path] = model
    return hf_generate(model, prompt, max_new_tokens)


def hf_generate(model: Any, prompt: list[int], max_new_tokens: int) -> list[int]:
    """Prompt + greedy continuation from a transformers model's `generate` (batch 1)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: thread barriers cost more than they give
    try:
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([prompt]),
                attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=0,
            )
    finally:
        torch.set_num_threads(threads)
    return list(map(int, out[0].tolist()))


_hf_models: dict[Path, Any] = {}


def random_prompts(seed: int, count: int, max_len: int) -> list[list[int]]:
    """`count` prompts of 1..max_len-1 random non-special token ids."""
    rng = random.Random(seed)
    return [
        [rng.randrange(4, VOCAB) for _ in range(rng.randrange(1, max_len))] for _ in range(count)
    ]


def drive(
    engine: Engine,
    prompts: list[list[int]],
    params: SamplingParams,
    arrivals: list[int] | None = None,
    prefix_id: str | None = None,
    max_steps: int = 100_000,
    variants: list[str | None] | None = None,
) -> list[list[int]]:
    """Add prompt i at iteration arrivals[i] (with fleet variant variants[i], if
    given) and step everything live until all finish; returns prompt + generated ids
    per prompt (what HF generate returns)."""
    arrivals = arrivals or [0] * len(prompts)
    out = {i: list(p) for i, p in enumerate(prompts)}
    live: list[int] = []
    pending = sorted(range(len(prompts)), key=lambda i: arrivals[i])
    for iteration in range(max_steps):
        while pending and arrivals[pending[0]] <= iteration:
            i = pending.pop(0)
            variant = None if variants is None else variants[i]
            if variant is None:
                engine.add(i, prompts[i], params, prefix_id=prefix_id)
            else:
                cast(VariantEngine, engine).add(i, prompts[i], params, prefix_id, variant=variant)
            live.append(i)
        if not live and not pending:
            return [out[i] for i in range(len(prompts))]
        for o in engine.step(live):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
    raise AssertionError("generations did not finish")


def check_memory(engine: TorchEngine) -> None:
    """Blocks in use == distinct blocks held by live generations and pinned prefixes,
    each block's reference count == number of holders."""
    holders: dict[int, int] = {}
    for state in engine._gens.values():
        for index, block in enumerate(state.block_table):
            if index not in state.host_blocks:
                holders[block] = holders.get(block, 0) + 1
    for prefix in engine.blocks.prefixes.values():
        for block in prefix.blocks:
            holders[block] = holders.get(block, 0) + 1
    report = engine.memory()
    assert report.device_blocks_total - report.device_blocks_free == len(holders)
    for block, count in enumerate(engine.blocks.ref_counts):
        assert count == holders.get(block, 0), f"block {block}"
    host_used = sum(len(s.host_blocks) for s in engine._gens.values())
    assert report.host_blocks_total - report.host_blocks_free == host_used


def closed_from_an_open_name(
    engine: Any,
    gen_id: int,
    prompt: list[int],
    params: SamplingParams,
    statement: list[int],
    within: int | None = None,
) -> list[int]:
    """A grammar generation made to stand inside a quoted name (one token sampled,
    then rewritten to `statement`, e.g. `o('sastoooo`), then asked to close
    (`ClosingEngine.set_closing`, `within` tokens left): the ids it writes from
    there to its end."""
    engine.add(gen_id, prompt, params)
    assert not any(o.finished for o in engine.step([gen_id]))
    engine.suspend(gen_id, HandlingStrategy.DISCARD)
    engine.rewrite(gen_id, 0, statement)
    engine.resume(gen_id)
    engine.set_closing(gen_id, True, within)
    written: list[int] = []
    for _ in range(params.max_tokens):
        for out in engine.step([gen_id]):
            written.append(out.token_id)
            if out.finished:
                return written
    raise AssertionError(f"generation {gen_id} did not finish: {written}")


def drive_to_end(
    engine: Engine, gen_ids: list[int]
) -> tuple[dict[int, list[int]], list[GenerationsFailed]]:
    """Step `gen_ids` to their ends (bounded), as the service does: a failed step's
    outputs count as a step's, its failed generations leave the batch. The tokens
    of each, and each GenerationsFailed raised."""
    out: dict[int, list[int]] = {g: [] for g in gen_ids}
    raised: list[GenerationsFailed] = []
    live = list(gen_ids)
    for _ in range(10_000):
        if not live:
            return out, raised
        outputs: list[StepOutput]
        try:
            outputs = engine.step(live)
        except GenerationsFailed as exc:
            raised.append(exc)
            outputs = exc.outputs
            live = [g for g in live if g not in exc.failures]
        for o in outputs:
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
    raise AssertionError(f"generations {live} did not finish")
