"""A stand-in for a vLLM OpenAI-compatible server on 127.0.0.1, for the failure
cases of `engine: vllm-server` that a real server (a minute to start) makes slow:
it answers as vLLM 0.32 does (checked against a real server: /v1/models, /tokenize,
streamed /v1/completions with `token_ids`, the out-of-vocabulary 400, /metrics),
starts in milliseconds, and can hang (accept connections, send nothing: SIGSTOP),
die (close every connection and its port: SIGKILL), lack Timely's grammar
processor, serve another model (another tokenizer, vocabulary or context), refuse
one request (chosen by its prompt's first id) as vLLM refuses a bad one: HTTP 400
before streaming, or an error event in its stream, serve LoRA adapters (listed in
/v1/models as vLLM lists them, loaded and unloaded at run time; a request naming a
model it does not serve gets vLLM's 404), and hold its streams after a token.

Its tokens are a function of the last id only (`next_id`), so a generation resumed
anywhere from its kept ids goes on exactly as it would have (`expected`)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer
from vllm_testkit import free_port

EOS = 0  # the planner's
VOCAB = 1536  # the planner's


def next_id(last: int) -> int:
    """The fake model: never EOS or the pad id, so a generation runs its budget."""
    return 2 + (last * 31 + 7) % (VOCAB - 2)


def expected(prompt: list[int], max_tokens: int) -> list[int]:
    """What any fake server generates for `prompt`, uninterrupted."""
    out, last = [], prompt[-1]
    for _ in range(max_tokens):
        last = next_id(last)
        out.append(last)
    return out


class FakeVllmServer:
    """`url` answers while started. `grammar`: it runs Timely's grammar processor
    (answers the probe with EOS). `vocab_size`, `max_model_len`, `tokenizer_shift`
    (added to every id /tokenize returns): another model's. `hang_after` /
    `die_after`: it hangs / dies once it has sent that many tokens on one stream.
    `refuse_first`: a request whose prompt starts with this id (a resume's prompt
    does too) is answered `refuse_code` with vLLM's error body, or, with
    `refuse_in_stream`, streams one token and then an error event of that code.
    `loras`: the LoRA adapters it serves (`load_lora`/`unload_lora` at run time).
    `hold_after`: each stream waits after that many tokens until `let_go`."""

    def __init__(
        self,
        model: Path,
        *,
        grammar: bool = True,
        vocab_size: int = VOCAB,
        max_model_len: int = 2048,
        tokenizer_shift: int = 0,
        token_delay_s: float = 0.002,
        hang_after: int | None = None,
        die_after: int | None = None,
        refuse_first: int | None = None,
        refuse_in_stream: bool = False,
        refuse_code: int = 400,
        loras: tuple[str, ...] = (),
        hold_after: int | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.model = str(model)
        self.grammar = grammar
        self.vocab_size = vocab_size
        self.max_model_len = max_model_len
        self.tokenizer_shift = tokenizer_shift
        self.token_delay_s = token_delay_s
        self.hang_after = hang_after
        self.die_after = die_after
        self.refuse_first = refuse_first
        self.refuse_in_stream = refuse_in_stream
        self.refuse_code = refuse_code
        self.loras = set(loras)
        self.hold_after = hold_after
        self.streams = 0  # streamed completions it took (not probes)
        self.refused = 0  # requests it refused (`refuse_first`)
        self.not_found = 0  # completions naming a model it does not serve (404)
        self.requests: list[tuple[str, list[int]]] = []  # streamed: (model, prompt)
        self._held = threading.Event()
        self._tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
        self._awake = threading.Event()
        self._awake.set()
        self._stopped = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> FakeVllmServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        ThreadingHTTPServer.allow_reuse_address = True
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def load_lora(self, name: str) -> None:
        """As POST /v1/load_lora_adapter: listed and served from now on."""
        with self._lock:
            self.loras.add(name)

    def unload_lora(self, name: str) -> None:
        """As POST /v1/unload_lora_adapter: a request naming it gets 404 from now on."""
        with self._lock:
            self.loras.discard(name)

    def let_go(self) -> None:
        """Streams held (`hold_after`) go on, and no stream is held from now on."""
        self._held.set()

    def hold(self, sent: int) -> None:
        """A stream that has sent `sent` tokens waits here while held (or till dead)."""
        if self.hold_after is not None and sent >= self.hold_after:
            while not self._held.wait(0.05) and not self._stopped.is_set():
                pass

    def cards(self) -> list[dict[str, Any]]:
        """/v1/models' data as vLLM 0.32 lists it: the base, then each LoRA with the
        base as its parent."""
        base = {
            "id": self.model,
            "object": "model",
            "root": self.model,
            "parent": None,
            "max_model_len": self.max_model_len,
        }
        with self._lock:
            loras = sorted(self.loras)
        return [base] + [
            {"id": n, "object": "model", "root": f"/adapters/{n}", "parent": self.model}
            for n in loras
        ]

    def missing(self, model: str | None) -> dict[str, Any] | None:
        """vLLM's 404 body if it does not serve `model` (counted), else None."""
        with self._lock:
            if not model or model == self.model or model in self.loras:
                return None
            self.not_found += 1
        message = f"The model `{model}` does not exist. Valid aliases: {self.model}."
        return {
            "error": {"message": message, "type": "NotFoundError", "param": "model", "code": 404}
        }

    def hang(self) -> None:
        """Keep every connection open and send nothing more, new requests included."""
        self._awake.clear()

    def die(self) -> None:
        """Close the port and every open connection mid-stream."""
        self._stopped.set()
        self._awake.set()
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._open.clear()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:  # new connections meanwhile are closed unanswered
            threading.Thread(target=_close, args=(httpd,), daemon=True).start()

    def gate(self) -> None:
        """Wait while hung; raise once dead (the handler's connection just ends)."""
        while not self._awake.wait(0.05):
            pass
        if self._stopped.is_set():
            raise ConnectionAbortedError("dead")

    def track(self, sock: socket.socket, open_: bool) -> None:
        with self._lock:
            (self._open.add if open_ else self._open.discard)(sock)

    def refusal(self, prompt: list[int]) -> dict[str, Any] | None:
        """vLLM's error body if this request is to be refused (counted), else None."""
        if self.refuse_first is None or prompt[0] != self.refuse_first:
            return None
        with self._lock:
            self.refused += 1
        kind = "BadRequestError" if self.refuse_code < 500 else "InternalServerError"
        message = f"refused: the prompt starts with {self.refuse_first}"
        return {
            "error": {"message": message, "type": kind, "param": None, "code": self.refuse_code}
        }

    def tokenize(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        return [i + self.tokenizer_shift for i in ids]


def _close(httpd: ThreadingHTTPServer) -> None:
    httpd.shutdown()
    httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeVllmServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.fake.track(self.connection, True)

    def finish(self) -> None:
        self.fake.track(self.connection, False)
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        with contextlib.suppress(OSError):
            self.fake.gate()
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": self.fake.cards()})
            elif self.path == "/metrics":
                text = (
                    'vllm:cache_config_info{block_size="32",num_gpu_blocks="1001",'
                    'kv_cache_memory_bytes="1000000"} 1.0\n'
                    'vllm:kv_cache_usage_perc{engine="0"} 0.0\n'
                )
                self._send(200, text.encode(), "text/plain")
            else:
                self._json(200 if self.path == "/health" else 404, {})

    def do_POST(self) -> None:
        with contextlib.suppress(OSError):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.fake.gate()
            if self.path == "/tokenize":
                tokens = self.fake.tokenize(body["prompt"])
                self._json(200, {"count": len(tokens), "tokens": tokens, "token_strs": None})
            elif self.path == "/v1/completions":
                self._complete(body)
            else:
                self._json(404, {})

    def _complete(self, body: dict[str, Any]) -> None:
        missing = self.fake.missing(body.get("model"))
        if missing is not None:  # vLLM checks the model first
            self._json(404, missing)
            return
        prompt = [int(i) for i in body["prompt"]]
        bad = [i for i in prompt if not 0 <= i < self.fake.vocab_size]
        if bad:
            message = f"Token id {bad[0]} is out of vocabulary"
            self._json(400, {"error": {"message": message, "code": 400}})
            return
        if "logit_bias" in body and "vllm_xargs" in body:  # the grammar probe
            token = EOS if self.fake.grammar else next_id(prompt[-1])
            choice = {"index": 0, "text": "", "token_ids": [token], "finish_reason": "stop"}
            self._json(200, {"choices": [choice], "usage": {}})
            return
        refusal = self.fake.refusal(prompt)
        if refusal is not None and not self.fake.refuse_in_stream:
            self._json(self.fake.refuse_code, refusal)
            return
        tokens = expected(prompt, int(body["max_tokens"]))
        usage = {"prompt_tokens_details": {"cached_tokens": 0}}
        if not body.get("stream"):
            choice = {"index": 0, "text": "", "token_ids": tokens, "finish_reason": "length"}
            self._json(200, {"choices": [choice], "usage": usage})
            return
        self.fake.streams += 1
        self.fake.requests.append((str(body.get("model")), prompt))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for sent, token in enumerate(tokens, start=1):
            self.fake.gate()
            last = sent == len(tokens)
            choice = {
                "index": 0,
                "text": "",
                "token_ids": [token],
                "finish_reason": "length" if last else None,
            }
            self._event({"choices": [choice]})
            if refusal is not None:  # as vLLM ends a stream on an error
                self._event(refusal)
                self.wfile.write(b"data: [DONE]\n\n")
                return
            if sent == self.fake.hang_after:
                self.fake.hang()
            if sent == self.fake.die_after:
                self.fake.die()
            self.fake.hold(sent)
            self.fake._stopped.wait(self.fake.token_delay_s)
        self._event({"choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, event: dict[str, Any]) -> None:
        self.fake.gate()
        self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
