"""Plans that react (simulated engine, virtual time; a real tool process): a tool's
observation is appended to the generation when the statement calling it
completes, and what the planner writes next follows it. The robot never sees the
observation: the plan text and the segments hold only what the planner wrote."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.timely_core.core_support import TinyLanguage, eos_id, make_tokenizer
from timely_core.clock import VirtualClock
from timely_core.engine.sim.engine import SimulatedEngine, SimulatedEngineConfig
from timely_core.engine.sim.latency import PAPER_LLAMA3_8B_RTX4090
from timely_core.request import TaskRequest
from timely_core.service import PlanningService
from timely_core.tools.router import MAX_OBSERVATION_CHARS, ToolRouter
from timely_core.tools.spec import ToolSpec

HERE = str(Path(__file__).parent)
LOOK = {"name": "look", "plugin": "tools_fault_plugins:Look", "append_observations": True}


def reacting_planner(ids: Sequence[int]) -> list[int]:
    """A planner that searches first, then acts on what the observation says."""
    text = make_tokenizer().decode(list(ids))
    if text.endswith("\nkeys is on the table\n"):
        plan = " pick('keys'); say('got them');"
    elif text.endswith("\nwallet is on the table\n"):
        plan = " say('wrong thing');"
    elif "Task: find the keys\n" in text:
        plan = "search('keys');"
    else:
        raise KeyError(f"unscripted context {text[-60:]!r}")
    return make_tokenizer().encode(plan, add_special_tokens=False).ids


@pytest.fixture(params=["timely", "stream"])  # suspended after each segment, or not
def service(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[PlanningService, SimulatedEngine]]:
    monkeypatch.syspath_prepend(HERE)
    clock = VirtualClock()
    engine = SimulatedEngine(
        clock,
        PAPER_LLAMA3_8B_RTX4090,
        reacting_planner,
        SimulatedEngineConfig(eos_token_id=eos_id()),
    )
    service = PlanningService(engine, make_tokenizer(), request.param, clock=clock)
    service.register_robot("drone1", TinyLanguage())
    yield service, engine
    service.close_tools()


def test_the_plan_goes_on_from_the_observation(
    service: tuple[PlanningService, SimulatedEngine],
) -> None:
    planning, engine = service
    planning.register_tool("drone1", LOOK)
    handle = planning.submit(TaskRequest(robot_id="drone1", instruction="find the keys"))
    planning.run_until_idle()
    result = handle.result(timeout_s=0)
    assert result.success, result.error
    assert result.plan_text == "search('keys'); pick('keys'); say('got them');"
    assert [s.text.strip() for s in handle.segments()] == [
        "search('keys');",
        "pick('keys');",
        "say('got them');",
    ]
    [outcome] = planning.tool_outcomes(handle.task_id)
    assert (outcome.kind, outcome.value) == ("observation", "keys is on the table")
    assert engine.rewrites == 1


def test_without_appending_the_plan_ends_where_it_was(
    service: tuple[PlanningService, SimulatedEngine],
) -> None:
    planning, engine = service
    planning.register_tool("drone1", {**LOOK, "append_observations": False})
    handle = planning.submit(TaskRequest(robot_id="drone1", instruction="find the keys"))
    planning.run_until_idle()
    assert handle.result(timeout_s=0).plan_text == "search('keys');"
    assert engine.rewrites == 0


def test_an_observation_the_engine_refuses_ends_the_task_with_one_bounded_line(
    service: tuple[PlanningService, SimulatedEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine's refusal can be pages long (a grammar's whole state): the task's
    error quotes it on one line, cut, as it does the observation."""
    from timely_core.engine.protocol import EngineError

    planning, engine = service

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise EngineError("the grammar refuses it\n" + "parser state line\n" * 400)

    monkeypatch.setattr(engine, "rewrite", refuse)
    planning.register_tool("drone1", LOOK)
    handle = planning.submit(TaskRequest(robot_id="drone1", instruction="find the keys"))
    planning.run_until_idle()
    error = handle.result(timeout_s=0).error
    assert error.startswith(
        "robot drone1: the observation 'keys is on the table' could not be appended to the "
        "plan: the grammar refuses it parser state line"
    ), error
    assert "\n" not in error and len(error) < 700 and error.endswith("..."), error


def test_an_unexpected_error_after_a_verdict_ends_the_task_instead_of_hanging_it(
    service: tuple[PlanningService, SimulatedEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generation waited for its verdict out of the batch: an error no one
    expected in what follows still ends its task, with the error."""
    planning, engine = service

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("engine bug")

    monkeypatch.setattr(engine, "rewrite", broken)
    planning.register_tool("drone1", LOOK)
    handle = planning.submit(TaskRequest(robot_id="drone1", instruction="find the keys"))
    planning.run_until_idle()
    result = handle.result(timeout_s=0)
    assert result.error == "internal error: RuntimeError('engine bug')", result.error
    assert planning.stats().failed == 1


def test_an_observation_too_long_for_any_plan_ends_its_task_before_it_is_tokenized(
    service: tuple[PlanningService, SimulatedEngine],
) -> None:
    planning, _ = service
    size = MAX_OBSERVATION_CHARS
    big = {"name": "look", "plugin": "tools_fault_plugins:BigLook", "options": {"size": size}}
    planning.register_tool("drone1", {**big, "append_observations": True})
    handle = planning.submit(TaskRequest(robot_id="drone1", instruction="find the keys"))
    planning.run_until_idle()
    error = handle.result(timeout_s=0).error
    assert error.startswith(
        f"robot drone1: the observations of this segment are {size + 2} characters, more "
        f"than a plan may be given (MAX_OBSERVATION_CHARS={size}): 'xxx"
    ), error
    assert len(error) < 400


def test_appending_needs_a_validating_tool_and_a_rewritable_engine(
    service: tuple[PlanningService, SimulatedEngine],
) -> None:
    planning, _ = service
    echo = {"name": "echo", "plugin": "tools_fault_plugins:Echo", "append_observations": True}
    with pytest.raises(ValueError, match="append_observations needs a validating tool"):
        planning.register_tool("drone1", echo)
    with pytest.raises(ValueError, match="NoneType cannot"):
        ToolRouter(None).register("drone1", ToolSpec.model_validate(LOOK))


class RecordingEngine:
    """Records what the router asks of a rewritable engine."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def token_ids(self, gen_id: int) -> list[int]:
        return [1, 2, 3, 4, 5]  # a prompt of 2, 3 generated

    def suspend(self, gen_id: int, strategy: object) -> None:
        self.calls.append(("suspend", gen_id))

    def rewrite(
        self,
        gen_id: int,
        keep_generated: int,
        append_ids: list[int],
        observed: tuple[int, int] | None = None,
    ) -> None:
        start, end = observed if observed is not None else (0, 0)
        observation = make_tokenizer().decode(append_ids[start:end])
        self.calls.append(("rewrite", (keep_generated, make_tokenizer().decode(append_ids))))
        self.calls.append(("observed", observation))

    def resume(self, gen_id: int) -> None:
        self.calls.append(("resume", gen_id))


def test_an_observation_that_arrives_before_its_statement_ends_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(HERE)
    engine = RecordingEngine()
    router = ToolRouter(engine, make_tokenizer())  # type: ignore[arg-type]
    router.register("drone1", ToolSpec.model_validate(LOOK))
    generation = SimpleNamespace(
        task_id="t",
        robot_id="drone1",
        gen_id=7,
        prompt_ids=[1, 2],
        engine_base=0,
        written_ids=[3, 4, 5],
        in_engine=True,
        suspended=False,
        request=SimpleNamespace(scene=""),
        segmenter=SimpleNamespace(text="search('keys')", trailing_text="", last_token_text=")"),
    )
    try:
        router.on_decoded(generation, False)  # type: ignore[arg-type]
        while not router.outcomes("t"):  # the answer arrives mid-statement...
            time.sleep(0.001)
        router.on_decoded(generation, False)  # type: ignore[arg-type]
        assert engine.calls == []  # ...and waits for the statement's end
        generation.segmenter.text += ";"
        router.on_decoded(generation, True)  # type: ignore[arg-type]
        assert engine.calls == [
            ("suspend", 7),
            ("rewrite", (3, "\nkeys is on the table\n")),
            ("observed", "\nkeys is on the table\n"),  # all of it, for a grammar to skip
            ("resume", 7),
        ]
    finally:
        router.close()
