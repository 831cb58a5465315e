"""The hand-written instructions: at least 40 per robot type, each validated, and
none of them among the instructions the planner is trained on."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from robot_models.dataset import build_dataset
from robot_models.ordinary_instructions import ordinary_instructions


def test_at_least_forty_per_robot_type_none_seen_in_training() -> None:
    data = build_dataset()
    trained = {(e.robot_type, e.instruction.lower()) for e in data.train}
    for robot in ("drone", "arm"):
        mine = ordinary_instructions(robot)
        assert len(mine) >= 40
        assert len({o.instruction for o in mine}) == len(mine)
        assert not [o for o in mine if (robot, o.instruction.lower()) in trained]


def test_a_malformed_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("drone:\n  - {scene: 'visible: sofa', instruction: ''}\n")
    with pytest.raises(ValidationError):
        ordinary_instructions("drone", path)
    with pytest.raises(ValueError, match="unknown robot type"):
        ordinary_instructions("boat")
