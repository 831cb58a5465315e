"""The timely_ros package installs what a full ROS 2 install needs: its launch files
(`ros2 launch timely_ros planner.launch.py`) and configs under share/timely_ros,
and the package index marker; checked in a wheel built from the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.timely_ros.ros_support import REPO


def test_the_wheel_carries_launch_files_and_configs(tmp_path: Path) -> None:
    # a clean copy (setuptools leaves build/ beside setup.py); the launch link followed
    source = tmp_path / "timely_ros"
    shutil.copytree(
        REPO / "ros2_ws" / "src" / "timely_ros",
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(source)],
        check=True,
        timeout=300,
    )  # fmt: skip
    [wheel] = (tmp_path / "dist").glob("timely_ros-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    share = "timely_ros-0.1.0.data/data/share/timely_ros"
    for launch in ("planner.launch.py", "sim_fleet.launch.py", "tello.launch.py"):
        assert f"{share}/launch/{launch}" in names
    assert f"{share}/launch/_timely_nodes.py" in names  # what the launch files import
    for config in ("sim_fleet.yaml", "tello.yaml", "demo.yaml"):
        assert f"{share}/config/{config}" in names
    assert (
        "timely_ros-0.1.0.data/data/share/ament_index/resource_index/packages/timely_ros" in names
    )
    assert not any(n.startswith("timely_ros/testing") for n in names)  # test helpers stay out
