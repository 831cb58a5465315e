"""`RobotPlanLanguage`: one robot type's prompt, parser and execution-time model,
shaped to satisfy `timely_core.language.plan_language.PlanLanguage` and, when it learns from
executions, `timely_core.serving.execution_feedback.ExecutionFeedback` (structurally: this
package never imports timely_core)."""

from __future__ import annotations

from collections.abc import Sequence

from robot_models.exec_time import ExecTimeModel, OnlineRefit, split_duration
from robot_models.grammar import plan_grammar
from robot_models.grounding import grounded_names
from robot_models.parser import PlanParser
from robot_models.plan_ast import PlanStatement, Stmt
from robot_models.prompts import format_request, prompt_prefix
from robot_models.skills import ROBOT_TYPES, SkillSet, check_robot_type
from robot_models.value_candidates import request_values

# How a failed segment reads as an observation: the statements, then `->failed(...)`
# with the robot's reason, as a perception observation reads `lk('cup')->True`.
FAILED_MARK = "->failed("


class RobotPlanLanguage:
    """Plan language of one robot type."""

    def __init__(
        self,
        robot_type: str,
        exec_time: ExecTimeModel | None = None,
        learn_from_executions: bool = False,
        streamed_skills: bool = False,
    ) -> None:
        """`learn_from_executions`: measured segment durations (`observe_execution`,
        called by the planning service on `segment_done`) refine `exec_time`.
        `streamed_skills`: the robot type's streamed skills (`fp`) join its skills,
        prompt and grammar (the shipped checkpoint was not trained on them)."""
        self._robot_type = check_robot_type(robot_type)
        self._streamed = streamed_skills
        self._exec_time = exec_time or ExecTimeModel(
            SkillSet.load(robot_type, streamed=streamed_skills)
        )
        self._skills = self._exec_time.skill_set
        self._learner = OnlineRefit(self._exec_time) if learn_from_executions else None
        self._grammar: str | None = None

    @property
    def robot_type(self) -> str:
        return self._robot_type

    @property
    def skill_set(self) -> SkillSet:
        return self._skills

    @property
    def exec_time(self) -> ExecTimeModel:
        return self._exec_time

    def skill_names(self) -> frozenset[str]:
        """`SkillNames`: each skill's short form and full name."""
        return frozenset(n for s in self._skills.skills for n in (s.short, s.name))

    @property
    def streamed_skills(self) -> bool:
        return self._streamed

    def prompt_prefix(self) -> str:
        return prompt_prefix(self._robot_type, streamed=self._streamed)

    def format_request(self, scene: str, instruction: str) -> str:
        return format_request(scene, instruction)

    def grammar(self) -> str:
        """The llguidance grammar of this robot's plans (`grammar.py`): decoding masked
        by it writes only statements that `new_parser` accepts with every call inside
        the skills' limits. Built once per language."""
        if self._grammar is None:
            self._grammar = plan_grammar(self._skills)
        return self._grammar

    def request_grammar(self, scene: str, instruction: str) -> str:
        """The grammar of plans for one request: `grammar()` with object arguments
        limited to the names the request and its scene give and the robot's known
        places (`grounding.grounded_names`), so a plan never names an object nobody
        mentioned."""
        return plan_grammar(self._skills, grounded_names(scene, instruction))

    def request_names(self, scene: str, instruction: str) -> tuple[str, ...]:
        """The names the request and its scene give (`grounding.grounded_names`): the
        engine's copy bias favours them inside a quoted name."""
        return grounded_names(scene, instruction)

    def request_values(self, scene: str, instruction: str) -> tuple[tuple[str, str], ...]:
        """The numbers the request states, as each numeric argument would take
        them, after that argument's opener (`value_candidates.request_values`): the
        engine's copy bias favours them where the plan writes that argument."""
        return request_values(self._skills, instruction)

    def name_quote(self) -> str:
        return "'"

    def name_openers(self) -> tuple[str, ...]:
        """A skill's object argument opens right after its call's `(` (either
        spelling of the skill), or after `,` when it is not the first argument;
        a message (`lg`'s text) or a value compared (`=='x'`) is not a name."""
        openers: set[str] = set()
        for skill in self._skills.skills:
            for position, arg in enumerate(skill.args):
                if arg.type != "str":
                    continue
                if position == 0:
                    openers.update({f"{skill.short}(", f"{skill.name}("})
                else:
                    openers.add(",")
        return tuple(sorted(openers))

    def distinct_names(self) -> tuple[tuple[str, str], ...]:
        """Where a name must differ from the one right before it (the skills'
        `distinct_from`): the engine's copy bias does not push a held object onto
        itself (`SkillSet.distinct_names`)."""
        return self._skills.distinct_names()

    def grammar_closers(self) -> tuple[str, ...]:
        """A block's end: what a plan near its token limit writes to close an open
        loop or condition before it ends."""
        return ("}",)

    def grammar_hard_closers(self) -> tuple[str, ...]:
        """What ends an open statement, its call and its quoted name, fewest tokens
        first, then the separator to a call's next argument: a plan that must end
        now (a name repeated past the segment limit) closes with them where the
        grammar allows, e.g. `pk('sastoo` + `');`, `so('sastoo` + `'` + `,`. The
        engine takes one only where the plan may end or close again right after
        it, so a quote never opens a name."""
        return (";", ");", "');", ")", "')", "'", ",")

    def grammar_closing_bans(self) -> tuple[str, ...]:
        """A condition's opener: a closing plan that must write a statement in a
        block would otherwise open another condition there (`?sw('mu'){?iv('.`)
        and run past its limit. Elsewhere `?` is only ever in a message's text,
        which needs none to end."""
        return ("?",)

    def new_parser(self) -> PlanParser:
        return PlanParser(self._skills)

    def parse(self, text: str) -> list[PlanStatement]:
        """All statements of a complete plan (raises on invalid or unfinished text)."""
        parser = self.new_parser()
        return parser.feed(text) + parser.close()

    def estimate_execution_s(self, statements: Sequence[object]) -> tuple[float, float]:
        """(min_s, mean_s) of the statements. Accepts this package's `PlanStatement`s
        or anything with the statement's `.text` (re-parsed on its own)."""
        return self._exec_time.estimate_statements(self._nodes(statements))

    def observe_execution(self, statements: Sequence[object], duration_s: float) -> None:
        """The robot executed `statements` (one segment) in `duration_s`. With
        `learn_from_executions`, straight-line segments refine the execution-time
        model (`split_duration`, `OnlineRefit`); otherwise nothing happens."""
        if self._learner is None:
            return
        records = split_duration(self._exec_time, self._nodes(statements), duration_s)
        if records:
            self._learner.add(records)

    def failure_observation(self, segment_text: str, error: str) -> str:
        """A robot's failure of a segment in the plan language's observation form
        (`timely_core.language.plan_language.FailureObservation`): `tc(180);->failed('...')`.
        The shipped planner checkpoint was not trained on it."""
        return f"{segment_text.strip()}{FAILED_MARK}{error!r})"

    def _nodes(self, statements: Sequence[object]) -> list[Stmt]:
        nodes: list[Stmt] = []
        for statement in statements:
            node = getattr(statement, "node", None)
            if node is None:
                text = getattr(statement, "text", None)
                if not isinstance(text, str):
                    raise TypeError(f"expected a plan statement with .text, got {statement!r}")
                nodes.extend(s.node for s in self.parse(text))
            else:
                nodes.append(node)
        return nodes


def load_language(
    robot_type: str, learn_from_executions: bool = False, streamed_skills: bool = False
) -> RobotPlanLanguage:
    """The plan language of "drone" or "arm"; ValueError listing the known types otherwise.
    `streamed_skills` adds the type's streamed skills (`SkillSet.load(streamed=True)`)."""
    if robot_type not in ROBOT_TYPES:
        check_robot_type(robot_type)
    return RobotPlanLanguage(
        robot_type, learn_from_executions=learn_from_executions, streamed_skills=streamed_skills
    )
