"""ament_python package of the Timely ROS 2 nodes; also pip-installable (-e) into the venv."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "timely_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
        # launch -> the repository's launch/: `ros2 launch timely_ros planner.launch.py`
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
    ],
    package_data={PACKAGE: ["py.typed"]},
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="Timely",
    maintainer_email="timely@example.org",
    description="Timely planner and skill-executor nodes, bring-up and CLI",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "timely = timely_ros.cli_entry:main",
            "timely_planner = timely_ros.planner_node:main",
            "timely_skill_executor = timely_ros.skill_executor_node:main",
        ],
    },
)
