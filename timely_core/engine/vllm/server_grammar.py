"""Which vLLM servers run Timely's grammar processor, so that no grammar request
decodes unconstrained (server_engine.py).

Each server must run it (`--logits-processors
timely_core.engine.vllm.grammar_processor:GrammarLogitsProcessor`); a generation's
requests carry its grammar args as `vllm_xargs`, so any request of it (a resume, a
failover) continues the plan's grammar where it stands. Each server is probed once
before its first grammar request (server_probe.py): one without the processor gets
no grammar request (a warning names it and the flag), never left to decode
unconstrained, and serves the others; only when no server runs it is a grammar
generation refused, with an error naming them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from timely_core.engine.protocol import EngineError
from timely_core.engine.vllm.server_errors import NO_SERVER, ServerDown, ServerUnfit
from timely_core.engine.vllm.server_probe import (
    answered_by_processor,
    missing_processor,
    probe_body,
)
from timely_core.engine.vllm.server_router import Router, ServerState

# the engine's logger: its warnings keep the name they had before this module
log = logging.getLogger("timely_core.engine.vllm.server_engine")


class ServerGrammar:
    """The probes, over the engine's control client (`control`, an httpx.Client:
    from `add`) or its async client (`client`, an httpx.AsyncClient: from a stream);
    each answer kept in the server's state (`ServerState.grammar`)."""

    def __init__(
        self,
        router: Router,
        control: Any,
        client: Any,
        httpx: Any,
        eos_token_id: int,
        vocab_size: int,
        known: Callable[[ServerState], bool],
    ) -> None:
        self.router = router
        self._control = control
        self._client = client
        self._httpx = httpx
        self._eos = eos_token_id
        self._vocab_size = vocab_size
        self._known = known  # discovers a server first asked now (server_discovery.py)

    def check_servers(self) -> None:
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
            raise EngineError(self.nowhere())

    async def probe(self, server: ServerState) -> None:
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

    def nowhere(self) -> str:
        """Why a grammar generation has no server left: the servers that lack the
        processor and the flag they need, else each server's state."""
        if any(s.grammar is False for s in self.router.servers):
            lacking = [missing_processor(s.url) for s in self.router.servers if s.grammar is False]
            return (
                f"no vLLM server that answers runs Timely's grammar processor: "
                f"{'; '.join(lacking)} (servers: {self.router.describe()})"
            )
        return f"{NO_SERVER}: {self.router.describe()}"

    def _probe_body(self, server: ServerState) -> dict[str, Any]:
        eos = self._eos
        return probe_body(server.model, eos, (eos + 1) % self._vocab_size)

    def _set_grammar(self, server: ServerState, status: int, reply: Any) -> None:
        """Record the probe's answer; a server without the processor (or refusing the
        probe) is named once, in a warning, and gets no grammar request."""
        server.grammar = status == 200 and answered_by_processor(reply.json(), self._eos)
        if not server.grammar:
            refused = "" if status == 200 else f" (HTTP {status} to the probe: {reply.text[:300]})"
            log.warning(
                "%s%s; grammar requests go to the other servers",
                missing_processor(server.url),
                refused,
            )
