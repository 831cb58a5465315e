"""The CLI end to end on the simulator, and one clear line + exit 2 for bad input."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
from rich.console import Console

from lrtrace import executions, results_format, trace_format
from lrtrace.catalog import load_catalog
from lrtrace.cli import main
from lrtrace.compose import compose
from lrtrace.metrics import run_stats
from lrtrace.profiles import PAPER_PROFILE
from lrtrace.replay.exec_sampler import ExecTimeSampler
from lrtrace.replay.runner import replay
from lrtrace.replay.targets.sim import SimTarget
from lrtrace.results_format import TaskRecord
from lrtrace.trace_format import TraceFile
from lrtrace.workload import preset


def bad(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("lrtrace: error: "), err
    assert match in err, err


def test_compose_replay_report(
    tmp_path: Path, tokenizer_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace, res = tmp_path / "w.lrt", tmp_path / "r.json"
    assert main(["compose", "--wid", "1", "--duration", "40", "--seed", "5", "-o", str(trace)]) == 0
    loaded = trace_format.read(trace)
    assert loaded.workload.name == "WID1+duration_s" and loaded.workload.seed == 5 and loaded.tasks
    argv = ["replay", str(trace), "--target", "sim", "--policy", "timely,fcfs"]
    argv += ["--tokenizer", str(tokenizer_path), "--max-batch", "2,8", "-o", str(res)]
    assert main(argv) == 0
    results = results_format.read(res)
    assert [r.label for r in results.runs] == ["timely@2", "timely@8", "fcfs@2", "fcfs@8"]
    assert all(r.simulated and r.engine == f"simulated:{PAPER_PROFILE.name}" for r in results.runs)
    assert all(t.finished for r in results.runs for t in r.tasks)
    assert [r.batch_cap for r in results.runs] == [2, 8, 2, 8]
    assert all(r.engine_busy_s is not None for r in results.runs)
    busy = {r.label: r.engine_busy_s or 0.0 for r in results.runs}
    assert all(b > 0 for b in busy.values())
    # a batch cap of 2 runs the same tokens in more iterations, each paying the fixed cost
    assert busy["fcfs@2"] > busy["fcfs@8"] and busy["timely@2"] > busy["timely@8"]
    # The replay's segment executions feed `record` (and so `fit`) directly.
    lrx = tmp_path / "x.lrx"
    assert main(["record", str(res), "--run", "timely@8", "-o", str(lrx)]) == 0
    recorded = executions.read(lrx).executions
    assert recorded and all(e.robot_type == "drone" and e.duration_s > 0 for e in recorded)
    assert len(recorded) < sum(len(t.segments) for t in results.runs[1].tasks)
    stats, plots = tmp_path / "s.json", tmp_path / "plots"
    capsys.readouterr()
    assert main(["report", str(res), "--json", str(stats), "--plots", str(plots)]) == 0
    assert "max batch: timely@2 2, timely@8 8, fcfs@2 2, fcfs@8 8" in capsys.readouterr().out
    doc = json.loads(stats.read_text())
    assert doc["simulated"] is True and "SIMULATION" in doc["note"]
    shares = {r["label"]: r["engine_busy_share"] for r in doc["runs"]}
    assert {r["label"]: r["batch_cap"] for r in doc["runs"]}["fcfs@2"] == 2
    assert shares == {label: pytest.approx(b / 40.0) for label, b in busy.items()}
    groups = {(s["run"], s["group"]) for s in doc["stats"]}
    assert ("fcfs@8", "urgent-drone") in groups and ("timely@2", "trace 1") in groups
    pngs = sorted(p.name for p in plots.iterdir())
    assert pngs == ["r_fig5.png", "r_fig6.png", "r_fig7.png", "r_fig8.png"]
    assert all((plots / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_replay_without_the_prefix_cache(
    tmp_path: Path, tokenizer_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whole prompts prefilled on every request: the results say so, every task
    still ends, and responses are slower than with the cache (the same trace)."""
    trace = tmp_path / "w.lrt"
    assert main(["compose", "--wid", "2", "--duration", "30", "--seed", "3", "-o", str(trace)]) == 0
    means = {}
    for name, flags in (("cached", []), ("whole", ["--no-prefix-cache"])):
        res = tmp_path / f"{name}.json"
        argv = ["replay", str(trace), "--tokenizer", str(tokenizer_path), "-o", str(res), *flags]
        assert main(argv) == 0
        (run,) = results_format.read(res).runs
        assert run.engine.endswith(" (no prefix cache)") == (name == "whole")
        assert run.max_batch is None and run.batch_cap == PAPER_PROFILE.max_batch_size == 8
        assert all(t.finished for t in run.tasks)
        everyone = next(g for g in run_stats(run) if g.group == "all")
        means[name] = everyone.response_s.mean
    assert means["whole"] > means["cached"]
    out = str(tmp_path / "r.json")
    bad(capsys, ["replay", str(trace), "--target", "ros", "--no-prefix-cache", "-o", out], "sim")


def test_yaml_workload(tmp_path: Path) -> None:
    spec = tmp_path / "w.yaml"
    spec.write_text("wid: 3\nagents: 5\nmax_tpe: 4\nduration_s: 100\nseed: 2\n")
    assert main(["compose", "--yaml", str(spec), "-o", str(tmp_path / "t.lrt")]) == 0
    trace = trace_format.read(tmp_path / "t.lrt")
    assert trace.workload.trace_ids == (9, 10, 11) and len(trace.agents) == 5


def test_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.lrt"
    assert main(["compose", "--wid", "1", "--duration", "20", "-o", str(trace)]) == 0
    capsys.readouterr()
    out = str(tmp_path / "r.json")
    data = trace.read_bytes()
    (tmp_path / "cut.lrt").write_bytes(data[: len(data) // 2])
    bad(capsys, ["replay", str(tmp_path / "cut.lrt"), "-o", out], "truncated or malformed")
    (tmp_path / "junk.lrt").write_bytes(b"\xc1\xc1\xc1")
    bad(capsys, ["replay", str(tmp_path / "junk.lrt"), "-o", out], "malformed")
    (tmp_path / "other.lrt").write_bytes(msgpack.packb({"format": "x"}))
    bad(capsys, ["replay", str(tmp_path / "other.lrt"), "-o", out], "not an lrtrace trace")
    bad(capsys, ["replay", str(tmp_path / "none.lrt"), "-o", out], "cannot read trace")
    bad(
        capsys,
        ["replay", str(trace), "--policy", "timely,lifo", "-o", out],
        "unknown policy 'lifo'",
    )
    bad(capsys, ["compose", "--wid", "1", "--trace-ids", "1,12", "-o", out], "unknown trace id 12")
    bad(
        capsys, ["compose", "--wid", "1", "--trace-ids", "one", "-o", out], "not a list of integers"
    )
    bad(capsys, ["compose", "--wid", "2", "--agents", "10", "-o", out], "16 tasks per event")
    bad(capsys, ["compose", "--wid", "4", "-o", out], "unknown workload id 4")
    bad(capsys, ["compose", "--wid", "1", "-o", str(tmp_path / "no" / "t.lrt")], "cannot write")
    bad(
        capsys,
        [
            "compose",
            "--eps",
            "-1",
            "--max-tpe",
            "1",
            "--trace-ids",
            "1",
            "--agents",
            "1",
            "--duration",
            "5",
            "-o",
            out,
        ],
        "eps",
    )
    (tmp_path / "w.yaml").write_text("eps: [1\n")
    bad(capsys, ["compose", "--yaml", str(tmp_path / "w.yaml"), "-o", out], "not valid YAML")
    (tmp_path / "w2.yaml").write_text(
        "eps: 1\nmax_tpe: 1\ntrace_ids: [1]\nagents: 1\nduration_s: 5\ncolour: red\n"
    )
    bad(capsys, ["compose", "--yaml", str(tmp_path / "w2.yaml"), "-o", out], "colour")
    (tmp_path / "w3.yaml").write_text("wid: three\n")
    bad(capsys, ["compose", "--yaml", str(tmp_path / "w3.yaml"), "-o", out], "wid must be")
    bad(capsys, ["replay", str(trace), "--profile", "nope", "-o", out], "unknown latency profile")
    (tmp_path / "r.json").write_text('{"format": "lrtrace-results", "version": 1, "runs": [')
    bad(capsys, ["report", str(tmp_path / "r.json")], "truncated or malformed")


class InterruptingSim(SimTarget):
    """Raises KeyboardInterrupt (as Ctrl-C does) after `after` tasks have ended."""

    after = 5

    def run(
        self,
        trace: TraceFile,
        policy: str,
        max_batch: int | None,
        records: list[TaskRecord],
        on_task_done: Callable[[TaskRecord], None],
        stop: threading.Event,
    ) -> float | None:
        done = [0]

        def count(record: TaskRecord) -> None:
            on_task_done(record)
            done[0] += 1
            if done[0] == self.after:
                raise KeyboardInterrupt

        return super().run(trace, policy, max_batch, records, count, stop)


def test_ctrl_c_writes_what_is_done(tmp_path: Path, tokenizer: Any) -> None:
    catalog = load_catalog()
    trace = compose(preset(1).model_copy(update={"duration_s": 60.0}), catalog)
    target = InterruptingSim(PAPER_PROFILE, tokenizer, ExecTimeSampler(), catalog)
    out = tmp_path / "r.json"
    results, interrupted = replay(
        trace, target, ["timely", "fcfs"], [None], out, Console(quiet=True)
    )
    assert interrupted
    saved = results_format.read(out)
    assert [r.label for r in saved.runs] == ["timely"] and saved.runs[0].interrupted
    assert saved.runs[0].tasks == results.runs[0].tasks
    tasks = saved.runs[0].tasks
    assert len(tasks) == len(trace.tasks)
    assert sum(t.finished for t in tasks) == InterruptingSim.after
    assert all(t.error == "interrupted" for t in tasks if not t.finished)
