"""What the service asks of a plan language's grammar side (language/grammar.py):
each optional protocol is used when a language implements it, and a language that
does not gets the documented defaults."""

from __future__ import annotations

from robot_models.grounding import grounded_names
from robot_models.language import load_language
from timely_core.engine.protocol import SamplingParams
from timely_core.language.chat_language import ChatLanguage
from timely_core.language.grammar import (
    CopyingLanguage,
    language_closers,
    language_copy_names,
    language_distinct_names,
    language_grammar,
    language_hard_closers,
    language_name_openers,
    language_quote,
    with_copy_bias,
)

SCENE, INSTRUCTION = "visible: sofa, lamp", "find my green thermos"


def test_a_robot_language_gives_its_grammars_closers_and_the_requests_names() -> None:
    drone = load_language("drone")
    assert isinstance(drone, CopyingLanguage)
    assert language_grammar(drone) == drone.grammar()
    assert language_grammar(drone, (SCENE, INSTRUCTION)) == drone.request_grammar(
        SCENE, INSTRUCTION
    )
    assert language_closers(drone) == ("}",)
    assert "');" in language_hard_closers(drone)
    names = language_copy_names(drone, SCENE, INSTRUCTION)
    assert names == grounded_names(SCENE, INSTRUCTION)
    assert {"green thermos", "sofa", "lamp"} <= set(names)
    assert language_quote(drone) == "'"
    assert {"sw(", "sweep(", "o("} <= set(language_name_openers(drone))
    assert "lg(" not in language_name_openers(drone)  # its text is a message
    assert "," in language_name_openers(load_language("arm"))  # so('cup','bin')


def test_a_language_without_them_gets_the_defaults() -> None:
    chat = ChatLanguage()
    assert not isinstance(chat, CopyingLanguage)
    assert language_grammar(chat) is None
    assert language_closers(chat) == language_hard_closers(chat) == ()
    assert language_copy_names(chat, SCENE, INSTRUCTION) == ()
    assert language_quote(chat) == "'"
    assert language_name_openers(chat) == ()
    assert language_distinct_names(chat) == ()


class _OddLanguage:
    """A third party's copying language: one unusable name, one unusable opener."""

    def __init__(self, quote: str = "'") -> None:
        self.quote = quote

    def request_names(self, scene: str, instruction: str) -> tuple[str, ...]:
        return ("cup", "it's", "")

    def name_quote(self) -> str:
        return self.quote

    def name_openers(self) -> tuple[str, ...]:
        return ("pick(", "", "x" * 40)

    def request_values(self, scene: str, instruction: str) -> tuple[tuple[str, str], ...]:
        return (("pick(", "12"), ("pick(", "1e3"), ("", "4"), ("x" * 40, "5"), ("pick(",), "7")  # type: ignore[return-value]

    def distinct_names(self) -> tuple[tuple[str, str], ...]:
        return (("pick(", "place("), ("pick(", ""), ("pick(",), "x")  # type: ignore[return-value]


class _BrokenLanguage(_OddLanguage):
    """A language whose value lookup raises: the request is planned without a bias."""

    def request_values(self, scene: str, instruction: str) -> tuple[tuple[str, str], ...]:
        raise RuntimeError("lookup failed")


def test_with_copy_bias_sets_what_the_engine_accepts_and_nothing_else() -> None:
    plain = SamplingParams(max_tokens=8)
    drone = with_copy_bias(plain, load_language("drone"), SCENE, INSTRUCTION, 10.0)
    assert drone.copy_names == grounded_names(SCENE, INSTRUCTION)
    assert (drone.copy_bias, drone.copy_quote) == (10.0, "'")
    assert drone.copy_openers == load_language("drone").name_openers()
    odd = with_copy_bias(plain, _OddLanguage(), SCENE, INSTRUCTION, 10.0)
    assert (odd.copy_names, odd.copy_openers) == (("cup",), ("pick(",))
    assert with_copy_bias(plain, _OddLanguage("\"'"), SCENE, INSTRUCTION, 10.0) == plain
    assert with_copy_bias(plain, ChatLanguage(), SCENE, INSTRUCTION, 10.0) == plain
    assert with_copy_bias(plain, load_language("drone"), SCENE, INSTRUCTION, 0.0) == plain
    assert drone.copy_values == ()  # no amount said
    moving = with_copy_bias(plain, load_language("drone"), "", "climb 1.5 m", 10.0)
    assert set(zip(moving.copy_value_openers, moving.copy_values, strict=True)) >= {("mu(", "150")}
    assert moving.copy_names == grounded_names("", "climb 1.5 m")
    assert odd.copy_values == ("12",) and odd.copy_value_openers == ("pick(",)
    assert with_copy_bias(plain, _BrokenLanguage(), SCENE, INSTRUCTION, 10.0) == plain
    numbers_only = with_copy_bias(plain, load_language("drone"), "", "climb 1.5 m", 10.0, False)
    assert numbers_only.copy_names == () and numbers_only.copy_values == moving.copy_values
    assert numbers_only.copy_distinct_openers == ()  # no names: nothing to differ from


def test_with_copy_bias_carries_the_names_that_must_differ() -> None:
    plain = SamplingParams(max_tokens=8)
    arm = load_language("arm")
    table = "on table: cup, fork; places: tray"
    params = with_copy_bias(plain, arm, table, "put the cup on the tray", 10.0)
    pairs = tuple(zip(params.copy_distinct_after, params.copy_distinct_openers, strict=True))
    assert pairs == arm.distinct_names() == language_distinct_names(arm)
    assert ("pk(", "pl(") in pairs
    assert (
        with_copy_bias(
            plain, load_language("drone"), SCENE, INSTRUCTION, 10.0
        ).copy_distinct_openers
        == ()
    )
    odd = with_copy_bias(plain, _OddLanguage(), SCENE, INSTRUCTION, 10.0)
    assert (odd.copy_distinct_after, odd.copy_distinct_openers) == (("pick(",), ("place(",))
