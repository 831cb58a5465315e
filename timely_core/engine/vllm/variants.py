"""Fleet variants on vLLM: peft LoRA adapters served by vLLM's multi-LoRA.

Each loaded adapter becomes a `LoRARequest` that every request of its variant
carries, so vLLM batches base and variant rows in the same iterations (its
Punica-derived kernels) and keys the prefix cache by adapter. An adapter is checked
against the base model by the same reader the torch engine uses, so both engines
refuse the same folders with the same messages, before vLLM sees them.

At most `max_loras` adapters are loaded, and vLLM is built with one slot more that
stays empty: vLLM's CPU LoRA ops (`lora/ops/torch_ops`) select a row's slot with
index -1 for base-model rows, which wraps to the last slot; with that slot all
zeros, base rows batched with variant rows stay the base model's.

Memory: vLLM preallocates its slots of `max_lora_rank` in every LoRA'd layer when it
is built with LoRA, whatever is loaded; `resident_weights` counts those slots with
the base model's weights, and each adapter as the factors it holds.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from timely_core.engine.protocol import AdapterError, UnknownVariant
from timely_core.engine.torch.config import DTYPES
from timely_core.engine.torch.lora import load_adapter
from timely_core.engine.torch.model.config import ModelConfig
from timely_core.engine.variants import ResidentVariant, ResidentWeights
from timely_core.engine.vllm.config import VllmConfig


class VllmVariants:
    """The adapters one in-process vLLM engine serves, by variant name."""

    def __init__(self, llm: Any, model_path: Path, config: VllmConfig) -> None:
        self._llm = llm
        self._config = config
        self._model_path = model_path
        self._dtype = DTYPES[config.dtype]
        self._ids = itertools.count(1)  # vLLM's lora_int_id: positive, unique
        self.requests: dict[str, Any] = {}
        self.loaded: list[ResidentVariant] = []

    def load(self, name: str, path: str | Path) -> None:
        """Load `path` into vLLM as variant `name`; AdapterError naming what is wrong."""
        if self._config.max_loras == 0:
            raise AdapterError(
                f"adapter {name!r}: this vLLM engine was built without LoRA; set max_loras "
                "(how many variants vLLM batches at once) in the vllm engine's config"
            )
        if name in self.requests:
            raise AdapterError(f"variant {name!r} is already loaded")
        adapter = check_adapter(name, path, self._model_path, self._dtype)
        if adapter.rank > self._config.max_lora_rank:
            raise AdapterError(
                f"adapter {name!r} has rank r={adapter.rank}, above this engine's "
                f"max_lora_rank={self._config.max_lora_rank}"
            )
        if len(self.requests) >= self._config.max_loras:
            raise AdapterError(
                f"adapter {name!r}: this vLLM engine serves at most max_loras="
                f"{self._config.max_loras} variants ({', '.join(self.requests)} loaded)"
            )
        from vllm.lora.request import LoRARequest

        request = LoRARequest(name, next(self._ids), str(Path(path).resolve()))
        try:
            loaded = self._llm.add_lora(request)
        except Exception as exc:
            raise AdapterError(f"vLLM refused adapter {name!r} ({path}): {exc}") from exc
        if not loaded:
            raise AdapterError(f"vLLM refused adapter {name!r} ({path})")
        self.requests[name] = request
        self.loaded.append(ResidentVariant(name, "lora", adapter.nbytes, str(path)))

    def request(self, variant: str | None, what: str) -> Any:
        """The LoRARequest of `variant` (None for the base model), or UnknownVariant."""
        if variant is None:
            return None
        request = self.requests.get(variant)
        if request is None:
            raise unknown_variant(variant, self.requests, what)
        return request

    def resident_weights(self, model: torch.nn.Module | None) -> ResidentWeights:
        """The base model once (with vLLM's LoRA slots, counted from `model` when it is
        reachable), each adapter its factors, in load order."""
        base = self._checkpoint_bytes()
        if model is not None and self._config.max_loras:
            base += _lora_slot_bytes(model)
        return ResidentWeights(base, tuple(self.loaded))

    def _checkpoint_bytes(self) -> int:
        return checkpoint_bytes(self._model_path, self._dtype)


def unknown_variant(variant: str, loaded: Iterable[str], what: str) -> UnknownVariant:
    served = ", ".join(sorted(loaded)) or "none"
    return UnknownVariant(
        f"{what}: unknown variant {variant!r}; loaded variants: {served} "
        "(the base model is variant None)"
    )


def checkpoint_bytes(model_path: Path, dtype: torch.dtype) -> int:
    """The checkpoint's weights at `dtype` (what vLLM loads)."""
    element = torch.empty(0, dtype=dtype).element_size()
    total = 0
    for file in sorted(model_path.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as tensors:
            for key in tensors.keys():  # noqa: SIM118 (safe_open is not a mapping)
                total += _numel(tensors.get_slice(key).get_shape()) * element
    return total


def check_adapter(name: str, path: str | Path, model_path: Path, dtype: torch.dtype) -> Any:
    """The adapter in `path` read and checked against the base at `model_path` by the
    torch engine's reader (AdapterError naming what does not fit); its `LoraAdapter`."""
    base = ModelConfig.from_hf(json.loads((model_path / "config.json").read_text()))
    return load_adapter(name, path, base, dtype)


def _numel(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def _lora_slot_bytes(model: torch.nn.Module) -> int:
    """Bytes of the stacked LoRA A and B slots vLLM's LoRA layers preallocate."""
    total = 0
    for module in model.modules():
        for name in ("lora_a_stacked", "lora_b_stacked"):
            held = getattr(module, name, None)
            tensors = [held] if isinstance(held, torch.Tensor) else list(held or ())
            total += sum(t.numel() * t.element_size() for t in tensors)
    return total
