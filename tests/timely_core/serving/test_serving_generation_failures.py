"""A generation the engine fails on its own (`GenerationsFailed`: a vLLM server
refused its request) ends its task only, with its reason; the other robots' tasks
get the tokens of that very step and finish with their full plans. An engine
failure of the whole step still ends every running task (simulated engine,
virtual time)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.timely_core.core_support import (
    PAPER_LATENCY,
    TinyLanguage,
    eos_id,
    make_tokenizer,
    plan_script,
)
from timely_core.clock import VirtualClock
from timely_core.engine.protocol import EngineError, GenerationsFailed, StepOutput
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.task_handle import TaskHandle

PLANS = {
    "look for the cat": "mf(50); tl(90); search('cat'); say('found it');",
    "evade": "mu(30); tr(45); md(30);",
}
REASON = "vLLM server http://s1 refused generation {}: HTTP 400 bad prompt"


class FailingEngine(SimulatedEngine):
    """The simulator, failing `doomed` (once it has made `after` tokens, in a step
    that also runs others) as the vLLM server engine does: ended inside the
    engine, the others' outputs on the exception. `whole`: instead, that step
    raises a plain EngineError."""

    def __init__(self, after: int = 3, whole: bool = False) -> None:
        config = SimulatedEngineConfig(eos_token_id=eos_id())
        super().__init__(VirtualClock(), PAPER_LATENCY, plan_script(PLANS), config)
        self.doomed: int | None = None
        self.after, self.whole = after, whole
        self.made = 0
        self.carried: list[StepOutput] = []  # the outputs the failed step carried

    def step(self, gen_ids: list[int]) -> list[StepOutput]:
        outputs = super().step(gen_ids)
        self.made += sum(o.gen_id == self.doomed for o in outputs)
        if self.doomed not in gen_ids or len(gen_ids) < 2 or self.made < self.after:
            return outputs
        doomed, self.doomed = self.doomed, None
        if self.whole:
            raise EngineError("the engine core died")
        self.abort(doomed)
        self.carried = [o for o in outputs if o.gen_id != doomed]
        raise GenerationsFailed({doomed: REASON.format(doomed)}, self.carried)


def serve(engine: FailingEngine) -> tuple[PlanningService, dict[str, TaskHandle]]:
    """Three robots' tasks, the second doomed; run to the end."""
    service = PlanningService(engine, make_tokenizer(), policy="timely", clock=engine.clock)
    requests: Sequence[tuple[str, str]] = [
        ("good1", "look for the cat"),
        ("bad", "look for the cat"),
        ("good2", "evade"),
    ]
    for i, _ in enumerate(requests):
        service.register_robot(f"d{i}", TinyLanguage())
    handles = {
        task: service.submit(TaskRequest(task_id=task, robot_id=f"d{i}", instruction=text))
        for i, (task, text) in enumerate(requests)
    }
    engine.doomed = service._state.generations["bad"].gen_id
    service.run_until_idle()
    return service, handles


def test_a_failed_generation_ends_its_task_only() -> None:
    engine = FailingEngine()
    service, handles = serve(engine)
    doomed = service._state.generations["bad"].gen_id
    bad = handles["bad"].result(timeout_s=0)
    assert not bad.success
    assert bad.error == f"engine failure: {REASON.format(doomed)}"
    assert engine.carried, "the failed step carried no other generation's token"
    for task, text in (("good1", "look for the cat"), ("good2", "evade")):
        result = handles[task].result(timeout_s=0)
        assert result.success, result.error
        assert "".join(s.text for s in handles[task].segments()) == PLANS[text]
    stats = service.stats()
    assert stats.succeeded == 2 and stats.failed == 1


def test_a_whole_step_failure_still_ends_every_running_task() -> None:
    _, handles = serve(FailingEngine(whole=True))
    results = {task: handle.result(timeout_s=0) for task, handle in handles.items()}
    assert results["bad"].error == "engine failure: the engine core died"
    ended = [r for r in results.values() if r.error == "engine failure: the engine core died"]
    assert len(ended) >= 2  # every task running in that step, not only the doomed one
