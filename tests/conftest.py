"""Suite-wide settings: ROS 2 stays on shared memory with its logs in a temp dir,
hypothesis has no per-example deadline (the machines are shared and noisy), and
every vLLM engine of the run, in this process or a child, shares one cache dir."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "SHM")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("ROS_LOG_DIR", tempfile.mkdtemp(prefix="timely-ros-log-"))

settings.register_profile("timely", deadline=None, print_blob=True)
settings.load_profile("timely")


@pytest.fixture(scope="session", autouse=True)
def vllm_cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM writes its caches under the home dir unless told otherwise; one dir for
    the run, so each engine after the first reuses what the first compiled."""
    root = tmp_path_factory.mktemp("vllm-cache")
    os.environ["VLLM_CACHE_ROOT"] = str(root)
    return root
