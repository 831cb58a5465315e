"""The planner's prompts: a fixed per-robot prefix and the per-request part.

Tokenization contract (training, `evaluate`, and every serving engine):

    ids = encode(prompt_prefix(robot_type))
        + encode(format_request(scene, instruction))
        + encode(plan) + [eos]

Each part is encoded on its own with the checkpoint's `tokenizer.json` (no BOS, no
special tokens added), and the ids are concatenated. The prefix is identical for
every request of a robot type, so a server prefills it once and reuses its KV.
The model ends a plan by emitting the EOS token (`<eos>`).
"""

from __future__ import annotations

from functools import cache

from robot_models.skills import MAX_STRING_ARG_CHARS, SkillSet, check_robot_type

_ARTICLE = {"drone": "a", "arm": "an"}

_ROBOT_INTRO = {
    "drone": (
        "You are the task planner of a small indoor quadcopter (a Tello-class drone) with a "
        "forward-looking camera. An operator or the fleet gives you a task, together with "
        "what the drone currently sees. You answer with a plan: a program in the compact "
        "plan language below, which the drone starts executing while you are still writing "
        "it. The drone flies indoors, among people, furniture and pets, so keep moves short "
        "and safe, and react at once to urgent situations."
    ),
    "arm": (
        "You are the task planner of a six-axis collaborative robot arm with a parallel "
        "gripper, mounted at the edge of a table. An operator or the fleet gives you a task, "
        "together with what lies on the table and which bins and places are around it. You "
        "answer with a plan: a program in the compact plan language below, which the arm "
        "starts executing while you are still writing it. Positions are in millimetres in "
        "the robot base frame; the arm works next to people, so it moves carefully."
    ),
}

_LANGUAGE_GUIDE = """\
## Plan language
A plan is a sequence of statements written without spaces or line breaks.
- A skill call is the short name of a skill with its arguments in parentheses, then a
  semicolon: {call} calls with no argument keep the parentheses: {noarg}
- Strings are written in single quotes: {str_call} Numbers are plain: {num_call}
- A variable starts with an underscore and keeps a value returned by a skill:
  {var} A variable can be used later as an argument or in a condition.
- A conditional runs its block only if the condition holds: {cond}
  There is no else branch. Conditions compare values with == != < <= > >= and can be
  joined with & (and) or | (or), but not both in one condition.
- A loop repeats its block a fixed number of times: {loop}
- A return ends the plan with a value: ->True;
- Each statement is executed as soon as it is complete, so put the most urgent action
  first and never write a statement you do not want executed.
- Use only the skills listed above, with arguments inside their ranges.
- The plan ends when you stop writing; do not add explanations.
"""

_LANGUAGE_EXAMPLES = {
    "drone": {
        "call": "mf(100);",
        "noarg": "tp();",
        "str_call": "a('cat');",
        "num_call": "tc(90); dl(2.5);",
        "var": "_1=ox('cat');",
        "cond": "?iv('cat')==True{tp();}",
        "loop": "4{mf(100);tc(90);}",
    },
    "arm": {
        "call": "mt(400,0,300);",
        "noarg": "hm();",
        "str_call": "pk('cup');",
        "num_call": "mt(300,-120,250);",
        "var": "_1=lk('cup');",
        "cond": "?lk('cup')==True{pk('cup');pl('tray');}",
        "loop": "2{og();cg();}",
    },
}

_GUIDANCE = {
    "drone": """\
## Guidance
- Searching: sw(object) turns in place until the object is in view and returns True if it
  was found. When the target is already listed as visible in the scene, do not sweep:
  orient to it with o(object) and approach it with a(object).
- To inspect something that is on, in or under another object, first find and approach
  the larger object, then look for the small one with iv(object).
- Take a picture with tp() whenever the task asks to check, find or look at something, so
  the operator can see the result.
- Urgent situations (a person or animal too close, an obstacle ahead) come first: move
  away from the danger immediately, before anything else. Move away from the side the
  danger comes from: danger in front means mb, from the left means mr, from the right
  means ml, from behind means mf. Then climb with mu to get out of reach.
- Moves are relative to the drone and take distances in centimetres (20 to 500).
  Turns take degrees (1 to 360): tc turns clockwise (right), tu counter-clockwise (left).
- To fly a shape, loop over one side: a square is 4{mf(d);tc(90);}, a triangle is
  3{mf(d);tc(120);}.
- To turn around until something is seen, loop eight times over a check and a 45 degree
  turn, returning True when seen, and return False after the loop.
""",
    "arm": """\
## Guidance
- Start a manipulation task from the home pose with hm(); and end it there with hm();
- Before picking an object, check that it is on the table with lk(object) inside a
  conditional, so the arm does not grasp at nothing: ?lk('cup')==True{pk('cup');pl('tray');}
- Desk cleaning puts every object where it belongs: cups, mugs, glasses, bowls and plates
  on the tray; pens, pencils, markers and rulers in the holder; paper, wrappers, tissues
  and cans in the bin; books and notebooks on the shelf. Handle the objects in the order
  the scene lists them.
- Sorting fruit and vegetables uses so(object, bin) for each item that lk finds, in the
  order the scene lists them, into the fruit bin or the vegetable bin.
- Stacking builds a tower from the bottom up: pick each next object and place it on the
  previous one, bottom object first, checking each one with lk first.
- To hand an object to a person, pick it, move to the hand-over pose mt(400,0,300), open
  the gripper with og() and go home.
- Coordinates for mt are millimetres: x 150 to 750, y -500 to 500, z 0 to 600.
""",
}

_EXAMPLES = {
    "drone": [
        (
            "visible: sofa, lamp, rug",
            "Find the remote control",
            "?sw('remote control')==True{o('remote control');a('remote control');tp();}",
        ),
        ("visible: dog, chair, table", "Go to the dog and take a photo", "o('dog');a('dog');tp();"),
        ("visible: plant, window", "Fly up 60 cm and turn right by 45 degrees", "mu(60);tc(45);"),
        (
            "visible: person, door",
            "A child is running at the drone from the left, do not hurt them",
            "mr(100);mu(50);",
        ),
        ("visible: shelf, boxes", "Fly a square with sides of 120 cm", "4{mf(120);tc(90);}"),
        (
            "visible: desk, monitor",
            "Turn around until you see the printer",
            "8{?iv('printer')==True{->True;}tc(45);}->False;",
        ),
        (
            "visible: table, vase",
            "Check the plant on the table",
            "?sw('table')==True{o('table');a('table');?iv('plant')==True{tp();}}",
        ),
    ],
    "arm": [
        (
            "on table: mug, marker, tissue; places: tray, holder, bin, shelf",
            "Tidy up the table",
            "hm();?lk('mug')==True{pk('mug');pl('tray');}?lk('marker')==True{pk('marker');pl('holder');}"
            "?lk('tissue')==True{pk('tissue');pl('bin');}hm();",
        ),
        (
            "on table: pear, onion, lime; bins: fruit bin, vegetable bin",
            "Sort the produce into the bins",
            "hm();?lk('pear')==True{so('pear','fruit bin');}"
            "?lk('onion')==True{so('onion','vegetable bin');}"
            "?lk('lime')==True{so('lime','fruit bin');}hm();",
        ),
        (
            "on table: yellow cube, black cube",
            "Stack the black cube on the yellow cube",
            "og();hm();?lk('black cube')==True{pk('black cube');pl('yellow cube');}hm();",
        ),
        ("on table: stapler", "Move the gripper to x 420, y -150, z 200", "mt(420,-150,200);"),
        (
            "on table: scissors, tape",
            "Hand me the tape",
            "hm();?lk('tape')==True{pk('tape');mt(400,0,300);og();}hm();",
        ),
    ],
}


def _language_guide(robot_type: str) -> str:
    guide = _LANGUAGE_GUIDE
    for key, example in _LANGUAGE_EXAMPLES[robot_type].items():
        guide = guide.replace("{" + key + "}", example)
    return guide


def _skill_table(skill_set: SkillSet) -> str:
    lines = [
        "## Skills",
        "Each line: short name(arguments) -> returned value: what it does. String arguments",
        f"are quoted names of 1 to {MAX_STRING_ARG_CHARS} characters, e.g. 'red cup'.",
    ]
    for skill in skill_set.skills:
        ranges = "; ".join(
            f"{a.name}: {a.allowed()}" for a in skill.args if a.type in ("int", "float")
        )
        ret = f" -> {skill.returns}" if skill.returns != "none" else ""
        detail = f" [{ranges}]" if ranges else ""
        lines.append(
            f"- {skill.signature()}{ret}: {skill.description} (full name {skill.name}){detail}"
        )
    return "\n".join(lines) + "\n"


def _examples(robot_type: str) -> str:
    parts = ["## Examples"]
    for scene, instruction, plan in _EXAMPLES[robot_type]:
        parts.append(format_request(scene, instruction) + plan + "\n")
    return "\n".join(parts)


@cache
def prompt_prefix(robot_type: str, streamed: bool = False) -> str:
    """The fixed prompt of `robot_type`: role, skills, language, guidance, examples.
    `streamed`: its streamed skills are listed too (a different prefix, which the
    shipped checkpoint was not trained on)."""
    check_robot_type(robot_type)
    skill_set = SkillSet.load(robot_type, streamed=streamed)
    return (
        f"# Planner for {_ARTICLE[robot_type]} {robot_type}\n{_ROBOT_INTRO[robot_type]}\n\n"
        f"{_skill_table(skill_set)}\n"
        f"{_language_guide(robot_type)}\n{_GUIDANCE[robot_type]}\n{_examples(robot_type)}\n"
    )


def format_request(scene: str, instruction: str) -> str:
    """The per-request part of the prompt; the plan follows it directly."""
    return f"### Request\nScene: {scene.strip()}\nTask: {instruction.strip()}\nPlan:\n"
