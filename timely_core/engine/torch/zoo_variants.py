"""Fleet variants read from the engine's block zoo (BlockLLM): a LoRA adapter's
factors, or a full fine-tune whose blocks are compared with the base's by content
hash. A block the zoo's logit-lens sharing pointed at the base's is the base's
tensors, and a block two variants hold with the same content is held once
(`HeldBlocks`), so what the zoo stores once the engine holds once."""

from __future__ import annotations

import torch

from timely_core.engine.protocol import AdapterError
from timely_core.engine.torch.block_variants import (
    LAYER_BLOCKS,
    TOP_BLOCKS,
    BlockVariant,
    check_config,
    check_tensor_shapes,
    layer_block,
)
from timely_core.engine.torch.loader import CheckpointError, build_layer, read_model_config
from timely_core.engine.torch.lora import (
    LoraAdapter,
    adapter_from,
    check_adapter_name,
    read_adapter_config,
)
from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.torch.model.llama import LayerWeights, ModelWeights
from timely_core.engine.torch.zoo_model import ZooModel

# (block name, content hash) -> the engine's tensors of that block, in its fields' order
HeldBlocks = dict[tuple[str, str], list[torch.Tensor | None]]


def load_zoo_lora(
    name: str, variant: ZooModel, base: ZooModel, cfg: ModelConfig, dtype: torch.dtype
) -> LoraAdapter:
    """The zoo's LoRA adapter `variant` as engine variant `name`; AdapterError when it
    adapts another zoo variant than the served base, or does not fit its shapes."""
    check_adapter_name(name)
    where = f"adapter {name!r} ({variant.label})"
    if variant.manifest.base != base.name:
        raise AdapterError(
            f"{where}: adapts zoo variant {variant.manifest.base!r}, the engine serves "
            f"{base.name!r}"
        )
    try:
        config_file = variant.required_file("adapter_config.json")
        tensors = variant.tensors()
    except CheckpointError as err:
        raise AdapterError(f"{where}: {err}") from None
    config = read_adapter_config(config_file, where)
    return adapter_from(name, variant.source, config, tensors, cfg, dtype, where)


def load_zoo_block_variant(
    name: str,
    variant: ZooModel,
    base: ZooModel,
    base_cfg: ModelConfig,
    base_weights: ModelWeights,
    dtype: torch.dtype,
    held: HeldBlocks,
) -> BlockVariant:
    """The zoo's full fine-tune `variant` as engine variant `name`: a block whose hash
    is the base's is the base's tensors, one another variant already holds (in
    `held`, which this adds to) is those, only the others are read. AdapterError
    naming what does not fit."""
    check_adapter_name(name)
    where = f"variant {name!r} ({variant.label})"
    try:
        cfg = read_model_config(variant.required_file("config.json"), where)
    except CheckpointError as err:
        raise AdapterError(f"{where}: {err}") from None
    check_config(cfg, base_cfg, where)
    shapes = {t: tuple(ref.shape) for t, ref in variant.manifest.tensors.items()}
    check_tensor_shapes(shapes, cfg, where)
    ours, theirs = _chain(variant, cfg), _chain(base, base_cfg)
    owned = {block for block, digest in ours.items() if theirs.get(block) != digest}
    if not owned:
        raise AdapterError(
            f"{where}: every block is the base model's (shared by content or by the "
            "logit-lens test); a robot that plans with the base names no variant"
        )
    try:
        weights = _assemble(variant, cfg, ours, owned, base_weights, dtype, held)
    except CheckpointError as err:
        raise AdapterError(f"{where}: {err}") from None
    return BlockVariant(name, variant.source, weights, frozenset(owned))


def _chain(model: ZooModel, cfg: ModelConfig) -> dict[str, str]:
    """Block -> hash, the output layer's being the embedding's when they are tied."""
    hashes = model.block_hashes()
    if _tied(model, cfg):
        hashes["lm_head"] = hashes["embedding"]
    return hashes


def _assemble(
    variant: ZooModel,
    cfg: ModelConfig,
    hashes: dict[str, str],
    owned: set[str],
    base: ModelWeights,
    dtype: torch.dtype,
    held: HeldBlocks,
) -> ModelWeights:
    layers = []
    for i, base_layer in enumerate(base.layers):
        units = [u for u in LAYER_BLOCKS if layer_block(i, u) in owned]
        if not units:
            layers.append(base_layer)
            continue
        fresh = [u for u in units if (layer_block(i, u), hashes[layer_block(i, u)]) not in held]
        built = None
        if fresh:  # the layer's blocks read whole: the loader builds a layer at a time
            tensors = variant.tensors(layer_block(i, u) for u in LAYER_BLOCKS)
            built = build_layer(tensors, cfg, i, dtype, variant.source)
        fields: dict[str, torch.Tensor | None] = {}
        for unit, names in LAYER_BLOCKS.items():
            block = layer_block(i, unit)
            if unit not in units:
                fields.update((n, getattr(base_layer, n)) for n in names)
                continue
            key = (block, hashes[block])
            if key not in held:
                held[key] = [getattr(built, n) for n in names]
            fields.update(zip(names, held[key], strict=True))
        layers.append(LayerWeights(**fields))  # type: ignore[arg-type]
    top = {field: getattr(base, field) for field in TOP_BLOCKS.values()}
    for block, field in TOP_BLOCKS.items():
        if block not in owned:
            continue
        key = (block, hashes[block])
        if key not in held:
            held[key] = [_top_tensor(variant, cfg, block, dtype)]
        top[field] = held[key][0]
    return ModelWeights(layers=layers, **top)


def _top_tensor(
    variant: ZooModel, cfg: ModelConfig, block: str, dtype: torch.dtype
) -> torch.Tensor:
    """The embedding ([vocab, hidden]), final norm, or output layer ([hidden, vocab],
    the embedding's transpose when tied) in the engine's dtype."""
    source = "embedding" if block == "lm_head" and _tied(variant, cfg) else block
    (tensor,) = variant.tensors([source]).values()
    tensor = tensor.to(dtype, copy=True)
    return tensor.t().contiguous() if block == "lm_head" else tensor.contiguous()


def _tied(variant: ZooModel, cfg: ModelConfig) -> bool:
    return cfg.tie_word_embeddings or "lm_head" not in variant.block_hashes()
