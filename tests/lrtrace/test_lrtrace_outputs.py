"""Output files: a failed write raises one clear line and leaves no `<out>.tmp`."""

from __future__ import annotations

from pathlib import Path

import pytest

from lrtrace import executions, results_format, trace_format
from lrtrace.catalog import load_catalog
from lrtrace.compose import compose
from lrtrace.errors import LrtraceError
from lrtrace.outputs import check_file, write_atomically
from lrtrace.profiles import PAPER_PROFILE, save
from lrtrace.workload import preset

TRACE = compose(preset(1).model_copy(update={"duration_s": 10.0}), load_catalog())


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    taken = tmp_path / "out"
    taken.mkdir()  # the temporary file is written, the rename onto a directory fails
    writes = {
        "trace": lambda: trace_format.write(TRACE, taken),
        "results": lambda: results_format.write(
            results_format.ResultsFile(workload=TRACE.workload), taken
        ),
        "executions": lambda: executions.write(executions.ExecutionsFile(), taken),
    }
    for what, write in writes.items():
        with pytest.raises(LrtraceError, match=f"cannot write {what} {taken}"):
            write()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], what


def test_an_interrupted_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.json"
    path.write_text("old")

    def interrupted(self: Path, data: bytes) -> int:
        Path.write_text(self, "half")
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(path, b"new", "results")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_outputs_need_an_existing_writable_directory(tmp_path: Path) -> None:
    check_file(tmp_path / "new.json", "results")
    with pytest.raises(LrtraceError, match="it is a directory"):
        check_file(tmp_path, "results")
    with pytest.raises(LrtraceError, match=f"no directory {tmp_path / 'a'}"):
        check_file(tmp_path / "a" / "b.json", "results")


def test_a_profile_is_not_saved_into_a_directory_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(LrtraceError, match="no directory"):
        save(PAPER_PROFILE, tmp_path / "missing" / "p.json")
    assert not (tmp_path / "missing").exists()
    assert save(PAPER_PROFILE, tmp_path / "p.json").is_file()
