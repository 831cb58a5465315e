"""Extract the open object vocabulary (`data/lexicon/*.txt`) from WordNet and wordfreq.

    python -m robot_models.dataset.lexicon_extract [--out DIR]

A developer tool: it needs the Debian package `wordnet-base` and the optional
dependency group `lexicon` (wordfreq); training reads only the committed lists
(`lexicon.py`). Categories come from WordNet's lexicographer files and hypernym
chains, over the senses people mostly mean (`WordNetNouns.common_senses`); a word is
kept when people type it (wordfreq's Zipf frequency of the whole phrase) and it is
lower case, 1 to 40 characters of letters, spaces and hyphens.

Decontamination: every list loses the words of the two hand-written evaluation sets
(`natural_eval.yaml`'s annotated objects; any entry that occurs, or whose plural
occurs, as a whole word or phrase in an instruction of `natural_eval.yaml` or
`ordinary_instructions.yaml`), so those sets keep measuring unseen objects. It only
removes words; nothing else of the sets is read.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from robot_models.dataset.wordnet_nouns import WORDNET_DIR, Synset, WordNetNouns
from robot_models.natural_eval import alternatives, natural_eval
from robot_models.ordinary_instructions import ordinary_instructions
from robot_models.skills import DATA_DIR, ROBOT_TYPES

LEXICON_DIR = DATA_DIR / "lexicon"
MAX_CHARS = 40
MAX_WORDS = 3
PER_EXTRA_WORD = 1.0
_WORD = re.compile(r"[a-z]+(?:[ -][a-z]+)*")

# Words far more common in instructions (or as generic talk) than as the object they
# also name: a planner reading "turn left at the back" must not see three objects.
_STOP_TEXT = """
    look find check turn move go stop help top left right back front side bit way light
    end set line point place thing stuff piece part item object article unit spot area
    home room space mark sign case track record round ring lead pass hold hit press fly
    stick pick lift land drop shot snap picture photo image view scan spin step run walk
    hand head face eye foot leg body base bottom edge corner centre center middle up down
    near far close open bar block board frame grip handle rest stand stay support drive
    cover drone robot gripper target goal mission task plan order job work call signal
    power charge level stage model type kind sort form shape size colour color pattern
    design style make brand system network net web link bond tie knot spring lot load
    weight mass pile stack heap row column bill cut slice post pole equipment device
    machine tool instrument gear kit supply supplies
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

# Glosses that mark a sense as an insult: never training vocabulary.
_OFFENSIVE = re.compile(
    r"\b(slur|derogatory|offensive|disparaging|obscene|vulgar|contemptuous|slang|insult)"
)


_OFFENSIVE_USAGE = frozenset(
    {"obscenity", "vulgarism", "ethnic_slur", "disparagement", "slang", "profanity"}
)


def _offensive(wordnet: WordNetNouns, synset: Synset) -> bool:
    """A sense marked as an insult or obscenity (by usage domain or gloss)."""
    usage = {lemma for o in synset.usage for lemma in wordnet.synsets[o].lemmas}
    return bool(usage & _OFFENSIVE_USAGE) or bool(_OFFENSIVE.search(synset.gloss))


@dataclass(frozen=True)
class Category:
    """Words with a common sense in `lexfiles` under one of `roots` and under none of
    `exclude` (roots are NLTK-style names: "container.n.01")."""

    file: str
    lexfiles: tuple[str, ...]
    roots: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    min_zipf: float = 2.5
    top: int = 0  # a word's first `top` senses count; 0: WordNetNouns.common_senses
    plant_first: bool = False  # a first sense in noun.plant lets the second count too
    no_adjectives: bool = False  # drop words WordNet also lists as adjectives ("modern")


# Things other objects sit on, in or under: they are not "objects" too.
_LARGE = (
    "furniture.n.01",
    "home_appliance.n.01",
    "plumbing_fixture.n.01",
    "fireplace.n.01",
    "radiator.n.02",
    "bookcase.n.01",
    "structure.n.01",
    "conveyance.n.03",
    "facility.n.01",
    "way.n.06",
    "weapon.n.01",
    "machine.n.01",
    "establishment.n.04",
    "room.n.01",
    "area.n.05",
    "vessel.n.02",
    "aircraft.n.01",
    "public_transport.n.01",
    "installation.n.02",
    "system.n.01",
    "track.n.01",
    "explosive_device.n.01",
    "electrode.n.01",
    "roof.n.01",
    # machine parts and plant: not things a person loses or a robot fetches
    "tank.n.02",
    "mechanism.n.05",
    "engine.n.01",
    "brake.n.01",
    "gear.n.01",
    "ammunition.n.01",
    "radar.n.01",
    "transmission.n.05",
    "valve.n.03",
)

CATEGORIES = (
    Category(
        "objects.txt",
        ("noun.artifact",),
        (
            "implement.n.01",
            "container.n.01",
            "clothing.n.01",
            "accessory.n.01",
            "jewelry.n.01",
            "toy.n.01",
            "game_equipment.n.01",
            "sports_equipment.n.01",
            "tableware.n.01",
            "kitchen_utensil.n.01",
            "cutlery.n.02",
            "writing_implement.n.01",
            "stationery.n.01",
            "musical_instrument.n.01",
            "electronic_device.n.01",
            "electronic_equipment.n.01",
            "device.n.01",
            "instrument.n.01",
            "equipment.n.01",
            "covering.n.02",
            "bag.n.01",
            "box.n.01",
            "bottle.n.01",
            "bicycle.n.01",
            "book.n.02",
            "toiletry.n.01",
            "decoration.n.01",
            "paper.n.01",
            "wrapping.n.01",
            "commodity.n.01",
            "lamp.n.01",
            "cushion.n.03",
            "pillow.n.01",
            "bedclothes.n.01",
        ),
        _LARGE,
    ),
    Category(
        "furniture.txt",
        ("noun.artifact",),
        (
            "furniture.n.01",
            "home_appliance.n.01",
            "plumbing_fixture.n.01",
            "fireplace.n.01",
            "radiator.n.02",
            "counter.n.01",
            "shelf.n.01",
            "bookcase.n.01",
            "worktable.n.01",
            "stove.n.01",
            "stairs.n.01",
            "staircase.n.01",
            "door.n.01",
            "window.n.01",
            "rack.n.05",
            "sink.n.01",
            "bathtub.n.01",
        ),
    ),
    Category(
        "fruits.txt",
        ("noun.food",),
        ("edible_fruit.n.01", "edible_nut.n.01"),
        top=1,
        plant_first=True,  # "strawberry": the plant, then the fruit
    ),
    Category(
        "vegetables.txt",
        ("noun.food",),
        ("vegetable.n.01", "herb.n.02"),
        ("edible_fruit.n.01", "tea.n.05"),
        top=1,
        plant_first=True,
    ),
    Category(
        "animals.txt",
        ("noun.animal",),
        (
            "mammal.n.01",
            "bird.n.01",
            "fish.n.01",
            "reptile.n.01",
            "amphibian.n.03",
            "insect.n.01",
            "arachnid.n.01",
            "domestic_animal.n.01",
        ),
        ("hominid.n.01",),
        min_zipf=3.5,
        top=1,
    ),
    Category(
        "people.txt", ("noun.person",), ("person.n.01",), min_zipf=4.0, top=1, no_adjectives=True
    ),
    Category(
        "tableware.txt",
        ("noun.artifact",),
        ("tableware.n.01", "cutlery.n.02", "drinking_vessel.n.01", "dish.n.01", "crockery.n.01"),
    ),
    Category(
        "writing.txt",
        ("noun.artifact",),
        (
            "writing_implement.n.01",
            "measuring_stick.n.01",
            "eraser.n.01",
            "drafting_instrument.n.01",
            "pencil_sharpener.n.01",
        ),
    ),
    Category(
        "waste.txt",
        ("noun.artifact", "noun.substance", "noun.object"),
        (
            "waste.n.01",
            "wrapping.n.01",
            "packaging.n.03",
            "tissue.n.02",
            "scrap.n.02",
            "litter.n.02",
            "paper.n.01",
            "napkin.n.01",
            "receipt.n.02",
            "can.n.01",
        ),
        ("playing_card.n.01",),
    ),
    Category(
        "reading.txt",
        ("noun.artifact", "noun.communication"),
        ("publication.n.01", "book.n.02", "periodical.n.01", "folder.n.02", "binder.n.03"),
        min_zipf=3.0,
        top=1,
        no_adjectives=True,
    ),
    Category(
        "colours.txt",
        ("noun.attribute",),
        ("chromatic_color.n.01", "achromatic_color.n.01"),
        min_zipf=3.0,
    ),
    Category(
        "materials.txt",
        ("noun.substance", "noun.artifact"),
        (
            "metal.n.01",
            "plastic.n.01",
            "wood.n.01",
            "fabric.n.01",
            "glass.n.01",
            "leather.n.01",
            "paper.n.01",
            "ceramic.n.01",
            "rubber.n.01",
            "stone.n.02",
        ),
        ("playing_card.n.01", "sail.n.01", "card.n.01", "pad.n.01", "log.n.01", "cope.n.01"),
        min_zipf=4.0,
        top=1,
    ),
)

# Attributes describe an object in an instruction; the sets' instructions use ordinary
# colour words ("the red book") that are not the unseen objects decontamination
# protects, so attribute lists lose only annotated object strings.
ATTRIBUTE_FILES = frozenset({"colours.txt", "materials.txt"})


def phrase(lemma: str) -> str | None:
    """WordNet's "tape_measure" -> "tape measure"; None for what no list may hold."""
    word = lemma.replace("_", " ")
    if (
        word != word.lower()
        or not 1 <= len(word) <= MAX_CHARS
        or not _WORD.fullmatch(word)
        or len(word.split()) > MAX_WORDS
    ):
        return None
    return word


def min_zipf(category: Category, word: str) -> float:
    """wordfreq has no phrase counts: it estimates a phrase from its words, so
    "european house cricket" scores like "house". Each further word asks one more
    Zipf point, which keeps "tape measure" and drops rare compounds."""
    return category.min_zipf + PER_EXTRA_WORD * (len(re.split(r"[ -]", word)) - 1)


def extract(wordnet: WordNetNouns, zipf: Callable[[str], float], category: Category) -> set[str]:
    """The words of `category`, before decontamination."""
    roots = {wordnet.synset(name) for name in category.roots}
    exclude = {wordnet.synset(name) for name in category.exclude}
    words: set[str] = set()
    for lemma in wordnet.senses:
        word = phrase(lemma)
        if word is None or (word in STOP_WORDS and category.file not in ATTRIBUTE_FILES):
            continue
        every = wordnet.synsets_of(lemma)
        if any(_offensive(wordnet, s) for s in every):
            continue
        if category.no_adjectives and lemma in wordnet.adjectives:
            continue
        if category.top:
            senses = every[: category.top]
        else:
            senses = [wordnet.synsets[o] for o in wordnet.common_senses(lemma)]
        if category.plant_first and every and every[0].lexfile == "noun.plant":
            senses = every[:2]
        fits = any(
            s.lexfile in category.lexfiles
            and not s.is_instance
            and lemma in s.lemmas  # as written there: "Granny_Smith" is a name
            and roots & wordnet.ancestors(s.offset)
            and not exclude & wordnet.ancestors(s.offset)
            for s in senses
        )
        if fits and zipf(word) >= min_zipf(category, word):
            words.add(word)
    return words


def evaluation_text() -> tuple[set[str], list[str]]:
    """The annotated object strings of the natural set and the lower-cased instructions
    of both hand-written sets (decontamination reads nothing else of them)."""
    annotated: set[str] = set()
    instructions: list[str] = []
    for robot_type in ROBOT_TYPES:
        for entry in natural_eval(robot_type):
            instructions.append(entry.instruction.lower())
            for choice in entry.objects:
                annotated.update(a.lower() for a in alternatives(choice))
        instructions += [o.instruction.lower() for o in ordinary_instructions(robot_type)]
    return annotated, instructions


def plurals(word: str) -> tuple[str, ...]:
    """The word and the regular plurals of its last word."""
    forms = [word, word + "s", word + "es"]
    if word.endswith("y"):
        forms.append(word[:-1] + "ies")
    if word.endswith(("f", "fe")):
        forms.append(word.rsplit("f", 1)[0] + "ves")
    return tuple(forms)


def contaminated(words: Iterable[str], annotated: set[str], instructions: list[str]) -> set[str]:
    """The words an evaluation set names: annotated, or said in an instruction."""
    text = "\n".join(instructions)
    hit = set()
    for word in words:
        if word in annotated:
            hit.add(word)
            continue
        pattern = r"(?<![a-z])(?:" + "|".join(map(re.escape, plurals(word))) + r")(?![a-z])"
        if re.search(pattern, text):
            hit.add(word)
    return hit


def write_list(path: Path, words: Iterable[str], header: str) -> None:
    path.write_text(f"# {header}\n" + "".join(f"{w}\n" for w in sorted(words)), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=LEXICON_DIR)
    parser.add_argument("--wordnet", type=Path, default=WORDNET_DIR)
    args = parser.parse_args(argv)
    import wordfreq  # only this tool needs it: the optional dependency group `lexicon`

    def zipf(word: str) -> float:
        return float(wordfreq.zipf_frequency(word, "en"))

    wordnet = WordNetNouns.load(args.wordnet)
    annotated, instructions = evaluation_text()
    args.out.mkdir(parents=True, exist_ok=True)
    for category in CATEGORIES:
        words = extract(wordnet, zipf, category)
        if category.file in ATTRIBUTE_FILES:
            removed = words & annotated
        else:
            removed = contaminated(words, annotated, instructions)
        kept = words - removed
        header = (
            f"{category.file}: made by python -m robot_models.dataset.lexicon_extract from "
            f"WordNet 3.0 (Debian wordnet-base) and wordfreq {version('wordfreq')}, zipf >= "
            f"{category.min_zipf}; {len(removed)} words of the evaluation sets removed "
            "(decontamination only removes words)"
        )
        write_list(args.out / category.file, kept, header)
        print(f"{category.file:16} {len(kept):5} words ({len(removed)} removed)")


if __name__ == "__main__":
    main()
