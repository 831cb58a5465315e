"""Streaming parser of the plan language (grammar in `plan_ast.py`).

The recursive-descent parser runs as a generator coroutine that is sent one token
at a time, so feeding text costs work proportional to the new characters only
(nothing is ever re-parsed). A statement is reported the moment its terminator
arrives; invalid text raises at the first character that rules out every valid
continuation, and a skill call is validated argument by argument as it streams
(Conveyor: a bad call is rejected before it is fully decoded).
"""

from __future__ import annotations

from collections.abc import Generator

from robot_models.errors import PlanSyntaxError, SkillValidationError
from robot_models.lexer import Lexer, Token
from robot_models.plan_ast import (
    Assign,
    BoolOp,
    CallStmt,
    Compare,
    Condition,
    Expr,
    If,
    Literal,
    Loop,
    PlanStatement,
    Return,
    SkillCall,
    Stmt,
    VarRef,
    calls_in,
)
from robot_models.skills import SkillSet

MAX_NESTING = 8
MAX_LOOP_COUNT = 100
COMPARE_OPS = frozenset({"==", "!=", "<", "<=", ">", ">="})
STATEMENT_START = "a statement (skill call, _variable=..., ?condition{...}, N{...} or ->value;)"

_Coroutine = Generator[None, Token, Token]  # receives tokens; returns the lookahead token


class PlanParser:
    """One plan of one robot type. `feed` may be called with chunks of any size."""

    def __init__(self, skill_set: SkillSet) -> None:
        self._skills = skill_set
        self._lexer = Lexer()
        self._position = 0  # characters consumed so far
        self._stmt_start = 0  # where the statement being parsed began
        self._buffer: list[str] = []  # text since _stmt_start
        self._done: list[PlanStatement] = []
        self._variables: set[str] = set()
        self._failure: ValueError | None = None
        self._closed = False
        self._coroutine = self._plan()
        next(self._coroutine)

    @property
    def position(self) -> int:
        """Characters consumed so far."""
        return self._position

    def feed(self, text: str) -> list[PlanStatement]:
        """Append `text`; return the statements it completed, in order."""
        self._check_usable()
        completed: list[PlanStatement] = []
        try:
            for ch in text:
                self._buffer.append(ch)
                for token in self._lexer.push(ch, self._position):
                    self._send(token)
                self._position += 1
                if self._done:
                    completed.extend(self._done)
                    self._done.clear()
        except ValueError as error:
            self._failure = error
            raise
        return completed

    def close(self) -> list[PlanStatement]:
        """End of the plan: raises `PlanSyntaxError` if it stops inside a statement."""
        self._check_usable()
        self._closed = True
        try:
            for token in self._lexer.finish(self._position):
                self._send(token)
        except ValueError as error:
            self._failure = error
            raise
        completed = list(self._done)
        self._done.clear()
        return completed

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise RuntimeError("the parser was closed; start a new one for a new plan")

    def _send(self, token: Token) -> None:
        try:
            self._coroutine.send(token)
        except StopIteration:
            if token.kind != "END":  # pragma: no cover - the grammar loop only stops at END
                raise PlanSyntaxError(token.start, "end of plan", token.describe()) from None

    def _finish_statement(self, node: Stmt, end: int) -> None:
        text = "".join(self._buffer)
        keep = end - self._stmt_start
        statement_text, rest = text[:keep], text[keep:]
        self._done.append(
            PlanStatement(statement_text, self._stmt_start, end, node, tuple(calls_in(node)))
        )
        self._stmt_start = end
        self._buffer = [rest] if rest else []

    # --- grammar, one coroutine per rule --------------------------------------------------

    def _plan(self) -> Generator[None, Token, None]:
        while True:
            token = yield
            if token.kind == "END":
                return
            node, end = yield from self._statement(token, 0)
            self._finish_statement(node, end)

    def _statement(self, token: Token, depth: int) -> Generator[None, Token, tuple[Stmt, int]]:
        """Parse a statement starting at `token`; returns it and the end of its terminator."""
        if depth > MAX_NESTING:
            raise PlanSyntaxError(
                token.start, f"at most {MAX_NESTING} nested blocks", "a deeper one"
            )
        if token.kind == "NAME" and token.text not in ("True", "False"):
            call, after = yield from self._call(token, needs_value=False)
            end = self._expect(after, ";", "';' after the skill call")
            return CallStmt(call), end
        if token.kind == "VAR":
            assign = yield
            self._expect(assign, "=", "'=' after the variable")
            value, after = yield from self._expr((yield))
            end = self._expect(after, ";", "';' after the assigned value")
            self._variables.add(token.text)
            return Assign(token.text, value), end
        if token.kind == "?":
            cond, after = yield from self._condition((yield))
            self._expect(after, "{", "'{' after the condition (or a comparison operator, '&', '|')")
            body, end = yield from self._block(depth)
            return If(cond, body), end
        if token.kind == "INT":
            count = int(token.text)
            if not 1 <= count <= MAX_LOOP_COUNT:
                raise PlanSyntaxError(
                    token.start, f"a loop count from 1 to {MAX_LOOP_COUNT}", token.text
                )
            self._expect((yield), "{", "'{' after the loop count")
            body, end = yield from self._block(depth)
            return Loop(count, body), end
        if token.kind == "->":
            value, after = yield from self._expr((yield))
            end = self._expect(after, ";", "';' after the returned value")
            return Return(value), end
        raise PlanSyntaxError(token.start, STATEMENT_START, token.describe())

    def _block(self, depth: int) -> Generator[None, Token, tuple[tuple[Stmt, ...], int]]:
        body: list[Stmt] = []
        while True:
            token = yield
            if token.kind == "}":
                return tuple(body), token.end
            if token.kind == "END":
                raise PlanSyntaxError(token.start, f"'}}' or {STATEMENT_START}", token.describe())
            node, _ = yield from self._statement(token, depth + 1)
            body.append(node)

    def _condition(self, token: Token) -> Generator[None, Token, tuple[Condition, Token]]:
        first, after = yield from self._compare(token)
        items: list[Compare | Expr] = [first]
        op = ""
        while after.kind in ("&", "|"):
            if op and after.kind != op:
                raise PlanSyntaxError(
                    after.start, f"'{op}' (do not mix '&' and '|')", after.describe()
                )
            op = after.kind
            item, after = yield from self._compare((yield))
            items.append(item)
        if op:
            return BoolOp(op, tuple(items)), after
        return first, after

    def _compare(self, token: Token) -> Generator[None, Token, tuple[Compare | Expr, Token]]:
        left, after = yield from self._expr(token)
        if after.kind not in COMPARE_OPS:
            return left, after
        right, after2 = yield from self._expr((yield))
        return Compare(left, after.kind, right), after2

    def _expr(self, token: Token) -> Generator[None, Token, tuple[Expr, Token]]:
        """A value; returns it and the token after it (every value is followed by one)."""
        kind = token.kind
        if kind == "INT":
            return Literal(int(token.text)), (yield)
        if kind == "FLOAT":
            return Literal(float(token.text)), (yield)
        if kind == "STRING":
            return Literal(token.text[1:-1]), (yield)
        if kind == "NAME" and token.text in ("True", "False"):
            return Literal(token.text == "True"), (yield)
        if kind == "VAR":
            if token.text not in self._variables:
                raise PlanSyntaxError(
                    token.start, "a variable assigned earlier in the plan", token.describe()
                )
            return VarRef(token.text), (yield)
        if kind == "NAME":
            call, after = yield from self._call(token, needs_value=True)
            return call, after
        raise PlanSyntaxError(
            token.start,
            "a value (number, 'string', True, False, _variable or skill call)",
            token.describe(),
        )

    def _call(
        self, name: Token, needs_value: bool
    ) -> Generator[None, Token, tuple[SkillCall, Token]]:
        """`name(args)`; each argument is checked as soon as it is complete."""
        skill = self._skills.get(name.text)
        if needs_value and skill.returns == "none":
            raise SkillValidationError(
                skill.name,
                "",
                "skills that return a value",
                "returns nothing, so it cannot be used as a value",
            )
        self._expect((yield), "(", f"'(' after the skill name {name.text!r}")
        args: list[Expr] = []
        token = yield
        if token.kind == ")":
            after = yield
        else:
            while True:
                if len(args) == skill.max_args():
                    raise SkillValidationError(
                        skill.name,
                        "",
                        skill.signature(),
                        f"takes {skill.max_args()} argument(s) at most, got more"
                        if skill.streamed
                        else f"takes {len(skill.args)} argument(s), got more",
                    )
                value, sep = yield from self._expr(token)
                if isinstance(value, Literal):
                    self._skills.validate_arg(skill, skill.arg_spec(len(args)), value.value)
                args.append(value)
                if sep.kind == ")":
                    after = yield
                    break
                self._expect(sep, ",", "',' or ')' after the argument")
                token = yield
        problem = skill.arity_problem(len(args))
        if problem:
            raise SkillValidationError(skill.name, "", skill.signature(), problem)
        return SkillCall(skill.name, skill.short, tuple(args)), after

    @staticmethod
    def _expect(token: Token, kind: str, expected: str) -> int:
        if token.kind != kind:
            raise PlanSyntaxError(token.start, expected, token.describe())
        return token.end
