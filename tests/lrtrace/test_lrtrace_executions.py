"""record + fit: executor reports become an executions file, and fit refits the
execution-time models toward what the robots measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from lrtrace.cli import main
from lrtrace.executions import read
from robot_models.exec_time import ExecTimeModel
from robot_models.plan_ast import BoundCall


def reports(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_record_then_fit_moves_the_model_to_the_measurements(tmp_path: Path) -> None:
    # The packaged drone flies 60 cm/s + 1.2 s; these robots fly 40 cm/s + 0.5 s.
    rows: list[dict[str, object]] = [
        {"robot_type": "drone", "skill": "mf", "args": [d], "duration_s": 0.5 + d / 40}
        for d in (50, 100, 200, 300, 400)
    ]
    rows.append({"robot_type": "drone", "skill": "takeoff", "args": [], "duration_s": 6.0})
    out = tmp_path / "x.lrx"
    assert main(["record", str(reports(tmp_path / "a.jsonl", rows[:3])), "-o", str(out)]) == 0
    assert main(["record", str(reports(tmp_path / "b.jsonl", rows[3:])), "-o", str(out)]) == 0
    assert len(read(out).executions) == 6  # appended
    assert main(["fit", str(out), "--out-dir", str(tmp_path / "models")]) == 0
    model = ExecTimeModel.load(tmp_path / "models" / "drone.yaml")
    _, mean = model.estimate(BoundCall("move_forward", "mf", (200,)))
    assert mean == pytest.approx(0.5 + 200 / 40, rel=1e-6)
    _, takeoff = model.estimate(BoundCall("takeoff", "tk", ()))
    assert takeoff == pytest.approx(6.0)
    saved = yaml.safe_load((tmp_path / "models" / "drone.yaml").read_text())
    assert saved["robot_type"] == "drone"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"robot_type": "drone", "skill": "fly_to_moon", "args": [], "duration_s": 1},
            "unknown skill",
        ),
        ({"robot_type": "drone", "skill": "mf", "args": [5000], "duration_s": 1}, "out of range"),
        ({"robot_type": "drone", "skill": "mf", "args": [100], "duration_s": -1}, "duration_s"),
        (
            {"robot_type": "boat", "skill": "mf", "args": [100], "duration_s": 1},
            "unknown robot type",
        ),
    ],
)
def test_bad_reports_name_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: dict[str, object], message: str
) -> None:
    path = reports(
        tmp_path / "r.jsonl",
        [{"robot_type": "arm", "skill": "hm", "args": [], "duration_s": 2.0}, row],
    )
    assert main(["record", str(path), "-o", str(tmp_path / "x.lrx")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{path}:2" in err and message in err, err
    assert not (tmp_path / "x.lrx").exists()


def test_fit_rejects_a_broken_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.lrx").write_bytes(b"\x92\x01")
    assert main(["fit", str(tmp_path / "x.lrx"), "--out-dir", str(tmp_path)]) == 2
    assert "truncated or malformed" in capsys.readouterr().err
