"""`fit` checks each execution of an executions file as `record` checks a report
(robot type, skill, arguments in range): a hand-edited or foreign file gets one line
naming the execution, not a traceback or a model fitted on nonsense."""

from __future__ import annotations

from pathlib import Path

import pytest

from lrtrace import executions
from lrtrace.cli import main
from lrtrace.executions import Execution, ExecutionsFile


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"skill": "zz"}, "skill 'zz': unknown skill for a drone"),
        ({"robot_type": "boat"}, "unknown robot type 'boat'"),
        ({"args": (99999,)}, "99999 is out of range"),
    ],
)
def test_fit_refuses_an_execution_record_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, object], named: str
) -> None:
    good = Execution(robot_type="drone", skill="mf", args=(100,), duration_s=3.0)
    path = tmp_path / "x.lrx"
    executions.write(ExecutionsFile(executions=[good, good.model_copy(update=bad)]), path)
    assert main(["fit", str(path), "--out-dir", str(tmp_path / "models")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"lrtrace: error: {path}: "), err
    assert "executions.1: " in err and named in err, err
    assert not (tmp_path / "models").exists()


def test_fit_into_a_file_says_it_is_not_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.lrx"
    good = Execution(robot_type="drone", skill="mf", args=(100,), duration_s=3.0)
    executions.write(ExecutionsFile(executions=[good]), path)
    a_file = tmp_path / "models"
    a_file.write_text("")
    assert main(["fit", str(path), "--out-dir", str(a_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"lrtrace: error: cannot write models to {a_file}: not a directory", err
