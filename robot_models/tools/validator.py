"""An early validator (Conveyor): each argument of a call is checked the moment it
is decoded, so a bad call ends the task before it is fully written.

Checks: the skill exists for the robot type, no argument beyond its arity, each
literal argument's type and range (the skill set's limits), and that the objects a
manipulating skill acts on are named in the task's scene (`object_args`). Values
only known when the plan runs (variables, nested calls) are left to the robot."""

from __future__ import annotations

from typing import Any

from robot_models.errors import SkillValidationError
from robot_models.skills import SkillSet
from robot_models.tools.scene_text import scene_has, scene_names
from timely_core.tools.plugin import ToolCall, ToolPlugin, ToolReply, Unresolved

# Arguments that name something the robot acts on, by robot type and skill (full name).
OBJECT_ARGS: dict[str, dict[str, tuple[str, ...]]] = {
    "arm": {
        "pick": ("object",),
        "place": ("target",),
        "stack": ("object", "onto"),
        "sort": ("object", "bin"),
    },
    "drone": {},  # a drone looks for what it does not see yet: no scene check
}


class SkillCallValidator(ToolPlugin):
    """Options: `robot_type` ("drone" or "arm"); `map`, a scene text of what the
    robot knows is there (checked instead of each task's scene when given)."""

    partial = True
    validates = True

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        robot_type = str(options.get("robot_type", ""))
        self._skills = SkillSet.load(robot_type)
        self._object_args = OBJECT_ARGS[robot_type]
        known_map = options.get("map")
        self._map = None if known_map is None else str(known_map)
        self.skills = frozenset(  # type: ignore[misc]
            name for s in self._skills.skills for name in (s.name, s.short)
        )

    def on_partial(self, call: ToolCall) -> ToolReply:
        return self._check(call, len(call.args) - 1)

    def on_call(self, call: ToolCall) -> ToolReply:
        skill = self._skills.get(call.skill)
        if len(call.args) != len(skill.args):
            return ToolReply.error(
                f"{skill.signature()} takes {len(skill.args)} argument(s), got {len(call.args)}"
            )
        return self._check(call, len(call.args) - 1) if call.args else ToolReply.ok()

    def _check(self, call: ToolCall, index: int) -> ToolReply:
        """Only the newest argument: the earlier ones passed when they arrived."""
        skill = self._skills.get(call.skill)
        if index >= len(skill.args):
            return ToolReply.error(
                f"{skill.signature()} takes {len(skill.args)} argument(s)", argument=index
            )
        value, spec = call.args[index], skill.args[index]
        if isinstance(value, Unresolved):
            return ToolReply.ok()
        try:
            self._skills.validate_arg(skill, spec, value)
        except SkillValidationError as exc:
            return ToolReply.error(str(exc), argument=index)
        if spec.name in self._object_args.get(skill.name, ()):
            known = call.scene if self._map is None else self._map
            if not isinstance(value, str) or not scene_has(known, value):
                listed = ", ".join(sorted(scene_names(known))) or "nothing"
                return ToolReply.error(
                    f"{skill.name} {spec.name} {value!r} is not in the scene (it names: {listed})",
                    argument=index,
                )
        return ToolReply.ok()
