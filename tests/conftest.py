"""Suite-wide settings: ROS 2 stays on shared memory with its logs in a temp dir,
and hypothesis has no per-example deadline (the machines are shared and noisy)."""

from __future__ import annotations

import os
import tempfile

from hypothesis import settings

os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "SHM")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
os.environ.setdefault("ROS_LOG_DIR", tempfile.mkdtemp(prefix="timely-ros-log-"))

settings.register_profile("timely", deadline=None, print_blob=True)
settings.load_profile("timely")
