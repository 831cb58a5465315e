"""Task admission: a request is validated, tokenized and checked against the
service's limits before anything is changed, then becomes a queued (or, for a
future arrival, pending) `Generation` with its `TaskHandle`."""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping
from typing import Any

from timely_core.errors import DuplicateTask, PromptTooLong, QueueFull, ServiceStopped, UnknownRobot
from timely_core.language.detokenizer import IncrementalDetokenizer
from timely_core.language.segmenter import Segmenter
from timely_core.request import TaskRequest
from timely_core.serving.generation import Generation, GenerationState
from timely_core.serving.robots import Robot, encode_request
from timely_core.serving.state import ServiceState
from timely_core.task_handle import TaskControl, TaskHandle

log = logging.getLogger(__name__)


def admit(
    state: ServiceState,
    control: TaskControl,
    request: TaskRequest | Mapping[str, Any],
    at_s: float | None,
) -> TaskHandle:
    """Accept `request` now (`at_s` None) or for arrival at `at_s`. Raises pydantic
    ValidationError, UnknownRobot, PromptTooLong, ServiceStopped, QueueFull or
    DuplicateTask; nothing is changed then."""
    request, robot, prompt_ids, prefix_id = _prepared(state, request)
    with state.wake:
        if state.stopping:
            raise ServiceStopped("the service is stopped")
        waiting = state.waiting_first()
        now = state.clock.now()
        arrives_now = at_s is None or at_s <= now
        if arrives_now and waiting >= state.config.max_queue:
            state.counters["rejected"] += 1
            raise QueueFull(
                f"queue full: {waiting} tasks wait for the engine "
                f"(max_queue={state.config.max_queue}); retry later"
            )
        seq = state.next_gen_id
        state.next_gen_id += 1
        task_id = request.task_id or _assigned_id(state, seq)
        if task_id in state.generations:
            raise DuplicateTask(f"task id {task_id!r} was already submitted")
        arrival = now if at_s is None else float(at_s)
        generation = Generation(
            gen_id=seq,
            seq=seq,
            task_id=task_id,
            request=request,
            language=robot.language,
            prefix_id=prefix_id,
            prompt_ids=prompt_ids,
            arrival_s=arrival,
            segmenter=Segmenter(
                IncrementalDetokenizer(state.tokenizer, prompt_ids),
                robot.language.new_parser(),
                robot.max_segment_tokens,
            ),
            guard=robot.guard() if robot.guard is not None else None,
            variant=robot.variant,
        )
        handle = TaskHandle(control, task_id, request.robot_id)
        state.generations[task_id] = generation
        state.handles[task_id] = handle
        state.by_gen_id[seq] = generation
        state.counters["submitted"] += 1
        if arrival > now:
            generation.state = GenerationState.PENDING
            heapq.heappush(state.pending, (arrival, seq, task_id))
        else:
            state.enqueue(generation)
        state.signal_work()
        return handle


def check_request(state: ServiceState, request: TaskRequest | Mapping[str, Any]) -> None:
    """Raise what `admit` would for `request` itself (pydantic ValidationError,
    UnknownRobot, PromptTooLong: its prompt in the robot's current scene), without
    submitting it: a front end turns a request away before accepting it."""
    _prepared(state, request)


def _prepared(
    state: ServiceState, request: TaskRequest | Mapping[str, Any]
) -> tuple[TaskRequest, Robot, list[int], str]:
    """The validated request (in the robot's published scene when it gives none),
    its robot, prompt ids and engine prefix."""
    if not isinstance(request, TaskRequest):
        request = TaskRequest.model_validate(request)
    if not request.scene:
        with state.lock:
            published = state.scenes.text(request.robot_id)
        if published:  # the robot's own view: what the task is planned in
            request = request.model_copy(update={"scene": published})
    robot, prompt_ids, prefix_id = _prompt(state, request)
    return request, robot, prompt_ids, prefix_id


def _prompt(state: ServiceState, request: TaskRequest) -> tuple[Robot, list[int], str]:
    """The robot of the request, its prompt ids (stored prefix + request part) and the
    engine prefix they start with ("" if none: then the whole prompt is prefilled)."""
    with state.lock:
        robot = state.robots.get(request.robot_id)
        registered = ", ".join(sorted(state.robots)) or "none"
    if robot is None:
        raise UnknownRobot(
            f"unknown robot id {request.robot_id!r}; register it first (registered: {registered})"
        )
    request_text = robot.language.format_request(request.scene, request.instruction)
    request_ids = encode_request(state.tokenizer, request_text)
    prompt_ids = list(robot.prefix.token_ids) + request_ids
    if len(prompt_ids) > state.config.max_prompt_tokens:
        raise PromptTooLong(
            f"prompt of robot {request.robot_id!r} has {len(prompt_ids)} tokens, more "
            f"than max_prompt_tokens={state.config.max_prompt_tokens}; shorten the "
            "scene or instruction"
        )
    context = getattr(state.engine, "max_model_len", None)
    needed = min(state.config.max_tokens, robot.max_segment_tokens)  # a first segment
    if isinstance(context, int) and context - len(prompt_ids) < needed:
        raise PromptTooLong(
            f"prompt of robot {request.robot_id!r} has {len(prompt_ids)} tokens (the "
            f"robot's fixed prompt {len(robot.prefix.token_ids)}, the scene and instruction "
            f"{len(request_ids)}); the model's context is {context} positions, which leaves "
            f"{max(context - len(prompt_ids), 0)} for the plan (at least {needed} needed); "
            "shorten the scene or instruction"
        )
    header = robot.prefix.header_ids
    if tuple(request_ids[: len(header)]) != header:
        # Not opened like the probes (a language whose header depends on the input):
        # served whole rather than with ids the model never saw after the prefix.
        log.warning("robot %s: request does not start with the stored header", robot.robot_id)
        return robot, prompt_ids, ""
    return robot, prompt_ids, robot.prefix.prefix_id or ""


def _assigned_id(state: ServiceState, seq: int) -> str:
    """The id of a request that gave none: `task-<incarnation>-<seq>`, suffixed when
    a caller's own id took that form already (a caller's id never makes a later
    request without one fail)."""
    task_id = f"task-{state.incarnation}-{seq}"
    suffix = 1
    candidate = task_id
    while candidate in state.generations:
        suffix += 1
        candidate = f"{task_id}-{suffix}"
    return candidate
