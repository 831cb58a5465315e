"""Helpers of the vLLM engine tests: the planner's robot prompts, and a driver that
suspends and resumes generations on a schedule."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from timely_core.engine.protocol import Engine, HandlingStrategy, SamplingParams

PLANNER = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints" / "planner"


@cache
def robot_prompts() -> tuple[dict[str, list[int]], list[list[int]]]:
    """Each robot type's prompt prefix, and the LRTrace tasks' prompts (prefix + request)."""
    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.language import load_language
    from timely_core.engine.torch.loader import load_tokenizer

    tokenizer = load_tokenizer(PLANNER)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    prefixes = {r: encode(load_language(r).prompt_prefix()) for r in ("drone", "arm")}
    prompts = [
        prefixes[t.robot_type]
        + encode(load_language(t.robot_type).format_request(t.scene, t.instruction))
        for t in LRTRACE_TASKS
    ]
    return prefixes, prompts


def drive_segmented(
    engine: Engine,
    prompts: list[list[int]],
    params: SamplingParams,
    every: int,
    strategy: HandlingStrategy,
    pause: int = 1,
    first_id: int = 0,
) -> list[list[int]]:
    """Like engine_testkit.drive (all added at once), but each generation is suspended
    with `strategy` after every `every` tokens (a segment) and resumed `pause`
    iterations later; returns prompt + generated ids per prompt."""
    ids = list(range(first_id, first_id + len(prompts)))
    out = {g: list(p) for g, p in zip(ids, prompts, strict=True)}
    for g, p in zip(ids, prompts, strict=True):
        engine.add(g, p, params)
    live = list(ids)
    paused: dict[int, int] = {}  # gen -> iteration to resume at
    for iteration in range(100_000):
        for g, at in list(paused.items()):
            if at <= iteration:
                engine.resume(g)
                del paused[g]
                live.append(g)
        if not live and not paused:
            return [out[g] for g in ids]
        for o in engine.step(live):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
            elif (len(out[o.gen_id]) - len(prompts[o.gen_id - first_id])) % every == 0:
                engine.suspend(o.gen_id, strategy)
                live.remove(o.gen_id)
                paused[o.gen_id] = iteration + 1 + pause
    raise AssertionError("generations did not finish")
