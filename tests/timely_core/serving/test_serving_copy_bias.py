"""The service's copy bias with a language of someone else's: names and openers the
engine would refuse (a name holding the quote, an empty opener) are left out and the
task is planned as usual; a language whose quote is not one character gets no copy
bias at all."""

from __future__ import annotations

from typing import Any

import pytest

from robot_models.language import RobotPlanLanguage, load_language
from tests.timely_core.serving.grammar_recording import recording_service
from timely_core.engine.protocol import SamplingParams
from timely_core.request import TaskRequest

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


def admitted(language: ThirdPartyLanguage) -> SamplingParams:
    service, engine = recording_service({"drone": language})
    service.register_robot("drone1", robot_type="drone")
    service.start()
    try:
        handle = service.submit(
            TaskRequest(robot_id="drone1", scene="visible: sofa", instruction="find the cat")
        )
        for segment in handle.segments(timeout_s=120):
            handle.segment_done(segment.index)
        result = handle.result(timeout_s=120)
        assert result.success, result.error
    finally:
        service.stop()
    return engine.admitted_params[0]


def test_names_and_openers_the_engine_would_refuse_are_left_out() -> None:
    language = ThirdPartyLanguage(("cat", "it's", ""), ("sw(", "", "x" * 40), "'")
    params = admitted(language)
    assert params.copy_names == ("cat",)
    assert params.copy_openers == ("sw(",)
    assert params.copy_bias > 0


def test_a_quote_of_more_than_one_character_gets_no_copy_bias() -> None:
    params = admitted(ThirdPartyLanguage(("cat",), ("sw(",), "''"))
    assert params.copy_names == () and params.copy_bias == 0
