"""Robots' fleet variants: each robot may plan with a variant of the base model (a
LoRA adapter the engine loaded); every generation and stored prefix of the robot
runs with it. Engines that serve the base only are called exactly as before."""

from __future__ import annotations

from typing import Any, cast

from timely_core.engine.protocol import Engine, SamplingParams
from timely_core.engine.variants import ResidentWeights, VariantEngine
from timely_core.errors import VariantUnavailable


def check_variant(engine: Any, robot_id: str, variant: str | None) -> None:
    """Raise VariantUnavailable when `variant` is not one `engine` serves: an engine
    without variants never stands in its base model for a named variant."""
    if variant is None:
        return
    if not isinstance(variant, str) or not variant:
        raise VariantUnavailable(f"robot {robot_id!r}: variant must be a non-empty name or None")
    if not isinstance(engine, VariantEngine):
        raise VariantUnavailable(
            f"robot {robot_id!r}: variant {variant!r} cannot be served: the "
            f"{type(engine).__name__} engine serves the base model only (fleet variants "
            "run on the torch, vllm and vllm-server engines)"
        )
    loaded = engine.resident_weights().names()
    if variant not in loaded:
        raise VariantUnavailable(
            f"robot {robot_id!r}: variant {variant!r} is not loaded in the engine "
            f"(loaded: {', '.join(loaded) or 'none'}); load its adapter first"
        )


def add_generation(
    engine: Engine,
    gen_id: int,
    prompt_ids: list[int],
    params: SamplingParams,
    prefix_id: str | None,
    variant: str | None,
) -> None:
    """`engine.add`, naming the variant only when there is one: engines without
    variants are called as the `Engine` protocol says."""
    if variant is None:
        engine.add(gen_id, prompt_ids, params, prefix_id)
    else:
        cast(VariantEngine, engine).add(gen_id, prompt_ids, params, prefix_id, variant=variant)


def register_variant_prefix(
    engine: Engine, prefix_id: str, token_ids: list[int], variant: str | None
) -> None:
    """`engine.register_prefix` holding `variant`'s KV (named only when there is one)."""
    if variant is None:
        engine.register_prefix(prefix_id, token_ids)
    else:
        cast(VariantEngine, engine).register_prefix(prefix_id, token_ids, variant=variant)


def resident_weights(engine: Any) -> ResidentWeights | None:
    """The engine's resident weights, or None when it does not report them."""
    return engine.resident_weights() if isinstance(engine, VariantEngine) else None
