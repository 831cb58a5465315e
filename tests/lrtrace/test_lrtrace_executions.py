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


def _results_file(path: Path) -> Path:
    """A replay's results: robots that fly 40 cm/s + 0.5 s, whatever the model says."""
    from lrtrace import results_format
    from lrtrace.results_format import ResultsFile, RunRecord, SegmentRecord, TaskRecord
    from lrtrace.workload import preset
    from timely_core.scheduling.tuf import Tuf

    def seg(index: int, text: str, start: float, duration: float) -> SegmentRecord:
        return SegmentRecord(
            index=index,
            text=text,
            statements=1,
            emitted_s=start - 0.008,
            dispatched_s=start,
            exec_start_s=start,
            exec_end_s=start + duration,
        )

    def task(task_id: str, segments: list[SegmentRecord], finished: bool = True) -> TaskRecord:
        return TaskRecord(
            task_id=task_id,
            trace_id=1,
            agent_id="drone1",
            robot_type="drone",
            urgency="normal",
            tuf=Tuf(expected_response_time_s=1.0, slope=-2.0, initial_utility=1.0),
            arrival_s=0.0,
            segments=segments,
            success=finished,
            finished=finished,
        )

    done = task(
        "t1",
        [
            seg(0, "mf(100);", 1.0, 0.5 + 100 / 40),
            seg(1, "?iv('cat')==True{mf(50);}", 4.0, 9.9),  # two calls: not separable
            seg(2, "mf(300);", 14.0, 0.5 + 300 / 40),
            seg(3, "->True;", 22.0, 0.0),
            seg(4, "mf(200);", 22.0, 0.0),  # after the return: never ran
        ],
    )
    unfinished = task("t2", [seg(0, "mf(200);", 1.0, 99.0)], finished=False)
    runs = [
        RunRecord(label=label, policy=label, target="ros", engine="ros:x", simulated=False)
        for label in ("timely", "fcfs")
    ]
    runs[0].tasks = [done, unfinished]
    runs[1].tasks = [task("t3", [seg(0, "mf(100);", 1.0, 50.0)])]
    results_format.write(ResultsFile(workload=preset(1), runs=runs), path)
    return path


def test_record_takes_a_results_file_and_fit_refits_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res, out = _results_file(tmp_path / "r.json"), tmp_path / "x.lrx"
    assert main(["record", str(res), "--run", "timely", "-o", str(out)]) == 0
    assert "2 executions recorded (2 segments skipped" in capsys.readouterr().out
    executions = read(out).executions
    assert [(e.skill, e.args, e.robot_id) for e in executions] == [
        ("move_forward", (100,), "drone1"),
        ("move_forward", (300,), "drone1"),
    ]
    assert executions[0].duration_s == pytest.approx(3.0)
    assert executions[1].started_at_s == pytest.approx(14.0)
    assert main(["fit", str(out), "--out-dir", str(tmp_path / "models")]) == 0
    model = ExecTimeModel.load(tmp_path / "models" / "drone.yaml")
    _, mean = model.estimate(BoundCall("move_forward", "mf", (200,)))
    assert mean == pytest.approx(0.5 + 200 / 40, rel=1e-6)
    # Every run by default: fcfs's task is recorded too.
    all_runs = tmp_path / "all.lrx"
    assert main(["record", str(res), "-o", str(all_runs)]) == 0
    assert len(read(all_runs).executions) == 3


def test_record_of_a_results_file_names_a_missing_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = _results_file(tmp_path / "r.json")
    assert main(["record", str(res), "--run", "edf", "-o", str(tmp_path / "x.lrx")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no run labelled 'edf'" in err and "timely" in err
    assert not (tmp_path / "x.lrx").exists()
    reports_file = reports(tmp_path / "a.jsonl", [{"robot_type": "arm", "skill": "hm"}])
    assert main(["record", str(reports_file), "--run", "x", "-o", str(tmp_path / "x.lrx")]) == 2
    assert "--run applies to a results file only" in capsys.readouterr().err


def test_record_refuses_a_run_label_that_several_runs_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand-merged results file with two 'timely' runs: --run timely would merge
    them, so it is refused; without --run every run is recorded, as documented."""
    from lrtrace import results_format

    res = _results_file(tmp_path / "r.json")
    doc = results_format.read(res)
    doc.runs[1].label = "timely"
    results_format.write(doc, res)
    assert main(["record", str(res), "--run", "timely", "-o", str(tmp_path / "x.lrx")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "2 runs are labelled 'timely'" in err, err
    assert not (tmp_path / "x.lrx").exists()
    assert main(["record", str(res), "-o", str(tmp_path / "all.lrx")]) == 0
    assert len(read(tmp_path / "all.lrx").executions) == 3
