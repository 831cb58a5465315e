"""The service's copy bias with a language of someone else's: names and openers the
engine would refuse (a name holding the quote, an empty opener) are left out and the
task is planned as usual; a language whose quote is not one character gets no copy
bias at all. With the robot's own language, a number the request states is what
the plan's call takes."""

from __future__ import annotations

from typing import Any

import pytest

from robot_models.language import RobotPlanLanguage, load_language
from tests.timely_core.serving.grammar_recording import recording_service
from timely_core.engine.protocol import SamplingParams
from timely_core.request import TaskRequest
from timely_core.service_config import ServiceConfig

pytestmark = pytest.mark.slow


class ThirdPartyLanguage:
    """The drone's language with its own names, openers and quote."""

    def __init__(self, names: tuple[str, ...], openers: tuple[str, ...], quote: str) -> None:
        self._drone: RobotPlanLanguage = load_language("drone")
        self._names, self._openers, self._quote = names, openers, quote

    def __getattr__(self, name: str) -> Any:
        return getattr(self._drone, name)

    def request_names(self, scene: str, instruction: str) -> tuple[str, ...]:
        return self._names

    def name_quote(self) -> str:
        return self._quote

    def name_openers(self) -> tuple[str, ...]:
        return self._openers


def planned(
    language: Any, instruction: str, config: ServiceConfig | None = None
) -> tuple[SamplingParams, str]:
    """The sampling the engine was given for one drone task, and its plan."""
    service, engine = recording_service({"drone": language}, config)
    service.register_robot("drone1", robot_type="drone")
    service.start()
    texts = []
    try:
        handle = service.submit(
            TaskRequest(robot_id="drone1", scene="visible: sofa", instruction=instruction)
        )
        for segment in handle.segments(timeout_s=120):
            texts.append(segment.text)
            handle.segment_done(segment.index)
        result = handle.result(timeout_s=120)
        assert result.success, result.error
    finally:
        service.stop()
    return engine.admitted_params[0], "".join(texts)


def admitted(language: ThirdPartyLanguage) -> SamplingParams:
    return planned(language, "find the cat")[0]


def test_names_and_openers_the_engine_would_refuse_are_left_out() -> None:
    language = ThirdPartyLanguage(("cat", "it's", ""), ("sw(", "", "x" * 40), "'")
    params = admitted(language)
    assert params.copy_names == ("cat",)
    assert params.copy_openers == ("sw(",)
    assert params.copy_bias > 0


def test_a_quote_of_more_than_one_character_gets_no_copy_bias() -> None:
    params = admitted(ThirdPartyLanguage(("cat",), ("sw(",), "''"))
    assert params.copy_names == () and params.copy_bias == 0


def test_a_number_the_request_states_is_what_the_call_takes() -> None:
    params, plan = planned(load_language("drone"), "go up 1.2 m please")
    assert ("mu(", "120") in zip(params.copy_value_openers, params.copy_values, strict=True)
    assert "mu(120)" in plan


def test_with_grounded_names_numbers_are_still_copied() -> None:
    config = ServiceConfig(grounded_names=True)
    params, plan = planned(load_language("drone"), "go up 1.2 m please", config)
    assert params.copy_names == ()  # the grammar allows only the request's names
    assert ("mu(", "120") in zip(params.copy_value_openers, params.copy_values, strict=True)
    assert "mu(120)" in plan
