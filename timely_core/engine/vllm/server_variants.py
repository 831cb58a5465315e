"""Fleet variants on vLLM servers: which server serves which LoRA adapter
(server_engine.py).

Each server serves the LoRA adapters it was started with (`--enable-lora
--lora-modules name=folder`) or loaded at run time, listed in its /v1/models;
servers may serve different sets. `load_adapter` checks the folder against the base
model and that an answering server lists it, and a variant's requests name the
adapter as their `model`. The router keeps each server's listing (read at discovery,
again when a server comes back into routing after failing, and at `load_adapter`)
and routes a variant's streams only among the servers that serve it, with affinity
and load counted among them. A server that answers 404 for a variant (unloaded at
run time) is listed again, counted as not serving it, and the generation fails over
to one that does from its kept ids, as on a server fault. With no answering server
serving it (their listings read again once first: one may have loaded it), that
generation alone fails, naming the variant and what each server serves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from timely_core.engine.protocol import AdapterError
from timely_core.engine.variants import ResidentVariant
from timely_core.engine.vllm.server_errors import ServerDown, ServerUnfit, VariantNotServed
from timely_core.engine.vllm.server_model import served_loras
from timely_core.engine.vllm.server_probe import missing_processor
from timely_core.engine.vllm.server_router import Router, ServerState

# the engine's logger: its records keep the name they had before this module
log = logging.getLogger("timely_core.engine.vllm.server_engine")


class ServerLoras:
    """The servers' listings, read over the engine's control client (`control`, an
    httpx.Client) and kept in the router; `adapters` is the engine's own dict of
    loaded variants (in load order), read here for the folders errors name."""

    def __init__(
        self,
        router: Router,
        control: Any,
        httpx: Any,
        adapters: dict[str, ResidentVariant],
        known: Callable[[ServerState], bool],
    ) -> None:
        self.router = router
        self._control = control
        self._httpx = httpx
        self._adapters = adapters
        self._known = known  # discovers a server first asked now (server_discovery.py)

    def list_loras(self, server: ServerState) -> None:
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

    def relist(self, grammar: bool) -> None:
        """List again the LoRA adapters of every answering server (one may have loaded
        an adapter at run time); one that does not answer is marked down."""
        for server in self.router.up(grammar):
            if not server.known:
                continue  # listed when it is discovered, before its first request
            try:
                self.list_loras(server)
            except ServerDown as exc:
                self.router.mark_down(server, str(exc))

    def drop(self, refused: VariantNotServed) -> None:
        """`refused.server` answered 404 for `refused.variant`: its listing is read
        again and it counts as not serving the variant (marked down if it does not
        answer the listing)."""
        server, variant = refused.server, refused.variant
        try:
            self.list_loras(server)
        except ServerDown as exc:
            self.router.mark_down(server, f"{refused}; then {exc}")
            return
        self.router.lacks(server, variant)
        log.warning(
            "%s (it lists: %s); the variant's requests go to the servers that serve it",
            refused,
            ", ".join(sorted(server.loras)) or "no LoRA",
        )

    def serves(self, server: ServerState, variant: str) -> bool:
        """Whether `server` serves LoRA `variant`; one back in routing since it was
        last listed (it may have been restarted) is listed first (ServerDown if it
        does not answer)."""
        if not server.listed:
            self.list_loras(server)
        return variant in server.loras

    async def check_serves(self, server: ServerState, variant: str) -> None:
        """`serves` before a stream: ServerUnfit if it does not (the stream goes
        elsewhere), the listing read off the event loop."""
        if not await asyncio.to_thread(self.serves, server, variant):
            raise ServerUnfit(f"{server.url} does not serve LoRA {variant!r}")

    def check_load(self, name: str, path: str | Path) -> None:
        """`load_adapter`'s servers: each answering server's listing is read again
        now (one not discovered yet is discovered, which lists it). AdapterError
        naming each server, what it serves and the flags to add when every server
        answers and none lists `name`; when some do not answer, a warning (they may
        serve it)."""
        asked: list[ServerState] = []
        for server in self.router.up():
            try:
                if server.known:
                    self.list_loras(server)  # it may have loaded adapters at run time
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

    def no_server(self, variant: str, grammar: bool) -> str:
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
