"""Workload specs: every wrong field at once, and a preset whose fields the user
changed is named so, so its trace, results and figures never pass for the paper's."""

from __future__ import annotations

from pathlib import Path

import pytest

from lrtrace import trace_format
from lrtrace.cli import main
from lrtrace.errors import LrtraceError
from lrtrace.workload import derived, load_yaml, parse_spec, preset


def test_every_wrong_field_is_listed_one_per_line() -> None:
    data = {"eps": 0, "max_tpe": 0, "trace_ids": [1], "agents": 1, "duration_s": -5}
    with pytest.raises(LrtraceError) as caught:
        parse_spec(data, "w.yaml")
    first, *lines = str(caught.value).splitlines()
    assert first == "w.yaml: invalid workload: 3 problems:"
    assert [line.split(":")[0].strip() for line in lines] == ["eps", "max_tpe", "duration_s"]


def test_one_wrong_field_stays_one_line() -> None:
    with pytest.raises(LrtraceError, match=r"^w\.yaml: invalid workload: eps: Input should be"):
        parse_spec(
            {"eps": 0, "max_tpe": 1, "trace_ids": [1], "agents": 1, "duration_s": 5}, "w.yaml"
        )


def test_a_changed_preset_names_the_changed_fields() -> None:
    wid1 = preset(1)
    assert derived(wid1, {"eps": 2.0}, "flags").name == "WID1+eps"
    both = derived(wid1, {"duration_s": 10.0, "eps": 2.0}, "flags")
    assert both.name == "WID1+eps,duration_s" and both.eps == 2.0  # in field order
    assert derived(wid1, {"eps": wid1.eps}, "flags").name == "WID1"  # not a change
    assert derived(wid1, {"seed": 7}, "flags").name == "WID1"  # same workload, redrawn
    assert derived(wid1, {"eps": 2.0, "name": "mine"}, "flags").name == "mine"


def test_a_long_name_says_it_was_changed() -> None:
    base = preset(1).model_copy(update={"name": "x" * 64})
    name = derived(base, {"eps": 2.0, "agents": 30}, "flags").name
    assert len(name) == 64 and name.endswith("+overrides")


def test_a_yaml_preset_with_overrides_is_named_so(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("wid: 2\nagents: 50\n")
    assert load_yaml(path).name == "WID2+agents"
    path.write_text("wid: 2\nseed: 4\n")
    assert load_yaml(path).name == "WID2"


@pytest.mark.parametrize(
    ("flags", "name"),
    [
        ([], "WID1"),
        (["--seed", "5"], "WID1"),
        (["--eps", "0.5", "--duration", "20"], "WID1+eps,duration_s"),
        (["--eps", "0.5", "--name", "faster"], "faster"),
    ],
)
def test_compose_names_a_changed_preset_in_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], name: str
) -> None:
    out = tmp_path / "t.lrt"
    assert main(["compose", "--wid", "1", "--duration", "260", *flags, "-o", str(out)]) == 0
    assert trace_format.read(out).workload.name == name
    assert f"{out}: {name}, " in capsys.readouterr().out
