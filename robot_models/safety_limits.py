"""A robot's safety limits: what its plans may command, checked statement by
statement before anything is sent (`limit_checker.py`).

Pydantic, because limits come from an operator's configuration: a bad value fails
with an error that names the field. Drones are limited in their start frame (cm;
x forward, y left, z up from the ground under the start position, as the robot
faced when the task began); arms in their base frame (mm, as `move_to` takes).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from robot_models.skills import SkillSet


class Box(BaseModel):
    """An axis-aligned box, bounds inclusive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    x_min: float
    x_max: float
    y_min: float
    y_max: float
    z_min: float
    z_max: float

    @model_validator(mode="after")
    def _ordered(self) -> Box:
        for axis in "xyz":
            lo, hi = getattr(self, f"{axis}_min"), getattr(self, f"{axis}_max")
            if lo >= hi:
                raise ValueError(f"{axis}_min ({lo:g}) must be below {axis}_max ({hi:g})")
        return self

    def bounds(self, axis: str) -> tuple[float, float]:
        return getattr(self, f"{axis}_min"), getattr(self, f"{axis}_max")


class SafetyLimits(BaseModel):
    """Limits of one robot. Every field is optional: an unset limit is not checked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # drone: the box it must stay in, in its start frame (cm)
    geofence_cm: Box | None = None
    # drone: the highest it may be, above the ground under its start position (cm)
    max_altitude_cm: float | None = Field(default=None, gt=0)
    # drone: the longest path one top-level statement may command (its moves summed,
    # loops unrolled), so one statement cannot send it far at once (cm)
    max_distance_cm: float | None = Field(default=None, gt=0)
    # arm: the box its move_to targets must lie in (mm)
    workspace_mm: Box | None = None
    # skills a plan may not call at all (short or full names)
    forbidden_skills: tuple[str, ...] = ()
    # skills an operator must approve before the robot runs a statement calling them
    approval_skills: tuple[str, ...] = ()

    @property
    def tracks_position(self) -> bool:
        """Whether any limit depends on where a drone is."""
        return (
            self.geofence_cm is not None
            or self.max_altitude_cm is not None
            or self.max_distance_cm is not None
        )

    def check_for(self, skill_set: SkillSet) -> SafetyLimits:
        """These limits if they make sense for `skill_set`'s robot type; otherwise a
        ValueError naming the field (an unknown skill, a geofence on an arm, ...)."""
        for field in ("forbidden_skills", "approval_skills"):
            for name in getattr(self, field):
                if skill_set.find(name) is None:
                    known = ", ".join(s.short for s in skill_set.skills)
                    raise ValueError(
                        f"{field}: {name!r} is not a skill of the {skill_set.robot_type} "
                        f"(skills: {known})"
                    )
        both = {skill_set.get(n).name for n in self.forbidden_skills} & {
            skill_set.get(n).name for n in self.approval_skills
        }
        if both:
            raise ValueError(
                f"approval_skills: {', '.join(sorted(both))} also forbidden; give each once"
            )
        drone_only = ("geofence_cm", "max_altitude_cm", "max_distance_cm")
        arm_only = ("workspace_mm",)
        wrong = arm_only if skill_set.robot_type == "drone" else drone_only
        for field in wrong:
            if getattr(self, field) is not None:
                raise ValueError(f"{field}: not a limit of the {skill_set.robot_type}")
        return self
