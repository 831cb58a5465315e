"""`TorchEngine`: the embedded paged-KV, continuous-batching `Engine` backend: the
shared paged-KV lifecycle (paged_engine.py) with a Llama-family model forward and
sampling on torch, masked by a grammar for generations that carry one
(`SamplingParams.grammar`; grammar.py, grammar_mask.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from timely_core.engine.closing import check_closing_within, closing_ids_now
from timely_core.engine.copy_bias import CopyBias, copies
from timely_core.engine.iteration_scheduler import Chunk
from timely_core.engine.observed import Span, plan_ids
from timely_core.engine.paged_engine import PagedEngine
from timely_core.engine.protocol import SamplingParams, StepOutput, UnknownVariant
from timely_core.engine.sequence import Sequence
from timely_core.engine.sim.latency import LatencyKvCosts
from timely_core.engine.torch.block_variants import BlockVariant, load_block_variant
from timely_core.engine.torch.config import CPU_KV_COST_PROFILE, EngineConfig
from timely_core.engine.torch.grammar import GrammarCompiler
from timely_core.engine.torch.grammar_mask import GrammarMasker
from timely_core.engine.torch.kv_cache import KvCache
from timely_core.engine.torch.kv_sharing import block_variant_writes_base_kv, lora_writes_base_kv
from timely_core.engine.torch.loader import load_model
from timely_core.engine.torch.lora import AdapterError, LoraAdapter, load_adapter
from timely_core.engine.torch.model_runner import ModelRunner
from timely_core.engine.torch.sampler import make_generator, sample, validate_params
from timely_core.engine.torch.zoo_model import ZooModel, load_zoo_model
from timely_core.engine.torch.zoo_variants import (
    HeldBlocks,
    load_zoo_block_variant,
    load_zoo_lora,
)
from timely_core.engine.variants import ResidentVariant, ResidentWeights


@dataclass
class StepTimings:
    """Cumulative wall time of `step` calls, split at the model forward + sampling."""

    steps: int = 0
    total_s: float = 0.0
    forward_s: float = 0.0  # includes sampling, and the grammar work in it

    @property
    def overhead_s(self) -> float:
        return self.total_s - self.forward_s


def _eos_ids(generation_config: Path | None, from_config: tuple[int, ...]) -> tuple[int, ...]:
    ids = list(from_config)
    if generation_config is not None and generation_config.is_file():
        eos = json.loads(generation_config.read_text()).get("eos_token_id")
        extra = eos if isinstance(eos, list) else [] if eos is None else [eos]
        ids.extend(i for i in extra if i not in ids)
    return tuple(ids)


class TorchEngine(PagedEngine):
    """Runs a local Hugging Face Llama/Qwen2 checkpoint on CPU (or any torch device's
    dtype) behind the `Engine` protocol: a checkpoint folder, or a block zoo's
    checkpoint variant (`from_zoo`), whose other variants it then serves beside it."""

    reports_logprobs = True  # `SamplingParams.logprobs` (plan candidates need them)

    def __init__(
        self, model_path: str | Path | ZooModel, config: EngineConfig | None = None
    ) -> None:
        self.config = config or EngineConfig()
        if isinstance(model_path, ZooModel):
            self.zoo_model: ZooModel | None = model_path
            self.model_path = model_path.source
            self.model = load_zoo_model(model_path, self.config.torch_dtype)
            file: Callable[[str], Path | None] = model_path.file
        else:
            self.zoo_model = None
            self.model_path = Path(model_path)
            self.model = load_model(self.model_path, self.config.torch_dtype)
            file = self.model_path.joinpath
        self._tokenizer_file = file("tokenizer.json")
        generation_config = file("generation_config.json")
        mc = self.model.config
        size = self.config.block_size
        bytes_per_block = KvCache.bytes_per_block(
            mc.num_hidden_layers, mc.num_key_value_heads, mc.head_dim, size, self.config.torch_dtype
        )
        num_device = self.config.device_kv_bytes // bytes_per_block
        if num_device < 1:
            raise ValueError(
                f"device_kv_bytes={self.config.device_kv_bytes} is less than one KV block "
                f"({bytes_per_block} bytes for this model and block_size={size})"
            )
        num_host = self.config.host_kv_bytes // bytes_per_block
        self.cache = KvCache(
            mc.num_hidden_layers,
            mc.num_key_value_heads,
            mc.head_dim,
            size,
            num_device,
            num_host,
            self.config.torch_dtype,
        )
        super().__init__(
            block_size=size,
            num_device_blocks=num_device,
            num_host_blocks=num_host,
            bytes_per_block=bytes_per_block,
            copier=self.cache,
            max_batched_tokens=self.config.max_batched_tokens,
            max_generations=self.config.max_generations,
            preemption_strategy=self.config.preemption_strategy,
            prefix_caching=self.config.enable_prefix_caching,
            eos_ids=_eos_ids(generation_config, mc.eos_token_ids),
        )
        self.max_model_len = mc.max_position_embeddings
        self.adapters: dict[str, LoraAdapter] = {}  # LoRA variants, batched with the base
        self.block_variants: dict[str, BlockVariant] = {}  # full fine-tunes, as shared blocks
        self._variant_order: list[str] = []  # every variant's name, in load order
        self._held_blocks: HeldBlocks = {}  # zoo variants' own blocks, each held once
        self.runner = ModelRunner(self.model, self.cache, size, self.adapters, self.block_variants)
        self.timings = StepTimings()
        self._grammars: GrammarCompiler | None = None
        self._copy_bias: CopyBias | None = None
        self.masker = GrammarMasker(
            self.config.max_generations,
            mc.vocab_size,
            self.eos_token_id,
            self.config.grammar_unmasked_first,
        )

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        started = time.perf_counter()
        try:
            return super().step(gen_ids)
        finally:  # a step that ended some generations alone computed the others'
            self.timings.steps += 1
            self.timings.total_s += time.perf_counter() - started

    # ---- fleet variants --------------------------------------------------
    def load_adapter(self, name: str, path: str | Path) -> LoraAdapter | BlockVariant:
        """Serve the variant in `path` as `name`; generations name it in
        `add(variant=...)`. A peft LoRA adapter folder (adapter_config.json) is served
        as its factors, a full fine-tune checkpoint (config.json + *.safetensors) as
        the blocks where it differs from the base; AdapterError if it does not fit
        this base model."""
        folder = Path(path)
        if not folder.is_dir() or (folder / "adapter_config.json").is_file():
            return self._load_lora(name, folder)  # a missing folder is named there
        if (folder / "config.json").is_file():
            return self.load_block_variant(name, folder)
        raise AdapterError(
            f"variant {name!r} ({folder}): neither a peft LoRA adapter "
            "(adapter_config.json) nor a full fine-tune checkpoint (config.json)"
        )

    @classmethod
    def from_zoo(
        cls, root: str | Path, variant: str, config: EngineConfig | None = None
    ) -> TorchEngine:
        """Serve the block zoo at `root`'s checkpoint variant `variant` as the base
        (CheckpointError naming a missing zoo, variant, block or file)."""
        return cls(ZooModel.open(root, variant), config)

    def load_zoo_variant(
        self, name: str, zoo_variant: str | None = None
    ) -> LoraAdapter | BlockVariant:
        """Serve the zoo's variant `zoo_variant` (default `name`) as `name`: a LoRA
        adapter of the served base as its factors, a full fine-tune as the blocks whose
        content differs from the base's (one another zoo variant holds alike is held
        once). AdapterError naming what does not fit; the engine must serve a zoo's
        checkpoint (`from_zoo`)."""
        if self.zoo_model is None:
            raise AdapterError(
                f"variant {name!r}: this engine serves the checkpoint folder "
                f"{self.model_path}, not a block zoo's variant; serve one (from_zoo) to load "
                "the zoo's variants"
            )
        self._check_new(name)
        variant = ZooModel.of(self.zoo_model.zoo, zoo_variant or name, AdapterError)
        if variant.manifest.kind == "lora":
            adapter = load_zoo_lora(
                name, variant, self.zoo_model, self.model.config, self.config.torch_dtype
            )
            return self._add_lora(adapter)
        weights, dtype = self.model.weights, self.config.torch_dtype
        own = load_zoo_block_variant(
            name, variant, self.zoo_model, self.model.config, weights, dtype, self._held_blocks
        )
        return self._add_block_variant(own)

    def _load_lora(self, name: str, path: Path) -> LoraAdapter:
        self._check_new(name)
        return self._add_lora(load_adapter(name, path, self.model.config, self.config.torch_dtype))

    def _add_lora(self, adapter: LoraAdapter) -> LoraAdapter:
        name = adapter.name
        self.adapters[name] = adapter
        self._variant_order.append(name)
        if lora_writes_base_kv(adapter, self.model.config):
            self.blocks.kv_keys[name] = None
        return adapter

    def load_block_variant(self, name: str, path: str | Path) -> BlockVariant:
        """Serve the full fine-tune checkpoint in `path` as variant `name`: blocks equal
        to the base's are the base's tensors, only the differing ones are held
        (AdapterError naming the config field or tensor that does not fit)."""
        self._check_new(name)
        weights, dtype = self.model.weights, self.config.torch_dtype
        return self._add_block_variant(
            load_block_variant(name, path, self.model.config, weights, dtype)
        )

    def _add_block_variant(self, variant: BlockVariant) -> BlockVariant:
        name, weights = variant.name, self.model.weights
        self.block_variants[name] = variant
        self._variant_order.append(name)
        if block_variant_writes_base_kv(variant, weights, self.model.config):
            self.blocks.kv_keys[name] = None  # its prefix-cache blocks are the base's
        return variant

    def _check_new(self, name: str) -> None:
        if name in self.adapters or name in self.block_variants:
            raise AdapterError(f"variant {name!r} is already loaded")

    def resident_weights(self) -> ResidentWeights:
        """`VariantEngine`: the base's weight bytes once, then each variant's own
        bytes in load order (a LoRA's factors, a full fine-tune's own blocks less those
        a variant loaded before it holds alike: what loading it added)."""
        variants = []
        counted: set[int] = set()  # data pointers of own blocks already reported
        for name in self._variant_order:
            if name in self.adapters:
                adapter = self.adapters[name]
                resident = ResidentVariant(name, "lora", adapter.nbytes, str(adapter.path))
            else:
                own = self.block_variants[name]
                blocks = tuple(own.owned_blocks())
                tensors = [t for b in blocks for t in own.block_tensors(b)]
                added = sum(t.nbytes for t in tensors if t.data_ptr() not in counted)
                counted.update(t.data_ptr() for t in tensors)
                resident = ResidentVariant(name, "blocks", added, str(own.path), blocks)
            variants.append(replace(resident, base_kv=self.blocks.kv_key(name) is None))
        return ResidentWeights(self.model.weights_nbytes, tuple(variants))

    def set_closing(self, gen_id: int, closing: bool, within: int | None = None) -> None:
        """`ClosingEngine`: close its grammar at the next chance (masker), its
        closing window starting here."""
        state = self._state(gen_id)
        check_closing_within(within)
        if closing and not state.closing:
            state.closing_from = state.num_generated
            state.closing_within = within
        state.closing = closing

    def _check_variant(self, variant: str | None, what: str) -> None:
        if variant is not None and variant not in self.adapters | self.block_variants:
            served = ", ".join(sorted(self._variant_order)) or "none"
            raise UnknownVariant(
                f"{what}: unknown variant {variant!r}; loaded variants: {served} "
                "(the base model is variant None)"
            )

    def kv_costs(self) -> LatencyKvCosts:
        """Its costs of recomputing and swapping KV (`KvCostSource`): the configured
        profile, else the planner's measured CPU profile."""
        profile = self.config.kv_cost_profile or CPU_KV_COST_PROFILE
        return LatencyKvCosts(profile, self.bytes_per_block / self.block_size)

    # ---- hooks -----------------------------------------------------------
    def _forward(self, chunks: list[Chunk]) -> list[tuple[Chunk, int]]:
        if not chunks:
            return []
        started = time.perf_counter()
        boosts = self._copy_boosts(chunks)  # ahead of the forward, on the tokens it reads
        with torch.inference_mode(), self._threads(sum(c.length for c in chunks)):
            sampled, logits = self.runner.run(chunks)
            params = [c.state.params for c in sampled]
            if boosts:
                self.copy_bias.add(
                    logits,
                    [
                        (row, *boosts[id(c.state)])
                        for row, c in enumerate(sampled)
                        if id(c.state) in boosts
                    ],
                )
            wanted = [row for row, c in enumerate(sampled) if c.state.params.logprobs]
            # before the grammar's mask, which writes into `logits`
            scored = torch.log_softmax(logits[wanted], dim=-1) if wanted else None
            generators = [c.state.generator for c in sampled]
            grammars = [c.state.grammar for c in sampled]
            if any(g is not None for g in grammars):
                closing = [_closing(c.state) for c in sampled]
                tokens = self.masker.sample(logits, params, generators, grammars, closing)
            else:
                tokens = sample(logits, params, generators)
            if scored is not None:
                for i, row in enumerate(wanted):
                    self._logprobs[sampled[row].state.gen_id] = float(scored[i, tokens[row]])
        self.timings.forward_s += time.perf_counter() - started
        return list(zip(sampled, tokens, strict=True))

    def _compute_prefix(self, state: Sequence) -> None:
        with torch.inference_mode(), self._threads(len(state.token_ids)):
            while state.num_pending > 0:
                length = min(state.num_pending, self.config.max_batched_tokens)
                self.runner.run([Chunk(state, state.num_computed, length)])
                state.num_computed += length

    def _check_tokens(self, token_ids: list[int], what: str) -> None:
        super()._check_tokens(token_ids, what)
        vocab = self.model.config.vocab_size
        bad = next((i for i, t in enumerate(token_ids) if not 0 <= t < vocab), None)
        if bad is not None:
            raise ValueError(
                f"{what}: token {token_ids[bad]} at index {bad} is outside [0, {vocab})"
            )

    def _generator(self, params: SamplingParams) -> torch.Generator | None:
        validate_params(params)
        return make_generator(params)

    def _prepare(self, state: Sequence) -> None:
        """A generation with a grammar gets its own matcher (the grammar compiled once)."""
        if state.params.grammar is not None:
            if state.params.closing_ids:
                self._check_tokens(list(state.params.closing_ids), "closing_ids")
            if state.params.hard_closing_ids:
                self._check_tokens(list(state.params.hard_closing_ids), "hard_closing_ids")
            if state.params.closing_banned_ids:
                self._check_tokens(list(state.params.closing_banned_ids), "closing_banned_ids")
            state.grammar = self.grammars.matcher(state.params.grammar)

    def _rewritten(
        self, state: Sequence, token_ids: list[int], appended: int, observed: list[Span]
    ) -> None:
        """A generation with a grammar gets a matcher that accepted the new ids but
        the observed ones (EngineError if the grammar refuses an appended one)."""
        if state.params.grammar is not None:
            generated = plan_ids(token_ids[state.prompt_len :], observed)
            state.grammar = self.grammars.rebuilt(state.params.grammar, generated)

    @property
    def grammars(self) -> GrammarCompiler:
        """This checkpoint's grammar compiler (its tokenizer, read on first use)."""
        if self._grammars is None:
            if self._tokenizer_file is None:
                raise ValueError(
                    f"grammar masks need the checkpoint's tokenizer.json ({self.model_path})"
                )
            self._grammars = GrammarCompiler.from_tokenizer_file(
                self._tokenizer_file, self.model.config.vocab_size, self._eos
            )
            self.masker.set_vocabulary(self._grammars.vocab)
        return self._grammars

    def _copy_boosts(self, chunks: list[Chunk]) -> dict[int, tuple[list[int], float]]:
        """Each copying generation's boosted ids and bias, by `id` of its state."""
        copying = [
            c.state for c in chunks if c.state.params.grammar is not None and copies(c.state.params)
        ]
        if not copying:
            return {}
        started = time.perf_counter()
        bias = self.copy_bias
        boosts: dict[int, tuple[list[int], float]] = {}
        for state in copying:
            ids, state.copy_scan = bias.boosted_scan(
                state.token_ids, state.prompt_len, state.params, state.copy_scan, state.observed
            )
            boosts[id(state)] = (ids, state.params.copy_bias)
        bias.seconds += time.perf_counter() - started
        return boosts

    @property
    def copy_bias(self) -> CopyBias:
        """This checkpoint's copy-bias lookups (its vocabulary, read on first use)."""
        if self._copy_bias is None:
            self._copy_bias = CopyBias(self.grammars.vocab, self.grammars.encode)
        return self._copy_bias

    @contextmanager
    def _copies(self) -> Iterator[None]:
        with self._threads(0):
            yield

    @contextmanager
    def _threads(self, num_tokens: int) -> Iterator[None]:
        """Run a forward of `num_tokens` tokens on the configured thread count."""
        small = num_tokens <= self.config.small_step_tokens
        wanted = self.config.small_step_threads if small else self.config.num_threads
        previous = torch.get_num_threads()
        if wanted is None or wanted == previous:
            yield
            return
        torch.set_num_threads(wanted)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


def _closing(state: Sequence) -> tuple[int, ...] | None:
    """The ids its next token closes its grammar with, or None when it does not
    close (closing.py: asked to, or in the last `close_within` tokens of its limit)."""
    params = state.params
    return closing_ids_now(
        max_tokens=params.max_tokens,
        close_within=params.close_within,
        closing_ids=params.closing_ids,
        hard_closing_ids=params.hard_closing_ids,
        generated=state.num_generated,
        asked_at=state.closing_from if state.closing else None,
        asked_within=state.closing_within,
    )
