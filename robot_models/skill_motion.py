"""How each skill moves its robot, as far as the plan's text can tell.

Robot knowledge that the skill sets (`data/*.yaml`) do not carry: which skills
move the robot, which way, by which argument. `limit_checker.py` tracks the
commanded position with it. A skill not listed here does not move the robot
(perception, pictures, delays, logs; the arm's gripper).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MotionKind = Literal[
    "none",
    "move",  # a straight move by its first argument (cm) along `direction`
    "turn",  # a turn by its first argument (degrees), `direction[0]` +1 ccw, -1 cw
    "takeoff",  # climbs to hover height
    "land",  # down to the ground
    "turn_unknown",  # turns by an angle only known when it runs (closed loop)
    "move_unknown",  # moves by a distance and direction only known when it runs
    "arm_target",  # moves the arm's gripper to its (x, y, z) arguments (mm)
    "path",  # straight legs, one per element: (forward, left, up) cm in its own frame
]


@dataclass(frozen=True)
class Motion:
    kind: MotionKind
    direction: tuple[float, float, float] = (0.0, 0.0, 0.0)  # forward, left, up


NO_MOTION = Motion("none")

_MOTIONS: dict[str, dict[str, Motion]] = {
    "drone": {
        "move_forward": Motion("move", (1.0, 0.0, 0.0)),
        "move_backward": Motion("move", (-1.0, 0.0, 0.0)),
        "move_left": Motion("move", (0.0, 1.0, 0.0)),
        "move_right": Motion("move", (0.0, -1.0, 0.0)),
        "move_up": Motion("move", (0.0, 0.0, 1.0)),
        "move_down": Motion("move", (0.0, 0.0, -1.0)),
        "turn_ccw": Motion("turn", (1.0, 0.0, 0.0)),
        "turn_cw": Motion("turn", (-1.0, 0.0, 0.0)),
        "takeoff": Motion("takeoff"),
        "land": Motion("land"),
        "sweep": Motion("turn_unknown"),  # 45 degree steps until the object is seen
        "orient": Motion("turn_unknown"),  # until the object is centred
        "approach": Motion("move_unknown"),  # towards the object, wherever it is
        "fly_path": Motion("path"),  # a streamed skill (data/drone_streamed.yaml)
    },
    # pick, place, stack, sort and home go where the arm's controller finds the
    # objects (or its home pose): their targets are not in the plan to check
    "arm": {"move_to": Motion("arm_target")},
}


def motion_of(robot_type: str, skill_name: str) -> Motion:
    """How `skill_name` (canonical name) moves a robot of `robot_type`."""
    return _MOTIONS.get(robot_type, {}).get(skill_name, NO_MOTION)
