"""What the service asks of a plan language's grammar side (language/grammar.py):
each optional protocol is used when a language implements it, and a language that
does not gets the documented defaults."""

from __future__ import annotations

from robot_models.grounding import grounded_names
from robot_models.language import load_language
from timely_core.language.chat_language import ChatLanguage
from timely_core.language.grammar import (
    CopyingLanguage,
    language_closers,
    language_copy_names,
    language_grammar,
    language_hard_closers,
    language_name_openers,
    language_quote,
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
