"""Whether each vLLM server may run the engine's requests: its model, asked once,
and its health after failing (server_engine.py).

Each server's model is compared with the local checkpoint before its first request
(server_model.py: /v1/models, /tokenize, the vocabulary's end), at build or, for a
server that did not answer then (a warning names it), when it first does: one that
serves another model is left out for good, and the build refused if none serves it.
The same /v1/models reply gives the server's LoRA adapters (server_variants.py).
A server back in routing after failing is asked its /health before a stream waits
on it: a hung server answers none.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from timely_core.engine.protocol import EngineError
from timely_core.engine.vllm.server_config import VllmServerConfig
from timely_core.engine.vllm.server_errors import NO_SERVER
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
from timely_core.engine.vllm.server_router import Router, ServerState

# the engine's logger: its warnings keep the name they had before this module
log = logging.getLogger("timely_core.engine.vllm.server_engine")


class ServerDiscovery:
    """Asks the servers over the engine's control client (`control`, an
    httpx.Client); each server is discovered once, whichever thread asks first."""

    def __init__(
        self,
        router: Router,
        control: Any,
        httpx: Any,
        local: LocalModel,
        model_path: Path,
        config: VllmServerConfig,
    ) -> None:
        self.router = router
        self._control = control
        self._httpx = httpx
        self._local = local
        self._model_path = model_path
        self._config = config
        self._lock = threading.Lock()
        # the engine's context, once built: a server discovered later must reach it
        self.max_model_len: int | None = None

    def discover(self) -> int:
        """Each server's model and context length. A server that does not answer is
        named in a warning and retried (its model checked when it first answers);
        EngineError if none answers, or none that answers serves the checkpoint."""
        lengths = []
        for server in self.router.servers:
            try:
                length = self.discover_one(server)
            except Exception as exc:
                self.router.mark_down(server, f"does not answer: {exc!r}")
                log.warning(
                    "vLLM server %s does not answer (%r); it is left out and tried again "
                    "every %g s",
                    server.url,
                    exc,
                    self._config.retry_after_s,
                )
                continue
            if length is not None:
                lengths.append(length)
        if lengths:
            self.max_model_len = min(lengths)
            return self.max_model_len
        if any(s.unusable for s in self.router.servers):
            raise EngineError(
                f"no vLLM server serves the checkpoint {self._model_path}: {self.router.describe()}"
            )
        raise EngineError(f"{NO_SERVER}: {self.router.describe()}")

    def discover_one(self, server: ServerState) -> int | None:
        """Read `server`'s model and compare it with the checkpoint (once): its
        context length, or None if it serves another model (then left out for good,
        with a warning). Raises what the requests raise (it does not answer)."""
        with self._lock:
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
            engine_len = self.max_model_len  # set once built
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

    def known(self, server: ServerState) -> bool:
        """Discover `server` if it was not (it did not answer at build): whether it
        may be used; a server that still does not answer is marked down."""
        if not server.known:
            try:
                self.discover_one(server)
            except Exception as exc:
                self.router.mark_down(server, f"does not answer: {exc!r}")
                return False
        return not server.unusable

    def unhealthy(self, server: ServerState) -> str:
        """Why `server`, back after failing, is not fit to stream: its /health must
        answer within `connect_timeout_s`; "" if it does (it is no longer suspect)."""
        try:
            reply = self._control.get(
                f"{server.url}/health", timeout=self._config.connect_timeout_s
            )
        except self._httpx.HTTPError as exc:
            return f"no answer to /health after failing ({exc!r})"
        if reply.status_code != 200:
            return f"/health answered HTTP {reply.status_code} after failing"
        server.suspect = False
        return ""
