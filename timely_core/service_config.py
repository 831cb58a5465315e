"""Tunables of the PlanningService, validated (pydantic) with clear errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from timely_core.engine.protocol import HandlingStrategy
from timely_core.scheduling.batch_control import DEFAULT_WCET_SEGMENT_TOKENS
from timely_core.scheduling.priority import DEFAULT_MIN_SLACK_S, DEFAULT_SEGMENT_GENERATION_S


class ServiceConfig(BaseModel):
    # strict: `grammar="yes"` or `max_tokens="256"` is a caller's mistake, not a
    # setting; no NaN or infinity: `idle_wait_s=inf` would stop the service loop
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    max_queue: int = Field(default=256, ge=1)  # tasks waiting for their first admission
    max_batch_size: int = Field(default=32, ge=1)  # generations in one engine iteration
    max_tokens: int = Field(default=256, ge=1)  # per plan
    max_segment_tokens: int = Field(default=64, ge=1)  # a statement must end within this
    max_prompt_tokens: int = Field(default=4096, ge=1)
    wcet_segment_tokens: int = Field(default=DEFAULT_WCET_SEGMENT_TOKENS, ge=1)  # §4.4
    admit_per_step: int = Field(default=1, ge=1)  # §4.4: "a lag for one generation"
    segment_generation_s: float = Field(default=DEFAULT_SEGMENT_GENERATION_S, gt=0)  # G
    min_slack_s: float = Field(default=DEFAULT_MIN_SLACK_S, gt=0)  # floor of L
    dispatch_latency_s: float = Field(default=0.0, ge=0, le=60, allow_inf_nan=False)  # network
    # finished tasks the service keeps (their late segment reports, `handle(task_id)`),
    # the oldest forgotten past it: a service running for days holds no more
    finished_tasks_kept: int = Field(default=1000, ge=0)
    # a suspended generation's KV: auto (least predicted waste, LAMPS), ttl
    # (Continuum), or fixed: preserve, swap, discard (docs/service-api.md)
    handling_strategy: HandlingStrategy = Field(default=HandlingStrategy.AUTO, strict=False)
    # bring a swapped-out waiting generation's KV back while device memory is free,
    # the soonest predicted resume first, so its resume pays no swap-in
    kv_prefetch: bool = True
    # Teola's partial prefill: each robot type's fixed prompt is prefilled once and
    # shared. False prefills every prompt whole, as servers without a prefix cache do
    # (to size one: `lrtrace replay --no-prefix-cache`).
    prefix_cache: bool = True
    # Scenes robots publish ahead of their tasks are prefilled once they have stood
    # this long (a moving robot republishes often), within this share of device KV.
    scene_debounce_s: float = Field(default=0.2, ge=0, le=60)
    scene_kv_fraction: float = Field(default=0.25, ge=0, le=0.9)
    idle_wait_s: float = Field(default=0.05, gt=0, le=60)  # background thread's poll when idle
    # Mask each robot's generations by its language's grammar (when it has one), so
    # every statement decoded parses and keeps its skills' limits. False decodes
    # unconstrained (the parser still rejects, and the task then fails).
    grammar: bool = True
    # With the grammar, and a language whose grammar can depend on the request
    # (`RequestGrammarLanguage`): each plan gets its request's grammar, e.g. object
    # names only from the request, its scene and the robot's known places. Off by
    # default: a plan then cannot name an object the request implies without naming
    # it ("a tool for cutting paper": scissors).
    grounded_names: bool = False
    # With the grammar, and a language that lists a request's names
    # (`CopyingLanguage`): inside a skill's quoted name argument, tokens that go on
    # spelling one of them get this added to their logits (engine/copy_bias.py), so
    # a name the request gives wins where the planner is unsure, while a name it is sure of
    # (by more than this) stays. Logits are the checkpoint's own scale: the default
    # is the largest that kept the shipped planner's template held-out and LRTrace
    # plans (bench/copy_bias.py). The same bias copies the numbers a request states
    # (`ValueCopyingLanguage`), with grounded names too; names are not biased with
    # `grounded_names`. 0: off.
    copy_bias: float = Field(default=10.0, ge=0, le=100)
    # With the copy bias, and a language that says which names must differ from the
    # one right before them (`DistinctNamesLanguage`: the arm's place after its pick):
    # no bias toward that name there, so a held object is not pushed onto itself.
    # False: the bias favours every listed name everywhere, as before.
    distinct_names: bool = True
    # With the grammar, a plan's last this-many tokens of `max_tokens` (or of the
    # segment limit, for a statement nearing it) end it at the first statement
    # boundary (its blocks closed), and in their last half also end an open name,
    # call and statement, so a plan that runs long still ends valid instead of cut
    # off mid-statement (engine/closing.py). 0: off.
    grammar_close_within: int = Field(default=32, ge=0)
    # Rollbacks after failed segments per task (requests with replan_on_failure);
    # the next failure ends the task with the robot's error (docs/closed-loop.md).
    max_recoveries: int = Field(default=3, ge=0, le=100)
    # Plan candidates (engine/plan_candidates.py): each plan is decoded as usual
    # beside this many sampled alternatives (at `candidate_temperature`), and the
    # one kept scores best by log-probability plus `candidate_coverage_weight` per
    # word of the request's own names (its noun phrases, not the scene's) that its
    # quoted names use. Costs n + 1 plans' decoding, and a plan's first segment waits
    # until all have ended. Needs an engine that reports log-probabilities (the
    # torch engine). The weight is the largest of bench/plan_candidates.py's grid
    # that kept the shipped planner's template held-out and LRTrace plans (all of it
    # did: the reward then decides before the log-probability does). 0: off.
    plan_candidates: int = Field(default=0, ge=0, le=32)
    candidate_temperature: float = Field(default=1.0, gt=0, le=5)
    candidate_coverage_weight: float = Field(default=64.0, ge=0, le=1000)
