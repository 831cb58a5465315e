"""What a vLLM server's failure means for a generation (server_engine.py).

A stream ends in one of four ways, each an exception the stream's runner acts on: the
server failed it (`ServerDown`: connection lost, a 5xx, 408 or 429, an error event
that does not blame the request, silence; the server is left out for a while and
the generation fails over), the server refused the request (`RequestRefused`: a
4xx, or an error event with such a code; any server would refuse it, so that
generation fails alone, with no failover and no server left out), the server cannot
run this generation (`ServerUnfit`: another model, no grammar processor, not its
variant; its state routes the generation elsewhere), or the server answered 404 for
the generation's LoRA (`VariantNotServed`: listed again and counted as not serving
the variant, server_variants.py).
"""

from __future__ import annotations

from typing import Any, NoReturn

from timely_core.engine.vllm.server_router import ServerState

NO_SERVER = "no vLLM server answers"

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


def raise_event_error(
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
