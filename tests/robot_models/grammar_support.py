"""Plan grammars run by llguidance over a byte "tokenizer" (one token per byte, plus
EOS), so a test checks the grammar text itself, whatever a model's vocabulary, and
the parser's idea of the canonical plans the grammar is meant to accept."""

from __future__ import annotations

import random
import re
from functools import cache
from typing import ClassVar

import llguidance
import llguidance.numpy as llg_numpy
import numpy as np

from robot_models.grammar import VARIABLES
from robot_models.grammar_numbers import MAX_FRACTION_DIGITS, MAX_INT_DIGITS
from robot_models.language import load_language
from robot_models.lexer import Lexer, Token
from robot_models.plan_ast import (
    Assign,
    BoolOp,
    Compare,
    If,
    Literal,
    Loop,
    SkillCall,
    Stmt,
    calls_in,
)
from robot_models.skills import SkillSet

EOS = 256
_WHOLE = rf"-?(?:0|[1-9][0-9]{{0,{MAX_INT_DIGITS - 1}}})"
_INT = re.compile(_WHOLE)
_FLOAT = re.compile(rf"{_WHOLE}\.[0-9]{{1,{MAX_FRACTION_DIGITS}}}")


class _Bytes:
    """What `llguidance.TokenizerWrapper` reads: token i is byte i, then EOS."""

    eos_token_id = EOS
    bos_token_id = None
    tokens: ClassVar[list[bytes]] = [bytes([b]) for b in range(256)] + [b"<eos>"]
    special_token_ids: ClassVar[list[int]] = [EOS]

    def __call__(self, text: bytes) -> list[int]:
        return list(text)


@cache
def byte_tokenizer() -> llguidance.LLTokenizer:
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_Bytes()))


@cache
def _template(robot_type: str) -> llguidance.LLMatcher:
    grammar = llguidance.LLMatcher.grammar_from_lark(load_language(robot_type).grammar())
    matcher = llguidance.LLMatcher(byte_tokenizer(), grammar, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return matcher


def matcher(robot_type: str) -> llguidance.LLMatcher:
    return _template(robot_type).deep_copy()


def grammar_accepts(robot_type: str, text: str) -> bool:
    """The whole of `text`, then EOS, is a plan of the robot's grammar."""
    m = matcher(robot_type)
    return m.consume_tokens(list(text.encode())) and m.is_accepting()


def grammar_prefix(robot_type: str, text: str) -> bool:
    """`text` can still be continued into a plan of the grammar."""
    return matcher(robot_type).consume_tokens(list(text.encode()))


_CLOSING = [ord(c) for c in "')};"]


def random_plan(robot_type: str, rng: random.Random, max_bytes: int = 600) -> tuple[str, bool]:
    """A random walk through the robot's grammar (`random_walk`)."""
    return random_walk(matcher(robot_type), rng, max_bytes)


def random_walk(
    m: llguidance.LLMatcher, rng: random.Random, max_bytes: int = 600
) -> tuple[str, bool]:
    """A random walk through a grammar, byte by byte: (text, ended with EOS).
    Past a random length it closes what is open where it can, and ends at EOS as
    soon as that is allowed."""
    mask = llg_numpy.allocate_token_bitmask(1, EOS + 1)
    target = rng.randrange(1, max_bytes)
    out = bytearray()
    while len(out) < max_bytes:
        llg_numpy.fill_next_token_bitmask(m, mask, 0)
        bits = np.unpackbits(mask[0].view(np.uint8), bitorder="little")[: EOS + 1]
        allowed = np.flatnonzero(bits).tolist()
        assert allowed, f"no continuation after {bytes(out)!r}"
        if EOS in allowed and (len(out) >= target or allowed == [EOS]):
            return out.decode(), True
        closing = [t for t in _CLOSING if t in allowed] if len(out) >= target else []
        if closing and rng.random() < 0.8:
            token = rng.choice(closing)
        else:
            token = rng.choice([t for t in allowed if t != EOS])
        assert m.consume_token(token)
        out.append(token)
    return out.decode("utf-8", errors="ignore"), False


def lex(text: str) -> list[Token]:
    lexer = Lexer()
    tokens = [t for pos, ch in enumerate(text) for t in lexer.push(ch, pos)]
    return tokens + lexer.finish(len(text))


def is_canonical(robot_type: str, text: str) -> bool:
    """Whether a plan the parser accepts is written as the grammar writes plans: no
    whitespace, canonical numbers, variables `_1` to `_9`, literals for typed
    arguments (robot_models/grammar.py lists these limits)."""
    tokens = lex(text)
    if "".join(t.text for t in tokens) != text:
        return False  # whitespace between tokens
    for t in tokens:
        if t.kind == "INT" and (not _INT.fullmatch(t.text) or t.text == "-0"):
            return False
        if t.kind == "FLOAT" and not _FLOAT.fullmatch(t.text):
            return False
        if t.kind == "FLOAT" and t.text.startswith("-") and float(t.text) == 0:
            return False
        if t.kind == "VAR" and t.text not in VARIABLES:
            return False
        if t.kind == "STRING" and any(c in t.text for c in ";(){}\r"):
            return False
    skills = SkillSet.load(robot_type)
    for statement in load_language(robot_type).parse(text):
        if isinstance(statement.node, Assign) and statement.node.var not in VARIABLES:
            return False
        if not _canonical_blocks(statement.node):
            return False
        for call in calls_in(statement.node):
            if not _literal_typed_args(skills, call):
                return False
    return True


def _literal_typed_args(skills: SkillSet, call: SkillCall) -> bool:
    spec = skills.get(call.name)
    pairs = list(zip(spec.args, call.args, strict=True))
    if not all(a.type == "any" or isinstance(v, Literal) for a, v in pairs):
        return False
    names = [v.value for a, v in pairs if a.type == "str" and isinstance(v, Literal)]
    return all(_is_name(str(n)) for n in names)


def _canonical_blocks(node: Stmt) -> bool:
    """Blocks hold a statement; each comparison tests a call or a variable."""
    if isinstance(node, If | Loop) and not (node.body and all(map(_canonical_blocks, node.body))):
        return False
    if isinstance(node, If):
        cond = node.cond
        items = cond.items if isinstance(cond, BoolOp) else (cond,)
        lefts = [c.left if isinstance(c, Compare) else c for c in items]
        return not any(isinstance(left, Literal) for left in lefts)
    return True


def _is_name(text: str) -> bool:
    """An object name as the grammar writes it: none of the plan's punctuation, no
    tab or line break, no space at either end."""
    return text == text.strip() and not any(c in text for c in ";(){},=<>|?\t\n\r")


@cache
def _text_template(grammar: str) -> llguidance.LLMatcher:
    compiled = llguidance.LLMatcher.grammar_from_lark(grammar)
    matcher = llguidance.LLMatcher(byte_tokenizer(), compiled, log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    return matcher


def text_matcher(grammar: str) -> llguidance.LLMatcher:
    """A fresh matcher of any grammar text."""
    return _text_template(grammar).deep_copy()


def text_grammar_accepts(grammar: str, text: str) -> bool:
    """The whole of `text`, then EOS, is a plan of `grammar` (any grammar text)."""
    m = text_matcher(grammar)
    return m.consume_tokens(list(text.encode())) and m.is_accepting()
