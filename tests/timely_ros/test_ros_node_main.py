"""The nodes' own entry points read each `--params-file` as `timely up` reads its
config, before rcl reads it: a key given twice (rcl keeps the last), a file that is
not UTF-8, not a mapping, not YAML or not there ends with one line and exit status 2,
not an RCLError traceback; other nodes' sections are left to rcl. Most of it runs
before rclpy.init (no DDS here)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from timely_ros import node_main
from timely_ros.config import ConfigError
from timely_ros.node_main import params_files, run_node

from tests.timely_ros.ros_support import PYTHON, REPO, planner_entry, ros_env

PLANNER = "/**/timely_planner:\n  ros__parameters:\n    robots: [drone1]\n"

BAD_FILES: dict[str, tuple[bytes, str]] = {
    "duplicate": (
        (PLANNER + "    drone1: {type: drone}\n    engine: simulated\n"
         "    engine: torch\n").encode(),
        "key 'engine' is given twice",
    ),
    "latin1": (
        (PLANNER + "    drone1: {type: drone}  # caf\xe9\n").encode("latin-1"),
        "is not UTF-8 text",
    ),
    "list": (b"- a\n- b\n", "must be a mapping of node sections"),
    "empty": (b"", "must be a mapping of node sections (`/**/timely_planner:`), got an empty"),
    "syntax": (b"/**/timely_planner: [unclosed\n", "is not valid YAML"),
}  # fmt: skip


def _write(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(BAD_FILES[name][0])
    return path


def test_params_files_are_read_from_the_ros_arguments_only() -> None:
    argv = ["prog", "--params-file", "not_ros.yaml", "--ros-args", "-r", "__ns:=/drone1",
            "-p", "seed:=1", "--params-file", "a.yaml", "--", "--params-file", "app.yaml",
            "--ros-args", "--params-file", "b.yaml"]  # fmt: skip
    assert params_files(argv) == ["a.yaml", "b.yaml"]
    assert params_files(["prog", "--ros-args", "-r", "--params-file"]) == []  # a remap's value
    with pytest.raises(ConfigError, match="--params-file needs a file"):
        params_files(["prog", "--ros-args", "--params-file"])


def test_a_params_file_may_hold_other_nodes_sections(tmp_path: Path) -> None:
    path = tmp_path / "shared.yaml"
    path.write_text("/**:\n  ros__parameters: {use_sim_time: true}\n" + PLANNER)
    node_main.check_params_files(["timely_planner", "--ros-args", "--params-file", str(path)])


@pytest.mark.parametrize("name", [*BAD_FILES, "missing"])
def test_a_bad_params_file_ends_the_node_before_rclpy_starts(
    tmp_path: Path,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _write(tmp_path, name) if name in BAD_FILES else tmp_path / "missing.yaml"
    message = BAD_FILES[name][1] if name in BAD_FILES else "cannot read config"

    def no_init(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("rclpy.init ran on a file rcl cannot read")

    monkeypatch.setattr(node_main.rclpy, "init", no_init)
    argv = ["timely_planner", "--ros-args", "--params-file", str(path)]
    assert run_node(lambda: pytest.fail("no node is made"), argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    ("module", "ns"),
    [("timely_ros.planner_node", []), ("timely_ros.skill_executor_node", ["-r", "__ns:=/drone1"])],
)
def test_the_entry_points_refuse_a_key_given_twice_in_one_line(
    tmp_path: Path, module: str, ns: list[str]
) -> None:
    """rcl alone would take the second `engine` silently."""
    config = planner_entry({"drone1": "drone"}, engine="simulated")
    config["/drone1/timely_skill_executor"] = {"ros__parameters": {"backend": "sim-drone"}}
    text = yaml.safe_dump(config, sort_keys=False).replace(
        "    engine: simulated\n", "    engine: simulated\n    engine: torch\n"
    )
    path = tmp_path / "config.yaml"
    path.write_text(text)
    done = subprocess.run(
        [PYTHON, "-m", module, "--ros-args", *ns, "--params-file", str(path)],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "key 'engine' is given twice" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
