"""Grounded object names (`robot_models.grounding`) and the per-request grammar that
allows only them (`plan_grammar(..., names=...)`, `RobotPlanLanguage.request_grammar`)."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from robot_models.grammar import plan_grammar
from robot_models.grounding import grounded_names, request_phrases, scene_items
from robot_models.language import load_language
from robot_models.plan_ast import Literal, calls_in
from robot_models.skills import ArgSpec, SkillSet
from tests.robot_models.grammar_support import random_walk, text_grammar_accepts, text_matcher


def test_a_phrase_is_a_whole_run_without_function_words() -> None:
    phrases = request_phrases("Could you search the room for a yellow rubber duck?")
    assert phrases == ["room", "yellow rubber duck"]
    # a name is quoted as said: no part of a run alone; "search" takes "the room"
    assert not {"duck", "rubber duck", "yellow", "search"} & set(phrases)


def test_a_run_that_opens_its_clause_may_start_with_a_verb() -> None:
    assert request_phrases("grab red cup, then find keys") == [
        "grab red cup",
        "red cup",
        "find keys",
        "keys",
    ]
    assert request_phrases("red cup to the tray") == ["red cup", "cup", "tray"]
    assert request_phrases("put the red cup away") == ["red cup"]


@pytest.mark.parametrize(
    ("text", "names", "not_names"),
    [
        # a run followed by a determiner or a personal pronoun is a verb or a modal
        ("load the gear into the jig", {"gear", "jig"}, {"load"}),
        ("can u hand me the lighter?", {"lighter"}, {"can", "hand", "can u"}),
        ("have you seen my keys", {"keys"}, {"seen", "have"}),
        # a word that can only be a verb or an adverb is never in a name
        ("bring multimeter over to me", {"multimeter"}, {"bring multimeter", "bring"}),
        ("turn slowly until you spot the exit sign", {"exit sign"}, {"slowly", "turn slowly"}),
        # a name ends in a word that can be a noun; modifiers may start one
        ("my stapler walked off again", {"stapler"}, {"stapler walked", "walked"}),
        ("is the toaster unplugged?", {"toaster"}, {"toaster unplugged", "unplugged"}),
        ("find the broken flashlight", {"broken flashlight"}, {"broken", "flashlight"}),
        ("hunt down the watering can", {"watering can"}, {"watering", "can"}),
        # words WordNet does not know (new names, typos) may be names
        ("find the florbin by the whre", {"florbin", "whre"}, set()),
    ],
)
def test_names_follow_english_word_classes(text: str, names: set[str], not_names: set[str]) -> None:
    phrases = set(request_phrases(text))
    assert names <= phrases, phrases
    assert not not_names & phrases, phrases


def test_the_word_lists_are_what_the_extractor_writes() -> None:
    from robot_models.grounding import FUNCTION_WORDS, MODIFIERS, NEVER_IN_NAMES, OBJECT_OPENERS

    assert {"the", "my", "u", "me"} <= OBJECT_OPENERS <= FUNCTION_WORDS
    assert "that" not in OBJECT_OPENERS  # "the cup that fell" names the cup
    assert {"walked", "tiny", "broken"} <= MODIFIERS and {"bring", "slowly"} <= NEVER_IN_NAMES
    # nouns are never listed, whatever else they can be
    assert not {"keys", "can", "drill", "watch", "file", "place"} & (MODIFIERS | NEVER_IN_NAMES)


def test_phrases_stay_inside_clauses_and_words() -> None:
    phrases = request_phrases("grab the cup, then the plate; the baby's pacifier → bin")
    assert {"cup", "plate", "baby", "pacifier", "bin"} <= set(phrases)
    assert "cup then" not in phrases and "plate baby" not in phrases
    assert "baby s pacifier" not in phrases and "pacifier bin" not in phrases
    assert "half-finished canvas" in request_phrases("photograph the half-finished canvas")


def test_scene_items_drop_their_labels() -> None:
    scene = "on table: jar of pickles, spoon; places: fridge tray"
    assert scene_items(scene) == ["jar of pickles", "spoon", "fridge tray"]
    assert scene_items("") == []
    names = grounded_names(scene, "put it away")
    assert {"jar of pickles", "spoon", "fridge tray"} <= set(names)
    assert not {"pickles", "jar", "tray"} & set(names)  # items are names as listed
    assert not {"on table", "table", "places"} & set(names)


def test_names_come_as_written_and_in_lower_case_in_a_stable_order() -> None:
    names = grounded_names("visible: Red Door", "FIND the Blue Sneakers")
    assert {"Blue Sneakers", "blue sneakers", "Red Door", "red door"} <= set(names)
    assert names == tuple(sorted(names))
    assert grounded_names("visible: Red Door", "FIND the Blue Sneakers") == names


def test_a_grounded_drone_plan_names_only_what_the_request_names() -> None:
    names = grounded_names("visible: sofa, coffee table", "have you seen my car keys?")
    grammar = plan_grammar(SkillSet.load("drone"), names)
    for plan in (
        "?sw('car keys')==True{o('car keys');a('car keys');tp();}",
        "?iv('car keys')==True{tp();}",
        "o('coffee table');a('coffee table');tp();",
        "mu(50);tc(90);",  # plans without objects are as before
        "lg('cannot see them');",  # a message is not an object name
    ):
        assert text_grammar_accepts(grammar, plan), plan
    for plan in (
        "?sw('toy')==True{tp();}",
        "o('car');tp();",  # a run's beginning
        "o('keys');tp();",  # nor its end: the name as said
        "o('Car Keys');tp();",  # neither as written nor lower case
        "o('sofa coffee table');",
    ):
        assert not text_grammar_accepts(grammar, plan), plan


def test_the_arm_may_also_use_its_known_places_where_a_place_goes() -> None:
    names = grounded_names("on table: mug, eraser", "tidy up")
    grammar = plan_grammar(SkillSet.load("arm"), names)
    assert text_grammar_accepts(grammar, "?lk('mug')==True{pk('mug');pl('tray');}")
    assert text_grammar_accepts(grammar, "so('eraser','vegetable bin');")
    assert not text_grammar_accepts(grammar, "pk('tray');")  # a place is not an object
    assert not text_grammar_accepts(grammar, "so('mug','tray');")  # nor a bin
    assert not text_grammar_accepts(grammar, "pk('pen');pl('holder');")


def test_object_skills_drop_out_when_the_request_names_nothing() -> None:
    grammar = plan_grammar(SkillSet.load("drone"), ())
    assert text_grammar_accepts(grammar, "tk();mu(100);ld();")
    assert not text_grammar_accepts(grammar, "?sw('x')==True{tp();}")


@pytest.mark.parametrize("robot_type", ["drone", "arm"])
def test_random_plans_of_a_request_grammar_parse_and_stay_grounded(robot_type: str) -> None:
    scene = "visible: blue crate, ladder" if robot_type == "drone" else "on table: cup, pen"
    instruction = "check the orange traffic cone near the loading dock, then the cup"
    language = load_language(robot_type)
    grammar = language.request_grammar(scene, instruction)
    allowed = set(grounded_names(scene, instruction))
    known = {n for s in language.skill_set.skills for a in s.args for n in a.known_names}
    rng = random.Random(7)
    named = 0
    for _ in range(40):
        text, ended = random_walk(text_matcher(grammar), rng)
        if not ended:
            continue
        for statement in language.parse(text):
            for call in calls_in(statement.node):
                skill = language.skill_set.get(call.short)
                for spec, arg in zip(skill.args, call.args, strict=False):
                    if spec.type == "str" and isinstance(arg, Literal):
                        assert arg.value in allowed | set(spec.known_names), text
                        named += 1
    assert named > 0
    places = {"tray", "holder", "bin", "shelf", "fruit bin", "vegetable bin"}
    assert known == (places if robot_type == "arm" else set())


def test_known_names_are_checked() -> None:
    with pytest.raises(ValidationError, match="known_names need type str"):
        ArgSpec(name="x", type="int", known_names=("tray",))
    with pytest.raises(ValidationError, match="not words of letters"):
        ArgSpec(name="x", type="str", known_names=("tray's",))
    assert ArgSpec(name="x", type="str", known_names=("fruit bin",)).known_names == ("fruit bin",)


def test_the_language_grammar_is_unchanged_without_a_request() -> None:
    language = load_language("drone")
    assert text_grammar_accepts(language.grammar(), "?sw('toy')==True{tp();}")
    assert not text_grammar_accepts(language.request_grammar("", "find my keys"), "o('toy');")
