"""Helpers of the vLLM engine tests: the planner's robot prompts, a driver that
suspends and resumes generations on a schedule, real vLLM servers on loopback."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

from timely_core.engine.protocol import Engine, HandlingStrategy, SamplingParams

PLANNER = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints" / "planner"


@cache
def robot_prompts() -> tuple[dict[str, list[int]], list[list[int]]]:
    """Each robot type's prompt prefix, and the LRTrace tasks' prompts (prefix + request)."""
    from robot_models.dataset import LRTRACE_TASKS
    from robot_models.language import load_language
    from timely_core.engine.torch.loader import load_tokenizer

    tokenizer = load_tokenizer(PLANNER)

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    prefixes = {r: encode(load_language(r).prompt_prefix()) for r in ("drone", "arm")}
    prompts = [
        prefixes[t.robot_type]
        + encode(load_language(t.robot_type).format_request(t.scene, t.instruction))
        for t in LRTRACE_TASKS
    ]
    return prefixes, prompts


def drive_segmented(
    engine: Engine,
    prompts: list[list[int]],
    params: SamplingParams,
    every: int,
    strategy: HandlingStrategy,
    pause: int = 1,
    first_id: int = 0,
) -> list[list[int]]:
    """Like engine_testkit.drive (all added at once), but each generation is suspended
    with `strategy` after every `every` tokens (a segment) and resumed `pause`
    iterations later; returns prompt + generated ids per prompt."""
    ids = list(range(first_id, first_id + len(prompts)))
    out = {g: list(p) for g, p in zip(ids, prompts, strict=True)}
    for g, p in zip(ids, prompts, strict=True):
        engine.add(g, p, params)
    live = list(ids)
    paused: dict[int, int] = {}  # gen -> iteration to resume at
    for iteration in range(100_000):
        for g, at in list(paused.items()):
            if at <= iteration:
                engine.resume(g)
                del paused[g]
                live.append(g)
        if not live and not paused:
            return [out[g] for g in ids]
        for o in engine.step(live):
            out[o.gen_id].append(o.token_id)
            if o.finished:
                live.remove(o.gen_id)
            elif (len(out[o.gen_id]) - len(prompts[o.gen_id - first_id])) % every == 0:
                engine.suspend(o.gen_id, strategy)
                live.remove(o.gen_id)
                paused[o.gen_id] = iteration + 1 + pause
    raise AssertionError("generations did not finish")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class VllmServer:
    """One `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1, in its own
    process group: `kill` ends the group, its EngineCore child included (a SIGKILL to
    the API server alone leaves that child running)."""

    def __init__(self, model: Path, log: Path, max_num_seqs: int = 8) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
        command = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "float32", "--max-model-len", "2048", "--block-size", "32",
            "--enable-prefix-caching", "--scheduling-policy", "priority",
            "--enable-prompt-tokens-details", "--enforce-eager",
            "--max-num-seqs", str(max_num_seqs),
        ]  # fmt: skip
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def wait_ready(self, timeout_s: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM server exited: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise RuntimeError(
            f"vLLM server not ready in {timeout_s} s: {self.log.read_text()[-3000:]}"
        )

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def running_requests(self) -> float:
        import httpx

        for line in httpx.get(f"{self.url}/metrics", timeout=5).text.splitlines():
            if line.startswith("vllm:num_requests_running{"):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError("no vllm:num_requests_running in /metrics")
