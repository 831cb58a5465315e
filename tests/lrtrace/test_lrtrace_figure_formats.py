"""A figure path whose extension matplotlib cannot write is refused with the other
outputs, before the search it would show, not by `savefig` after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lrtrace.capacity import CapacityPlanner
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.figure_formats import check_figure_path, supported

TINY = "{name: tiny, robots: {drone: {events_per_s: 0.5, max_tasks_per_event: 4}}}"


def test_matplotlibs_formats_pass_and_others_are_named() -> None:
    assert {"png", "pdf", "svg"} <= set(supported())
    for name in ("c.png", "c.PDF", "dir.v2/c.svg"):
        check_figure_path(Path(name), "--plot")
    with pytest.raises(LrtraceError, match=r"^--plot c2.txt: matplotlib cannot write .txt"):
        check_figure_path(Path("c2.txt"), "--plot")
    with pytest.raises(LrtraceError, match=r"^--plot c2: no extension .* png"):
        check_figure_path(Path("c2"), "--plot")


def test_capacity_refuses_the_plot_before_searching(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the search started")

    monkeypatch.setattr(CapacityPlanner, "run", refuse)
    out = tmp_path / "c.json"
    for plot, why in (("c2.txt", "cannot write .txt"), ("c2", "no extension")):
        argv = ["capacity", "--mix", TINY, "-o", str(out), "--plot", str(tmp_path / plot)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("lrtrace: error: --plot") and why in err, err
    assert not out.exists()
