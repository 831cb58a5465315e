"""Which vLLM server runs a generation: cache affinity by prefix, balanced by load,
and the servers that failed left out for a while (longer for each failure in a row).

A server can also be left out for good (`unusable`: it serves another model), for
grammar requests only (`grammar` False: it lacks Timely's grammar processor), or
for the fleet variants it does not serve (`loras`: the LoRA adapters its
/v1/models lists), so one misconfigured server among good ones costs no task, and
servers may serve different sets of adapters. A server's listing is read when it is
first asked, again when it comes back into routing after failing (it may have been
restarted with other adapters; until then it may serve any variant), and when it
answers 404 for a variant (`lacks`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

# a server failing again and again is left out for at most 2**MAX_DOUBLINGS times
# retry_after_s
MAX_DOUBLINGS = 4


@dataclass
class ServerState:
    url: str
    model: str = ""  # the served model's name (/v1/models)
    known: bool = False  # its model was compared with the checkpoint (server_model.py)
    max_model_len: int = 0  # its context (/v1/models), once known
    load: int = 0  # live streams on it
    down_until: float = 0.0  # monotonic time; 0: up
    last_error: str = ""
    failures: int = 0
    last_heard: float = 0.0  # monotonic time of its last byte on a stream
    unusable: str = ""  # why it is left out for good (another model); "" if usable
    homes: set[str] = field(default_factory=set)  # affinity keys it holds
    loras: frozenset[str] = frozenset()  # LoRA adapters it serves (/v1/models)
    # `loras` was read since it last came into routing (False: never read, or it failed
    # since: it may serve any variant, and is listed again before a variant's stream)
    listed: bool = False
    grammar: bool | None = None  # runs Timely's grammar processor (None: not probed yet)
    strikes: int = 0  # failures in a row, no token between: each doubles its time out
    suspect: bool = False  # failed since it last streamed: /health first, then a stream


class Router:
    """Thread-safe: streams fail over from the client's event loop thread."""

    def __init__(self, servers: list[ServerState], slack: int, retry_after_s: float) -> None:
        self.servers = servers
        self._slack = slack
        self._retry_after_s = retry_after_s
        self._home: dict[str, ServerState] = {}
        self._lock = threading.Lock()

    def up(self, grammar: bool = False, variant: str | None = None) -> list[ServerState]:
        """Servers to route to now; `grammar`: only those that may run a grammar
        (with the processor, or not probed yet: probed before the request);
        `variant`: only those that may serve that LoRA (listing it, or not listed
        since they came into routing: listed before the request)."""
        now = time.monotonic()
        return [
            s
            for s in self.servers
            if s.down_until <= now
            and not s.unusable
            and not (grammar and s.grammar is False)
            and self.may_serve(s, variant)
        ]

    @staticmethod
    def may_serve(server: ServerState, variant: str | None) -> bool:
        """Whether `server` may serve `variant` (None: the base model, served by all)."""
        return variant is None or not server.listed or variant in server.loras

    def pick(
        self, key: str | None, grammar: bool = False, variant: str | None = None
    ) -> ServerState | None:
        """The server for a new stream with affinity `key` (a prefix id), counted in
        its load; None when every server (for a grammar, every one that may run
        it; for a variant, every one that may serve it) is down or left out.
        Affinity and load count among those servers only."""
        with self._lock:
            live = self.up(grammar, variant)
            if not live:
                return None
            least = min(live, key=lambda s: s.load)
            if key is None:
                least.load += 1
                return least
            home = self._home.get(key)
            if home is None or home not in live:
                # a new (or orphaned) prefix goes where the fewest prefixes live
                home = min(live, key=lambda s: (len(s.homes), s.load))
            elif home.load > least.load + self._slack:
                home = least  # too busy: the prefix moves with its load
            self._move_home(key, home)
            home.load += 1
            return home

    def _move_home(self, key: str, home: ServerState) -> None:
        previous = self._home.get(key)
        if previous is not None:
            previous.homes.discard(key)
        self._home[key] = home
        home.homes.add(key)

    def home_of(self, key: str) -> ServerState | None:
        return self._home.get(key)

    def release(self, server: ServerState) -> None:
        with self._lock:
            server.load = max(0, server.load - 1)

    def set_loras(self, server: ServerState, loras: frozenset[str]) -> None:
        """`server`'s /v1/models lists these LoRA adapters now."""
        with self._lock:
            server.loras, server.listed = loras, True

    def lacks(self, server: ServerState, variant: str) -> None:
        """`server` answered 404 for `variant`: it does not serve it (until listed
        again), whatever its listing said."""
        with self._lock:
            server.loras, server.listed = server.loras - {variant}, True

    def mark_down(self, server: ServerState, reason: str) -> None:
        """Left out for `retry_after_s`, doubled for each failure in a row (a server
        that keeps failing is tried less and less often, up to MAX_DOUBLINGS). Its
        listing is read again when it is back (it may have been restarted)."""
        with self._lock:
            server.listed = False
            server.strikes += 1
            backoff = 2 ** min(server.strikes - 1, MAX_DOUBLINGS)
            server.down_until = time.monotonic() + self._retry_after_s * backoff
            server.last_error = reason
            server.failures += 1
            server.suspect = True

    def heard_from(self, server: ServerState) -> None:
        """`server` streamed a token: it works again."""
        server.strikes = 0
        server.suspect = False

    def describe(self) -> str:
        """Each server's real state, for error messages: a server that answers is
        said to, never lumped in with the failed ones."""
        now = time.monotonic()
        states = []
        for s in self.servers:
            if s.unusable:
                state = f"left out: {s.unusable}"
            elif s.down_until > now:
                times = f", {s.strikes} failures in a row" if s.strikes > 1 else ""
                state = f"down, retried in {s.down_until - now:.1f} s{times}: {s.last_error}"
            elif s.last_error:
                state = f"up again after: {s.last_error}"
            else:
                state = "up"
            if s.grammar is False and not s.unusable:
                state += "; no grammar processor"
            states.append(f"{s.url} ({state})")
        return "; ".join(states)

    def describe_loras(self) -> str:
        """What each server serves, for a variant no server serves: the LoRA adapters
        it listed (as last listed, for one that failed since)."""
        states = []
        for s in self.servers:
            if not s.known:
                served = "not listed yet"
            else:
                served = ", ".join(sorted(s.loras)) or "no LoRA"
                if not s.listed:
                    served += " (as last listed)"
            states.append(f"{s.url} serves {served}")
        return "; ".join(states)
