"""Fixtures for the ROS 2 tests (helpers live in `ros_support`, importable
under --import-mode=importlib)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.timely_ros.ros_support import NodeProcess, RosClient, claim_domain

TAIL_CHARS = 6000


@pytest.fixture(autouse=True)
def ros_domain() -> Iterator[int]:
    """Every test in its own DDS domain (see `claim_domain`)."""
    with claim_domain() as domain:
        yield domain


@pytest.fixture
def node_processes(tmp_path: Path) -> Iterator[Callable[[dict[str, Any], str, str], NodeProcess]]:
    started: list[NodeProcess] = []

    def start(config: dict[str, Any], which: str = "all", name: str = "nodes") -> NodeProcess:
        proc = NodeProcess(config, which, tmp_path, name)
        started.append(proc)
        return proc

    yield start
    for proc in reversed(started):
        proc.stop()
    # pytest shows a test's teardown output only when it failed: each process's
    # last words, whichever the assertion named
    for proc in started:
        print(f"==> {proc.log_path.name} (its last {TAIL_CHARS} characters)")
        print(proc.output()[-TAIL_CHARS:])


@pytest.fixture
def ros_client() -> Iterator[RosClient]:
    client = RosClient(f"test_client_{os.getpid()}")
    yield client
    client.close()
