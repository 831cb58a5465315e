"""Incremental tokenizer of the plan language: fed one character at a time, it
emits a token the moment the token can no longer grow. `;` and `}` (the statement
terminators) are emitted on their own character, so a statement completes exactly
when its last character arrives."""

from __future__ import annotations

from dataclasses import dataclass

from robot_models.errors import PlanSyntaxError

MAX_TOKEN_CHARS = 128
SINGLE = frozenset("(){},;?&|")
OPERATOR_START = frozenset("=!<>")
WHITESPACE = frozenset(" \t\r\n")


@dataclass(frozen=True)
class Token:
    """kind is one of NAME, VAR, INT, FLOAT, STRING, END or the punctuation itself."""

    kind: str
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    def describe(self) -> str:
        return "end of plan" if self.kind == "END" else repr(self.text)


def _is_name_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


class Lexer:
    """Holds at most one unfinished token between calls."""

    def __init__(self) -> None:
        self._pending = ""  # characters of the unfinished token
        self._mode = ""  # "", "name", "num", "str", "op"
        self._start = 0

    def push(self, ch: str, pos: int) -> list[Token]:
        """Consume one character at absolute position `pos`."""
        out: list[Token] = []
        if self._mode == "str":
            if ch == "'":
                out.append(Token("STRING", self._pending + ch, self._start))
                self._reset()
            elif ch == "\n":
                raise PlanSyntaxError(pos, "closing quote (') of the string", "end of line")
            else:
                self._grow(ch, pos)
            return out
        if self._mode == "name":
            if _is_name_char(ch):
                self._grow(ch, pos)
                return out
            out.append(self._name_token())
        elif self._mode == "num":
            if ch.isascii() and ch.isdigit():
                self._grow(ch, pos)
                return out
            if ch == "." and "." not in self._pending and self._pending not in ("", "-"):
                self._grow(ch, pos)
                return out
            if self._pending == "-":
                if ch == ">":
                    out.append(Token("->", "->", self._start))
                    self._reset()
                    return out
                raise PlanSyntaxError(pos, "a digit or '>' after '-'", repr(ch))
            if self._pending.endswith("."):
                raise PlanSyntaxError(pos, "a digit after the decimal point", repr(ch))
            out.append(self._number_token())
        elif self._mode == "op":
            if ch == "=":
                out.append(Token(self._pending + "=", self._pending + "=", self._start))
                self._reset()
                return out
            if self._pending == "!":
                raise PlanSyntaxError(pos, "'=' after '!'", repr(ch))
            out.append(Token(self._pending, self._pending, self._start))
        self._reset()
        out.extend(self._fresh(ch, pos))
        return out

    def finish(self, pos: int) -> list[Token]:
        """End of text at `pos`: flush the unfinished token, then END."""
        out: list[Token] = []
        if self._mode == "str":
            raise PlanSyntaxError(pos, "closing quote (') of the string", "end of plan")
        if self._mode == "name":
            out.append(self._name_token())
        elif self._mode == "num":
            if self._pending == "-" or self._pending.endswith("."):
                raise PlanSyntaxError(pos, "a digit", "end of plan")
            out.append(self._number_token())
        elif self._mode == "op":
            if self._pending == "!":
                raise PlanSyntaxError(pos, "'=' after '!'", "end of plan")
            out.append(Token(self._pending, self._pending, self._start))
        self._reset()
        out.append(Token("END", "", pos))
        return out

    def _fresh(self, ch: str, pos: int) -> list[Token]:
        if ch in WHITESPACE:
            return []
        if ch in SINGLE:
            return [Token(ch, ch, pos)]
        self._start = pos
        self._pending = ch
        if ch.isascii() and (ch.isalpha() or ch == "_"):
            self._mode = "name"
        elif (ch.isascii() and ch.isdigit()) or ch == "-":
            self._mode = "num"
        elif ch == "'":
            self._mode = "str"
        elif ch in OPERATOR_START:
            self._mode = "op"
        else:
            self._reset()
            raise PlanSyntaxError(
                pos, "a skill call, variable, number, string or operator", repr(ch)
            )
        return []

    def _grow(self, ch: str, pos: int) -> None:
        if len(self._pending) >= MAX_TOKEN_CHARS:
            raise PlanSyntaxError(
                pos, f"a token of at most {MAX_TOKEN_CHARS} characters", "a longer one"
            )
        self._pending += ch

    def _name_token(self) -> Token:
        kind = "VAR" if self._pending.startswith("_") else "NAME"
        return Token(kind, self._pending, self._start)

    def _number_token(self) -> Token:
        return Token("FLOAT" if "." in self._pending else "INT", self._pending, self._start)

    def _reset(self) -> None:
        self._pending = ""
        self._mode = ""
