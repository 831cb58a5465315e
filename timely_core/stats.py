"""A snapshot of the service for monitoring (`PlanningService.stats()`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceStats:
    policy: str
    queued: int  # waiting for the engine (new or resumed)
    waiting_first: int  # queued and never started: counts toward max_queue
    running: int  # in the engine's batch
    suspended: int  # suspended in the engine between segments
    pending_arrivals: int  # submitted with submit_at for a future time
    submitted: int
    succeeded: int
    failed: int
    cancelled: int
    rejected: int  # QueueFull
    segments_emitted: int  # every segment handed out, those later withdrawn included
    iterations: int
    decisions: int
    decision_time_s: float  # total time spent in scheduling decisions
    # service-clock seconds inside engine iterations (virtual with a simulated engine):
    # over a stretch of time, how close the engine was to its capacity
    engine_busy_s: float
    # service-clock seconds of loop passes that ran an engine iteration, their
    # deliveries included: minus engine_busy_s, the service's own time (scheduling,
    # per-token parsing, dispatch) that the engine waits for
    loop_busy_s: float
    kv_device_blocks_free: int
    kv_device_blocks_total: int
    # scenes published ahead of tasks (PlanningService.publish_scene)
    scene_prefixes: int = 0  # prefilled and pinned now
    scene_kv_blocks: int = 0  # device blocks they hold beyond the robots' stored prefixes
    scene_prefills: int = 0  # prefills done so far
    scene_hits: int = 0  # tasks admitted on a prefilled scene
    # plan candidates (ServiceConfig.plan_candidates): plans decided among them, of
    # those kept an alternative over the plan's own, decoded again (none acceptable)
    candidate_plans: int = 0
    candidate_alternatives_kept: int = 0
    candidate_redecoded: int = 0
    # plans that react (ServiceConfig.max_recoveries, TaskRequest.replan_on_failure):
    # failed segments rolled back, the generated ids dropped, and the segments emitted
    # past a failed one that were taken back (Rollback.withdrawn)
    rollbacks: int = 0
    tokens_rolled_back: int = 0
    segments_withdrawn: int = 0
    # plans decoded whose results wait for their robots' reports (result_after_reports,
    # replan_on_failure): open tasks, in no other count until they end
    awaiting_reports: int = 0
    # plans decoded whose last token's calls still wait for their validating tools'
    # verdicts (out of the engine): open tasks, in no other count until they end
    awaiting_verdicts: int = 0
