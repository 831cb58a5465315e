"""The plan grammar of a robot type: the plan language of `plan_ast.py` with this
robot's skills, their arity, argument types and ranges written into it, so a
decoder masked by it cannot write a statement the parser or the skill checks
would reject (issue #21: plans valid by construction).

The text is an llguidance grammar (Lark syntax with llguidance's parametric
rules): the torch engine masks logits with it, and vLLM's `guidance` structured
outputs backend reads the same text. A plan is read as one flat run of
statements whose rule carries a 64-bit parameter: the block depth (so nesting
stops where the parser's does) and which variables are assigned (so a variable
is read only after its assignment, anywhere later in the plan, as the parser
requires). The plan ends (EOS) only after a statement, outside every block.

Everything the grammar accepts, the parser accepts and the skill checks pass.
It is the parser's language written canonically, with these deliberate limits
(all in `docs/service-api.md`):
- no whitespace (the prompt asks for none; the parser skips it);
- numbers without leading zeros or `-0`, at most MAX_FRACTION_DIGITS decimals;
  unbounded ones at most MAX_INT_DIGITS digits (`grammar_numbers.py`);
- variables are `_1` to `_9` (the parser takes any `_name`);
- a quoted string holds none of the plan's punctuation `;(){}` and no line
  break, and an object name (a typed `str` argument) none of `,=<>|?` either
  and no space at either end:
  plan text never hides inside a string, and a block's end `}` is allowed only
  where a block may end (where a plan near its token limit closes it:
  `PlanLanguage.grammar_closers`);
- a condition tests something the plan cannot know when it is written: each
  comparison's left side is a skill call or a variable (`?'cup'{` or `?0==_1{`
  would be a constant);
- a block (`?cond{...}`, `n{...}`) holds at least one statement;
- an argument of a typed parameter (int, float, str, bool) is a literal, checked
  here; only `any` parameters (`lg`) take variables and skill calls, whose
  values the parser cannot know either;
- a streamed skill (`Skill.max_elements`) takes 1 to max_elements elements, each
  its arguments in order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from robot_models.grammar_numbers import decimal_range_regex, int_range_regex
from robot_models.lexer import MAX_TOKEN_CHARS
from robot_models.parser import MAX_LOOP_COUNT, MAX_NESTING
from robot_models.skills import MAX_STRING_ARG_CHARS, ArgSpec, Skill, SkillSet

VARIABLES = tuple(f"_{i}" for i in range(1, 10))
DEPTH_BITS = "[0:4]"  # block depth 0..MAX_NESTING + 1
_VAR_BIT = {name: 4 + i for i, name in enumerate(VARIABLES)}
# A string anywhere but a typed argument: the lexer's token limit, quotes included.
_FREE_STRING_CHARS = MAX_TOKEN_CHARS - 1
_FREE_CHAR = r"[^'\n\r;(){}]"
_NAME_END = r"[^'\s;(){},=<>|?]"  # an object name's first and last character
_NAME_CHAR = r"[^'\n\r\t;(){},=<>|?]"
_NOT_IN_NAMES = re.compile(r"['\"\\\n\r\t;(){},=<>|?]")


@dataclass
class _Terminals:
    """Lexemes (uppercase names) for argument values, one per distinct definition."""

    by_key: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def name(self, base: str, pattern: str, note: str) -> str:
        """A lexeme matching the regex `pattern`."""
        return self._lexeme(base, pattern, f"/{pattern}/", note)

    def alternatives(self, base: str, names: Sequence[str], note: str) -> str:
        """A lexeme that is one of `names`, quoted (names hold no quote, backslash or
        line break: `grounding.py`'s words and spaces)."""
        for name in names:
            if not name or name != name.strip() or _NOT_IN_NAMES.search(name):
                raise ValueError(f"{name!r} cannot be an object name in a plan")
        body = " | ".join(f"\"'{name}'\"" for name in names)
        return self._lexeme(base, "names:" + body, body, note)

    def _lexeme(self, base: str, key: str, definition: str, note: str) -> str:
        """The lexeme defined as `definition` (one per `key`), named after `base`."""
        if key not in self.by_key:
            name = re.sub(r"[^A-Z0-9_]", "_", base.upper())
            while name in self.by_key.values():
                name += "_"
            self.by_key[key] = name
            self.lines.append(f"{name}: {definition}  // {note}")
        return self.by_key[key]


def plan_grammar(skill_set: SkillSet, names: Sequence[str] | None = None) -> str:
    """The llguidance grammar of plans for `skill_set` (see the module docstring).
    With `names` (`grounding.grounded_names`), an object argument is one of them or
    one of its argument's `known_names`, quoted; a skill left without any name for
    one of its arguments cannot be called."""
    terminals = _Terminals()
    skills = [s for s in skill_set.skills if _callable(s, names)]
    if not skills:
        raise ValueError(f"no skill of the {skill_set.robot_type} can be called with these names")
    calls = [_call_rule(skill, terminals, names) for skill in skills]
    statement_calls = " | ".join(_ref(skill) for skill in skills)
    value_skills = [s for s in skills if s.returns != "none"]
    value_calls = [_ref(s) for s in value_skills]
    # llguidance refuses a parametric rule whose body ignores the parameter
    call = "call::_" if any(map(_takes_values, skills)) else "call"
    value_call = "value_call::_" if any(map(_takes_values, value_skills)) else "value_call"
    allowed = f"%if le({DEPTH_BITS}, {MAX_NESTING})"
    opens = f"%if lt({DEPTH_BITS}, {MAX_NESTING})"  # its block holds a statement
    statements = [
        f'{call} ";" seq::_ {allowed}',
        *(
            f'"{var}" "=" value::_ ";" seq::set_bit({bit}) {allowed}'
            for var, bit in _VAR_BIT.items()
        ),
        f'"?" cond::_ "{{" first::incr({DEPTH_BITS}) {opens}',
        f'LOOP_COUNT "{{" first::incr({DEPTH_BITS}) {opens}',
        f'"->" value::_ ";" seq::_ {allowed}',
    ]
    lines = [
        "%llguidance {}",
        f"// Plans of the {skill_set.robot_type}, generated by robot_models.grammar from its",
        "// skill set. Parameter bits: 0-3 block depth, 4-12 variables _1.._9 assigned.",
        "// A plan is one statement (`first`), then any more (`seq`), ending outside blocks.",
        "start: first::0x0",
        "first::_ : " + "\n  | ".join(statements),
        f'seq::_ : "" %if is_zeros({DEPTH_BITS})',
        f'  | "}}" seq::decr({DEPTH_BITS}) %if gt({DEPTH_BITS}, 0)',
        *(f"  | {statement}" for statement in statements),
        "cond::_ : compare::_ | compare::_ and_more::_ | compare::_ or_more::_",
        'and_more::_ : "&" compare::_ | and_more::_ "&" compare::_',
        'or_more::_ : "|" compare::_ | or_more::_ "|" compare::_',
        "compare::_ : tested::_ | tested::_ COMPARE value::_",
        "tested::_ : variable::_" + (f" | {value_call}" if value_calls else ""),
        'value::_ : NUMBER | STRING | "True" | "False" | variable::_'
        + (f" | {value_call}" if value_calls else ""),
        "variable::_ : "
        + " | ".join(f'"{var}" %if bit_set({bit})' for var, bit in _VAR_BIT.items()),
        f"{call} : {statement_calls}",
    ]
    if value_calls:
        lines.append(f"{value_call} : {' | '.join(value_calls)}")
    lines += calls
    lines += [
        f"LOOP_COUNT: /{int_range_regex(1, MAX_LOOP_COUNT)}/",
        "COMPARE: /==|!=|<=?|>=?/",
        f"NUMBER: /{decimal_range_regex(None, None)}/",
        f"STRING: /'{_FREE_CHAR}{{0,{_FREE_STRING_CHARS}}}'/",
        *terminals.lines,
    ]
    return "\n".join(lines) + "\n"


def _ref(skill: Skill) -> str:
    return f"call_{skill.short}::_" if _takes_values(skill) else f"call_{skill.short}"


def _takes_values(skill: Skill) -> bool:
    """Whether an argument may be a variable or a call (then the rule needs the
    parameter, to know the assigned variables)."""
    return any(arg.type == "any" for arg in skill.args)


def _callable(skill: Skill, names: Sequence[str] | None) -> bool:
    return names is None or all(names or arg.known_names for arg in skill.args if arg.type == "str")


def _call_rule(skill: Skill, terminals: _Terminals, names: Sequence[str] | None) -> str:
    spellings = sorted({skill.short, skill.name}, key=len)
    head = (
        "(" + " | ".join(f'"{n}"' for n in spellings) + ")"
        if len(spellings) > 1
        else f'"{spellings[0]}"'
    )
    args = ' "," '.join(_argument(skill, arg, terminals, names) for arg in skill.args)
    if skill.max_elements is not None and skill.max_elements > 1:  # a streamed skill
        args = f'{args} ("," {args}){{0,{skill.max_elements - 1}}}'
    body = f'{head} "(" {args} ")"' if args else f'{head} "(" ")"'
    return f"{_ref(skill).replace('::_', '')}{'::_' if _takes_values(skill) else ''} : {body}"


def _argument(
    skill: Skill, arg: ArgSpec, terminals: _Terminals, names: Sequence[str] | None
) -> str:
    if arg.type == "any":
        return "value::_"
    if arg.type == "bool":
        return '("True" | "False")'
    if arg.type == "str" and names is not None:
        return terminals.alternatives(
            f"NAME_{skill.short}_{arg.name}" if arg.known_names else "NAME",
            sorted({*names, *arg.known_names}),
            "an object the request names" + (", or a known place" if arg.known_names else ""),
        )
    if arg.type == "str":
        inner = MAX_STRING_ARG_CHARS - 2
        pattern = f"'{_NAME_END}({_NAME_CHAR}{{0,{inner}}}{_NAME_END})?'"
        note = f"a name of 1 to {MAX_STRING_ARG_CHARS} characters"
        return terminals.name("QUOTED", pattern, note)
    low = None if arg.min is None else arg.min
    high = None if arg.max is None else arg.max
    note = f"{skill.short} {arg.name}: {arg.allowed()}"
    if arg.type == "int":
        low_i = None if low is None else math.ceil(low)
        high_i = None if high is None else math.floor(high)
        pattern = int_range_regex(low_i, high_i)
        return terminals.name(f"INT_{_label(low_i)}_TO_{_label(high_i)}", pattern, note)
    pattern = decimal_range_regex(low, high)
    return terminals.name(f"DEC_{_label(low)}_TO_{_label(high)}", pattern, note)


def _label(value: float | None) -> str:
    if value is None:
        return "ANY"
    text = f"{value:g}".replace("-", "M").replace(".", "_")
    return text
