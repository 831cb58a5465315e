"""What the parts of a `PlanningService` share: the engine, the scheduler, every
task's generation and handle, the counters, and the deliveries waiting to reach
the handles.

All of it is guarded by one lock (`lock`; `wake` is its condition). The engine is
guarded by `engine_gate`, always taken before `lock`: the loop holds it for a whole
iteration and releases `lock` during the engine's step (engine_iteration.py).
Deliveries (the handles' callbacks) run after both are released, in order, through
`run_deliveries`.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from timely_core.clock import Clock
from timely_core.engine.protocol import Engine, SamplingParams
from timely_core.language.detokenizer import IncrementalDetokenizer
from timely_core.language.grammar import (
    language_closers,
    language_closing_bans,
    language_copy_names,
    language_grammar,
    language_hard_closers,
    with_copy_bias,
)
from timely_core.language.segmenter import Segmenter
from timely_core.scheduling.batch_control import LatencyGuidedBatch
from timely_core.scheduling.policies import Policy
from timely_core.scheduling.queue_table import QueueEntry
from timely_core.scheduling.scheduler import Scheduler
from timely_core.service_config import ServiceConfig
from timely_core.serving.engine_gate import EngineGate
from timely_core.serving.generation import Generation, GenerationState
from timely_core.serving.kv_handling import KvHandling
from timely_core.serving.robots import Robot, StoredPrefix, common_leading_ids
from timely_core.serving.scenes import SceneBook
from timely_core.task_handle import TaskHandle
from timely_core.tools.router import ToolRouter

log = logging.getLogger(__name__)
Delivery = Callable[[], None]
COUNTERS = (
    "submitted",
    "succeeded",
    "failed",
    "cancelled",
    "rejected",
    "segments",
    "iterations",
    "decisions",
    "scene_prefills",  # scenes prefilled ahead of their tasks
    "scene_hits",  # admissions that started from a prefilled scene
    "guard_violations",  # tasks ended by their robot's StatementGuard
    "kv_stalls",  # scheduling points whose admission stopped short of KV memory
    "rollbacks",  # failed segments rolled back, planning went on (failure_recovery.py)
    "tokens_rolled_back",  # generated ids (and their KV) dropped by those rollbacks
    "segments_withdrawn",  # segments emitted past a failed one, taken back by a rollback
)


def batch_cap(config: ServiceConfig, engine: Engine) -> int:
    """Generations per iteration: the service's cap, within what the engine runs."""
    if engine.max_generations < config.max_batch_size:
        log.warning(
            "max_batch_size=%d is more than the engine runs per iteration; using its "
            "max_generations=%d",
            config.max_batch_size,
            engine.max_generations,
        )
        return engine.max_generations
    return config.max_batch_size


def scene_budget_blocks(config: ServiceConfig, engine: Engine) -> int:
    """Device blocks prefilled scenes may hold (none without the prefix cache)."""
    if not config.prefix_cache:
        return 0
    return int(config.scene_kv_fraction * engine.memory().device_blocks_total)


class ServiceState:
    def __init__(
        self, engine: Engine, tokenizer: Any, policy: Policy, clock: Clock, config: ServiceConfig
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.policy = policy
        self.clock = clock
        self.config = config
        batch = LatencyGuidedBatch(config.wcet_segment_tokens, admit_per_step=config.admit_per_step)
        self.scheduler = Scheduler(policy, batch, batch_cap(config, engine))
        self.params = SamplingParams(temperature=0.0, max_tokens=config.max_tokens)
        self._closing_by_texts: dict[tuple[str, ...], tuple[int, ...]] = {}
        self._banned_by_texts: dict[tuple[str, ...], tuple[int, ...]] = {}
        self.lock = threading.RLock()
        self.wake = threading.Condition(self.lock)
        self.engine_gate = EngineGate()
        # Set (under `lock`) when new work may have arrived since the loop last looked:
        # the loop does not sleep on `wake` while it is set.
        self.work_signalled = False
        self.robots: dict[str, Robot] = {}
        self.prefixes: dict[str, StoredPrefix] = {}
        self.block_size = engine.memory().block_size
        self.scenes = SceneBook(config.scene_debounce_s, scene_budget_blocks(config, engine))
        # by task id, with the latest `finished_tasks_kept` finished ones (`finished`)
        self.generations: dict[str, Generation] = {}
        self.finished: deque[str] = deque()
        self.handles: dict[str, TaskHandle] = {}
        self.by_gen_id: dict[int, Generation] = {}  # live only
        self.running: dict[int, Generation] = {}
        self.pending: list[tuple[float, int, str]] = []  # (arrival, seq, task id) heap
        self.deliveries: list[Delivery] = []
        self.delivery_lock = threading.RLock()  # batches reach handles in order
        self.next_gen_id = 0
        # in default task ids, so a restarted service never reuses one: robots keep
        # per-task state by task id
        self.incarnation = uuid.uuid4().hex[:8]
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.decision_time_s = 0.0
        self.engine_busy_s = 0.0  # service clock inside engine iterations
        self.loop_busy_s = 0.0  # service clock in loop passes that ran one (ServiceStats)
        self.stopping = False
        self.tools = ToolRouter(engine, tokenizer)  # robots' tool plugins (Conveyor)
        self.kv_handling = KvHandling(self)  # each suspension's KV strategy (LAMPS)

    def sampling_params(self, generation: Generation) -> SamplingParams:
        """The service's sampling, with the grammar of the generation's language
        when `config.grammar` is on and the language has one: with
        `config.grounded_names`, its grammar for the generation's request; with
        `config.copy_bias`, the request's names (not with grounded names) and
        numbers to copy. With `config.plan_candidates` (grammar or not), its plan
        candidates. Worked out once per generation (a request's grammar and names
        are its own)."""
        if generation.sampling is None:
            request = generation.request
            sampling = self.params
            if self.config.grammar:
                grammar = language_grammar(
                    generation.language,
                    (request.scene, request.instruction) if self.config.grounded_names else None,
                )
                sampling = self._with_grammar(grammar, generation.language)
            # grounded names allow only those names (and the robot's known places,
            # which a bias toward the request's would push away from): numbers only
            if sampling.grammar is not None:
                sampling = with_copy_bias(
                    sampling,
                    generation.language,
                    request.scene,
                    request.instruction,
                    self.config.copy_bias,
                    names=not self.config.grounded_names,
                )
                if not self.config.distinct_names:
                    sampling = dataclasses.replace(
                        sampling, copy_distinct_after=(), copy_distinct_openers=()
                    )
            if self.config.plan_candidates > 0:
                sampling = with_candidates(
                    sampling, generation.language, request.instruction, self.config
                )
            generation.sampling = sampling
        return generation.sampling

    def fresh_segmenter(self, generation: Generation) -> Segmenter:
        """A segmenter that has seen nothing of `generation`'s plan, with its robot's
        segment limit (the service's once the robot is gone)."""
        robot = self.robots.get(generation.robot_id)
        limit = robot.max_segment_tokens if robot is not None else self.config.max_segment_tokens
        return Segmenter(
            IncrementalDetokenizer(self.tokenizer, generation.prompt_ids),
            generation.language.new_parser(),
            limit,
        )

    def _with_grammar(self, grammar: str | None, language: object) -> SamplingParams:
        if grammar is None:
            return self.params
        return dataclasses.replace(
            self.params,
            grammar=grammar,
            close_within=self.config.grammar_close_within,
            closing_ids=self._closing_ids(language_closers(language)),
            hard_closing_ids=self._closing_ids(language_hard_closers(language)),
            closing_banned_ids=self._banned_ids(language_closing_bans(language)),
        )

    def _closing_ids(self, texts: tuple[str, ...]) -> tuple[int, ...]:
        """The token ids of a language's closing texts; a text the tokenizer
        does not write as one token cannot be forced as one, and is left out
        (worked out, and warned about, once per set of texts)."""
        ids = self._closing_by_texts.get(texts)
        if ids is not None:
            return ids
        found = []
        for text in texts:
            encoded = list(self.tokenizer.encode(text, add_special_tokens=False).ids)
            if len(encoded) == 1:
                found.append(encoded[0])
            else:
                log.warning("closing text %r is %d tokens, not one: not forced", text, len(encoded))
        ids = self._closing_by_texts[texts] = tuple(found)
        return ids

    def _banned_ids(self, texts: tuple[str, ...]) -> tuple[int, ...]:
        """Every token id whose text contains one of a language's closing bans
        (worked out once per set of texts)."""
        if not texts:
            return ()
        ids = self._banned_by_texts.get(texts)
        if ids is None:
            vocab = range(self.tokenizer.get_vocab_size())
            spelled = [self.tokenizer.decode([i], skip_special_tokens=False) for i in vocab]
            ids = tuple(i for i in vocab if any(t in spelled[i] for t in texts))
            self._banned_by_texts[texts] = ids
        return ids

    def release_prefix(self, prefix: StoredPrefix) -> None:
        """Unpin a stored prefix no robot uses any more (a robot re-registered with
        another prompt). Generations that started with it keep their blocks; those
        not yet in the engine are prefilled without it (`engine_prefix`)."""
        if any(robot.prefix is prefix for robot in self.robots.values()):
            return
        key = next(k for k, p in self.prefixes.items() if p is prefix)
        del self.prefixes[key]
        if prefix.prefix_id is not None:
            self.engine.unregister_prefix(prefix.prefix_id)

    def engine_prefix(self, generation: Generation) -> str | None:
        """The registered prefix the engine should admit `generation` with: its
        robot's prefilled scene when the prompt starts with it; no prefix when the
        prompt shares more full blocks with that scene than with the stored prefix
        (the engine's prefix cache then finds the longest run it holds); else the
        stored prefix, if the engine still holds it."""
        scene = self.scenes.prefix_for(generation.request.robot_id)
        if scene is not None and scene.variant != generation.variant:
            scene = None  # the robot changed variant since this generation's admission
        stored = generation.prefix_id
        if scene is not None and stored:
            prompt = generation.prompt_ids
            if tuple(prompt[: len(scene.token_ids)]) == scene.token_ids:
                scene.last_used_s = self.clock.now()
                return scene.prefix_id
            block = self.block_size
            robot = self.robots.get(generation.request.robot_id)
            stored_len = len(robot.prefix.shared_ids) if robot is not None else 0
            if len(common_leading_ids([prompt, scene.token_ids])) // block > stored_len // block:
                return None
        if not stored:
            return None
        held = any(p.prefix_id == stored for p in self.prefixes.values())
        return stored if held else None

    def waiting_first(self) -> int:
        """Tasks that have arrived and wait for their first admission (max_queue)."""
        return sum(
            1
            for g in self.by_gen_id.values()
            if g.state is GenerationState.QUEUED and not g.in_engine and not g.records
        )

    def next_arrival_s(self) -> float | None:
        """Arrival time of the next pending task (tasks cancelled before arriving are
        dropped here, so the virtual clock never jumps for them)."""
        while self.pending:
            _, _, task_id = self.pending[0]
            if self.generations[task_id].state is GenerationState.PENDING:
                return self.pending[0][0]
            heapq.heappop(self.pending)
        return None

    def enqueue(self, generation: Generation) -> None:
        """Queue the generation's next segment with its priority inputs (Eq. 4)."""
        generation.state = GenerationState.QUEUED
        tuf = generation.request.tuf
        self.scheduler.enqueue(
            QueueEntry(
                gen_id=generation.gen_id,
                seq=generation.seq,
                ref_s=generation.segment_ref_s(),
                ert_s=generation.segment_ert_s(),
                slope=tuf.slope,
                initial_utility=tuf.initial_utility,
                segment_generation_s=self.config.segment_generation_s,
                arrival_s=generation.arrival_s,
                initial_deadline_s=generation.arrival_s + tuf.expected_response_time_s,
                ready_s=self.kv_handling.ready_s(generation),
                memory_time=self.kv_handling.memory_time(generation)
                if self.kv_handling.waits_for_calls
                else 0.0,
            )
        )

    def end(self, generation: Generation, error: str) -> None:
        """Take the generation out of everything (freeing its KV) and deliver its result."""
        if generation.in_engine:
            self.engine.abort(generation.gen_id)
            generation.in_engine = False
        if generation.gen_id in self.scheduler:
            self.scheduler.remove(generation.gen_id)
        self.running.pop(generation.gen_id, None)
        self.by_gen_id.pop(generation.gen_id, None)
        self.kv_handling.forget(generation)
        generation.state = GenerationState.FINISHED
        generation.awaiting_reports = False  # ended: no later report ends it again
        generation.awaiting_verdicts = False
        self.tools.task_ended(generation.task_id)
        result = generation.result(error, self.clock.now())
        handle = self.handles[generation.task_id]
        self.deliveries.append(lambda: handle.deliver_result(result))
        self.finished.append(generation.task_id)
        while len(self.finished) > self.config.finished_tasks_kept:
            oldest = self.finished.popleft()  # its caller keeps its handle, if it wants it
            self.generations.pop(oldest, None)
            self.handles.pop(oldest, None)

    def fail(self, generation: Generation, error: str) -> None:
        """End the generation with `error`, counted as failed."""
        self.end(generation, error)
        self.counters["failed"] += 1

    def signal_work(self) -> None:
        """Wake the loop for new work; call with `lock` held."""
        self.work_signalled = True
        self.wake.notify_all()

    def run_deliveries(self) -> None:
        """Deliver what the last steps produced; call without holding `lock`."""
        with self.delivery_lock:
            with self.lock:
                deliveries, self.deliveries = self.deliveries, []
            for deliver in deliveries:
                deliver()


def with_candidates(
    sampling: SamplingParams, language: object, instruction: str, config: ServiceConfig
) -> SamplingParams:
    """`sampling` with `config.plan_candidates` alternatives, rewarded for the words
    of the names the instruction gives (the scene's items not: a plan that names
    one of those instead of the object asked for must not gain by it)."""
    names = language_copy_names(language, "", instruction)
    words = {word.lower() for name in names for word in name.split()}
    return dataclasses.replace(
        sampling, candidates=config.plan_candidates, coverage_words=tuple(sorted(words))
    )
