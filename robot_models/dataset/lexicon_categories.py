"""What goes in each list of the open vocabulary (`data/lexicon/`): WordNet roots,
exclusions and frequency thresholds, read by `lexicon_extract.py`."""

from __future__ import annotations

from dataclasses import dataclass


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
    describes: bool = False  # a one-word entry must also be an adjective ("red", not "redness")
    parts_of: tuple[str, ...] = ()  # drop parts of these wholes' kinds: a car's accelerator
    parts_kept: tuple[str, ...] = ()  # parts of those wholes that stay: a container
    headed: bool = False  # a phrase's last word must be in the list: "guide dog", not "large white"
    unambiguous: bool = False  # no common sense outside `lexfiles`: "tiger", "trailer"
    keep: tuple[str, ...] = ()  # in despite `exclude`: a bicycle is a vehicle one can move
    attribute: bool = False  # describes an object: no stop-list, lighter decontamination


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
    "circuit.n.01",
    "reactor.n.01",
    "nuclear_reactor.n.01",
    # not a thing at all, or not one to fetch
    "plating.n.01",
    "merchandise.n.01",
    "instrument_of_execution.n.01",
    "piano.n.01",
    "bathtub.n.01",
)

# Wholes whose parts are not objects a robot fetches (a lamp's shade is; a car's
# dashboard, a building's doorstep, an engine's crankshaft are not).
_INFRASTRUCTURE = (
    "structure.n.01",
    "conveyance.n.03",
    "facility.n.01",
    "way.n.06",
    "machine.n.01",
    "engine.n.01",
    "vessel.n.02",
    "aircraft.n.01",
    "mechanism.n.05",
)

# Kinds that stay objects even where WordNet names them a part of something large
_PORTABLE = ("container.n.01", "optical_instrument.n.01", "clothing.n.01")

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
        parts_of=_INFRASTRUCTURE,
        parts_kept=_PORTABLE,
        keep=(
            "bicycle.n.01",
            "skateboard.n.01",
            "scooter.n.02",
            "tricycle.n.01",
            "unicycle.n.01",
            "baby_buggy.n.01",
            "wheelchair.n.01",
            "wagon.n.04",
        ),
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
        ("establishment.n.04",),
        parts_of=("conveyance.n.03",),  # a car door is no furniture of a room
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
        no_adjectives=True,  # "entire", "stray", "hind"
        headed=True,
    ),
    Category(
        "people.txt",
        ("noun.person",),
        (  # the people a robot meets at work or at home, by role or relation
            "worker.n.01",
            "professional.n.01",
            "expert.n.01",
            "official.n.01",
            "leader.n.01",
            "serviceman.n.01",
            "performer.n.01",
            "athlete.n.01",
            "student.n.01",
            "relative.n.01",
            "spouse.n.01",
            "parent.n.01",
            "offspring.n.01",
            "child.n.01",
            "juvenile.n.01",
            "adult.n.01",
            "man.n.01",
            "woman.n.01",
            "friend.n.01",
            "neighbor.n.01",
            "guest.n.01",
            "visitor.n.01",
            "host.n.01",
            "customer.n.01",
            "patient.n.01",
            "traveler.n.01",
            "user.n.01",
            "owner.n.01",
            "messenger.n.01",
        ),
        (  # never a role to name someone by in training data
            "bad_person.n.01",
            "unpleasant_person.n.01",
            "prostitute.n.01",
            "simpleton.n.01",
            "criminal.n.01",
            "wrongdoer.n.01",
            "white_person.n.01",
            "black_person.n.01",
            "slave.n.01",
            "killer.n.01",
        ),
        min_zipf=4.0,
        top=1,
        no_adjectives=True,
        unambiguous=True,
        headed=True,
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
        (  # what goes in a desk bin, not bodily or industrial waste
            "playing_card.n.01",
            "body_waste.n.01",
            "dung.n.01",
            "vomit.n.01",
            "urine.n.01",
            "sewage.n.01",
            "pollutant.n.01",
            "exhaust.n.01",
            "effluent.n.01",
            "toxic_waste.n.01",
            "scrap_metal.n.01",
            "impurity.n.01",
        ),
        min_zipf=3.0,
        top=1,
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
        top=99,  # every sense: "grey" is a person's name first
        describes=True,  # "red", not "redness"
        attribute=True,
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
            "alloy.n.01",
        ),
        ("playing_card.n.01", "sail.n.01", "card.n.01", "pad.n.01", "log.n.01", "cope.n.01"),
        min_zipf=4.0,
        top=1,
        attribute=True,
    ),
)

# WordNet links few material adjectives to their nouns ("wooden" has no pointer to
# wood): the adjective joins the list when its noun was extracted.
MATERIAL_ADJECTIVES = {
    "wood": "wooden",
    "wool": "woollen",
    "gold": "golden",
    "metal": "metallic",
    "silk": "silken",
    "earthenware": "earthen",
}
