"""Helpers of the vLLM engine tests: the planner's robot prompts, a driver that
suspends and resumes generations on a schedule, real vLLM servers on loopback, and
the fleet-variant case (shipped adapters, a mixed batch, the torch reference)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from timely_core.engine.protocol import Engine, HandlingStrategy, SamplingParams

if TYPE_CHECKING:
    from timely_core.engine.torch.engine import TorchEngine

CHECKPOINTS = Path(__file__).resolve().parents[4] / "robot_models" / "checkpoints"
PLANNER = CHECKPOINTS / "planner"
VARIANTS = CHECKPOINTS / "variants"  # the shipped LoRA fleet variants
SERVED = ("heavy-drone", "warehouse-drone")  # the variants the LoRA tests load


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


def variant_batch() -> tuple[list[list[int]], list[str | None], list[int]]:
    """Three drone prompts on the base and both SERVED variants, the same prompt on
    two of them, each arriving while the others run: prompts, variants, arrivals (as
    engine_testkit.drive takes them)."""
    prefixes, prompts = robot_prompts()
    start = prefixes["drone"]
    drone = [p for p in prompts if p[: len(start)] == start][:3]
    assert len(drone) == 3
    heavy, warehouse = SERVED
    variants: list[str | None] = [None, heavy, warehouse, heavy, None]
    return [drone[0], drone[0], drone[1], drone[2], drone[1]], variants, [0, 1, 2, 3, 4]


def torch_with_variants(planner: Path) -> TorchEngine:
    """The torch engine (1 thread) serving the SERVED variants: the reference vLLM's
    tokens and weight report are checked against."""
    from timely_core.engine.torch.config import EngineConfig
    from timely_core.engine.torch.engine import TorchEngine

    engine = TorchEngine(planner, EngineConfig(num_threads=1))
    for name in SERVED:
        engine.load_adapter(name, VARIANTS / name)
    return engine


def assert_variants_equal_torch(planner: Path, engine: Engine) -> None:
    """The variant batch on `engine` gives the torch engine's greedy tokens, and each
    adapter changes the plan of one of its prompts at least (it really ran; on a
    prompt far from its training an adapter may write the base's plan)."""
    from engine_testkit import drive

    prompts, variants, arrivals = variant_batch()
    greedy = SamplingParams(max_tokens=24)
    reference = torch_with_variants(planner)
    expected = drive(reference, prompts, greedy, arrivals, variants=variants)
    got = drive(engine, prompts, greedy, arrivals, variants=variants)
    assert got == expected
    base = drive(reference, prompts, greedy, arrivals)
    for name in SERVED:
        rows = [i for i, variant in enumerate(variants) if variant == name]
        assert any(got[i] != base[i] for i in rows), f"{name} wrote the base's plans"


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

    def __init__(
        self, model: Path, log: Path, max_num_seqs: int = 8, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._core_pids: list[int] = []
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1")
        command = [
            sys.executable, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", "float32", "--max-model-len", "2048", "--block-size", "32",
            "--enable-prefix-caching", "--scheduling-policy", "priority",
            "--enable-prompt-tokens-details", "--enforce-eager",
            "--max-num-seqs", str(max_num_seqs), *extra_args,
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

    def pause(self) -> None:
        """Freeze the group (SIGSTOP): its open streams stay open and send nothing
        more, so a test can kill it while a generation is known to be mid-stream
        (the tiny planner streams a whole budget faster than a test steps it)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGSTOP)

    def hold_engine_core(self, held: bool) -> None:
        """Freeze (SIGSTOP) or thaw its EngineCore child alone: the API server still
        takes requests and aborts, which the frozen core cannot act on yet."""
        for pid in self.core_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP if held else signal.SIGCONT)

    def core_pids(self) -> list[int]:
        """Its EngineCore child's pid (read from /proc once: it lives as long as the
        server)."""
        if not self._core_pids:
            self._core_pids = self._children()
        return self._core_pids

    def _children(self) -> list[int]:
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == self.process.pid:  # ppid, after state
                    children.append(int(stat.parent.name))
        assert children, f"vLLM server {self.url} has no EngineCore process"
        return children

    def aborts_logged(self) -> int:
        """Requests the API server has aborted on its core (needs
        --enable-log-requests)."""
        return self.log.read_text(errors="replace").count("Aborted request(s)")

    def adds_logged(self) -> int:
        """Requests the API server has handed to its core (needs
        --enable-log-requests)."""
        return self.log.read_text(errors="replace").count("Added request")

    def generated_tokens(self) -> float:
        """Tokens the server has generated, all requests (its counter)."""
        return self._gauge("vllm:generation_tokens_total")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def finished_requests(self) -> float:
        """Requests the server has finished (stopped or at their budget), all reasons."""
        return self._gauge("vllm:request_success_total")

    def running_requests(self) -> float:
        return self._gauge("vllm:num_requests_running")

    def waiting_requests(self) -> float:
        return self._gauge("vllm:num_requests_waiting")

    def _gauge(self, name: str) -> float:
        """A metric's value, summed over its label sets (a finish reason each, say)."""
        import httpx

        lines = httpx.get(f"{self.url}/metrics", timeout=5).text.splitlines()
        values = [float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(name + "{")]
        if not values:
            raise AssertionError(f"no {name} in /metrics")
        return sum(values)


def plan_with_service(
    engine: Any, robots: int, on_first_segment: Any = None, grammar: bool = False
) -> tuple[list[str], Any]:
    """The PlanningService on `engine` (timely policy, background thread, real clock):
    `robots` robots each plan one LRTrace task, acknowledging every segment; returns
    what went wrong per robot (failure, a plan other than the task's golden plan,
    segments out of order) and the service's stats. `on_first_segment()` runs once,
    when the first segment of any robot arrives (the other plans still in flight).
    `grammar`: plans decoded under their robot's grammar (the service's default)."""
    import threading

    from tokenizers import Tokenizer

    from robot_models.dataset.lrtrace_tasks import LRTRACE_TASKS, LRTraceTask
    from robot_models.language import load_language
    from timely_core.clock import MonotonicClock
    from timely_core.request import TaskRequest
    from timely_core.scheduling.tuf import Tuf
    from timely_core.service import PlanningService
    from timely_core.service_config import ServiceConfig

    tokenizer = Tokenizer.from_file(str(PLANNER / "tokenizer.json"))
    languages: dict[str, Any] = {t: load_language(t) for t in ("drone", "arm")}
    service = PlanningService(
        engine,
        tokenizer,
        policy="timely",
        clock=MonotonicClock(),
        config=ServiceConfig(max_tokens=200, grammar=grammar),
        languages=languages,
    )
    tasks = [LRTRACE_TASKS[i % len(LRTRACE_TASKS)] for i in range(robots)]
    for i, task in enumerate(tasks):
        service.register_robot(f"robot{i}", robot_type=task.robot_type)
    failures: list[str] = []
    first = threading.Lock()

    def robot(i: int, task: LRTraceTask) -> None:
        handle = service.submit(
            TaskRequest(
                robot_id=f"robot{i}",
                scene=task.scene,
                instruction=task.instruction,
                tuf=Tuf.preset(task.urgency),
            )
        )
        texts, indices = [], []
        for segment in handle.segments(timeout_s=300):
            if on_first_segment is not None and first.acquire(blocking=False):
                on_first_segment()
            texts.append(segment.text)
            indices.append(segment.index)
            handle.segment_done(segment.index)
        result = handle.result(timeout_s=300)
        if not result.success:
            failures.append(f"robot{i} ({task.name}): {result.error}")
        elif "".join(texts) != task.golden_plan:
            failures.append(f"robot{i}: {''.join(texts)!r} != {task.golden_plan!r}")
        if indices != list(range(len(indices))):
            failures.append(f"robot{i}: segments out of order {indices}")

    service.start()
    threads = [threading.Thread(target=robot, args=(i, t)) for i, t in enumerate(tasks)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        cancelled = service.submit(
            TaskRequest(robot_id="robot0", scene=tasks[0].scene, instruction="Look for the cat")
        )
        cancelled.cancel()
        if cancelled.result(timeout_s=60).success:
            failures.append("a cancelled task succeeded")
    finally:
        service.stop()
    return failures, service.stats()


def eventually(condition: Callable[[], bool], timeout_s: float, poll_s: float = 0.02) -> bool:
    """Bounded wait for a server's or an engine's state (a bound, never a timing
    assertion): whether `condition` held within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
    return True
