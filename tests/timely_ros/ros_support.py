"""Helpers for ROS 2 integration tests (kept out of the runtime package): an isolated
DDS domain per test on Fast DDS shared memory, node processes started with
`timely up`, and a client node spun in the test process. Importing this module sets
the process's ROS environment."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from timely_ros.checkpoint import planner_checkpoint

from tests.timely_ros.timeouts import (
    TEST_EXECUTOR_WAIT_S,
    TEST_PLANNER_TIMEOUT_S,
    TEST_ROBOT_TIMEOUT_S,
)

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "ros2_ws" / "src" / "timely_ros"
PYTHON = sys.executable

# Each test runs in a DDS domain of its own (`claim_domain`), held by a file lock so
# that tests running at the same time on this machine (other checkouts, other
# engineers) never share one. A fresh domain per test also keeps a test clear of
# what earlier tests left in theirs (docs/ros.md: with one domain per process, a
# client could see the planner yet none of its goals arrived, after crash tests had
# killed processes with SIGKILL in that domain).
DOMAINS = range(1, 100)  # tests/timely_interfaces uses 100-199
DOMAIN_LOCKS = Path(tempfile.gettempdir()) / "timely-ros-test-domains"
DOMAIN_ID = DOMAINS[os.getpid() % len(DOMAINS)]  # until a test claims its own
os.environ["ROS_DOMAIN_ID"] = str(DOMAIN_ID)
_next_domain = DOMAIN_ID
os.environ["FASTDDS_BUILTIN_TRANSPORTS"] = "SHM"
os.environ["RMW_IMPLEMENTATION"] = "rmw_fastrtps_cpp"


SHM_DIR = Path("/dev/shm")
SHM_PORT = re.compile(r"/dev/shm/(?:sem\.)?fastdds_port(\d+)")


def remove_stale_shm_ports(domain: int) -> int:
    """Delete the Fast DDS shared-memory port files of `domain` that no live process
    has open: those of killed processes. A later participant that takes the same
    port number would otherwise attach to the dead one's port. Returns how many
    files went."""
    first = 7400 + 250 * domain  # Fast DDS's port numbers of the domain
    in_use: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            in_use.update(int(p) for p in SHM_PORT.findall((proc / "maps").read_text()))
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    in_use.update(int(p) for p in SHM_PORT.findall(os.readlink(fd)))
    removed = 0
    for port in range(first, first + 250):
        if port in in_use:
            continue
        for name in (f"fastdds_port{port}", f"fastdds_port{port}_el", f"fastdds_port{port}_sl",
                     f"sem.fastdds_port{port}_mutex"):  # fmt: skip
            with contextlib.suppress(FileNotFoundError):
                (SHM_DIR / name).unlink()
                removed += 1
    return removed


@contextlib.contextmanager
def claim_domain() -> Iterator[int]:
    """Hold a DDS domain no other test on this machine holds, cleared of the
    shared-memory ports killed processes left in it, and make it this process's
    (`DOMAIN_ID`, `ROS_DOMAIN_ID`) until the block ends. Domains are taken in turn,
    so consecutive tests never share one."""
    global DOMAIN_ID, _next_domain
    DOMAIN_LOCKS.mkdir(exist_ok=True)
    start = DOMAINS.index(_next_domain)
    for k in range(len(DOMAINS)):
        domain = DOMAINS[(start + k) % len(DOMAINS)]
        lock = open(DOMAIN_LOCKS / f"{domain}.lock", "w")  # noqa: SIM115 - held below
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _next_domain = DOMAINS[(start + k + 1) % len(DOMAINS)]
        remove_stale_shm_ports(domain)
        DOMAIN_ID = domain
        os.environ["ROS_DOMAIN_ID"] = str(domain)
        try:
            yield domain
        finally:
            lock.close()  # releases the lock
        return
    raise RuntimeError(f"every test DDS domain in {DOMAINS} is held ({DOMAIN_LOCKS})")


def ros_env(log_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        ROS_DOMAIN_ID=str(DOMAIN_ID),
        FASTDDS_BUILTIN_TRANSPORTS="SHM",
        RMW_IMPLEMENTATION="rmw_fastrtps_cpp",
        ROS_LOG_DIR=str(log_dir),
        RCUTILS_LOGGING_BUFFERED_STREAM="0",
        PYTHONPATH=os.pathsep.join([str(REPO), str(PKG), env.get("PYTHONPATH", "")]),
        PYTHONUNBUFFERED="1",
    )
    return env


class NodeProcess:
    """`timely up CONFIG --only WHICH` in a child process; its output goes to a file."""

    def __init__(self, config: dict[str, Any], which: str, tmp: Path, name: str) -> None:
        self.config_path = tmp / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_path = tmp / f"{name}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "timely_ros.cli", "up", str(self.config_path), "--only", which],
            cwd=REPO,
            env=ros_env(tmp / "ros_log"),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_output(self, pattern: str, timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            match = re.search(pattern, self.output())
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} in the node output:\n{self.output()[-4000:]}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()
        return int(self.proc.returncode)


class RosClient:
    """An rclpy context and node in the test process, spun on a background thread."""

    def __init__(self, name: str) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.node import Node
        from timely_ros.executor import TimelyExecutor

        self.context = Context()
        rclpy.init(context=self.context, domain_id=DOMAIN_ID)
        self.node = Node(name, context=self.context)
        self.executor = TimelyExecutor(num_threads=4, context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        with contextlib.suppress(ExternalShutdownException):
            self.executor.spin()

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self._thread.join(timeout=5)

    def serve_plan_task(self, namespace: str, execute: Callable[[Any], Any]) -> Any:
        """A stand-in planner: a PlanTask action server on this node at
        /<namespace>/plan_task, with the planner's QoS, whose goals `execute` runs."""
        from rclpy.action import ActionServer
        from rclpy.callback_groups import ReentrantCallbackGroup
        from timely_interfaces.action import PlanTask
        from timely_ros.qos import action_server_qos

        return ActionServer(
            self.node,
            PlanTask,
            f"/{namespace}/plan_task",
            execute,
            callback_group=ReentrantCallbackGroup(),
            **action_server_qos(),
        )


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def assert_stopped_unrun(events: list[str]) -> None:
    """The server accepted a goal late, was told to stop and stopped, never running
    it. The client side (a robot link, a plan client) cancels by the goal's id at
    once and again on the late acceptance, so the server hears one cancel request
    or both, by when each lands."""
    assert events[0] == "accepted" and events[-1] == "stopped", events
    assert set(events[1:-1]) == {"cancel requested"}, events


def run_until_cancelled(handle: Any, seconds: float) -> bool:
    """A fake action server's execution: `seconds` of motion that a cancel stops.
    Ends the goal (canceled or succeeded); True if it ran to the end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if handle.is_cancel_requested:
            handle.canceled()
            return False
        time.sleep(0.01)
    handle.succeed()
    return True


def executor_entry(robot_id: str, backend: str, **params: Any) -> dict[str, Any]:
    """A robot's `timely_skill_executor` section; its planner heartbeat timeout is
    TEST_PLANNER_TIMEOUT_S unless `params` set it."""
    body = {"backend": backend, "planner_timeout_s": TEST_PLANNER_TIMEOUT_S, **params}
    return {f"/{robot_id}/timely_skill_executor": {"ros__parameters": body}}


def lrtrace_goal_fields(trace_id: int) -> dict[str, str]:
    """robot type, urgency, scene and instruction of an LRTrace task (Table 2)."""
    from robot_models.dataset import lrtrace_task

    task = lrtrace_task(trace_id)
    return {
        "robot_type": task.robot_type,
        "urgency": task.urgency,
        "scene": task.scene,
        "instruction": task.instruction,
        "plan": task.golden_plan,
    }


def planner_entry(robots: dict[str, str], **params: Any) -> dict[str, Any]:
    """A `timely_planner` config section serving `robots` (id -> type)."""
    body: dict[str, Any] = {"robots": list(robots)}
    for rid, rtype in robots.items():
        body[rid] = {"type": rtype}
    body["executor_wait_s"] = TEST_EXECUTOR_WAIT_S
    body["robot_timeout_s"] = TEST_ROBOT_TIMEOUT_S
    body.update(params)
    return {"/**/timely_planner": {"ros__parameters": body}}


StartNodes = Callable[..., NodeProcess]  # the node_processes fixture


def sim_planner_entry(
    tmp_path: Path, robots: dict[str, str] | None = None, **params: Any
) -> dict[str, Any]:
    """A planner on the simulated engine (the data set's plans at the paper's
    latency), serving `robots` (default: the arm `arm1`)."""
    return planner_entry(
        robots or {"arm1": "arm"},
        engine="simulated",
        model_path=str(planner_checkpoint(tmp_path)),
        kv_budget_mb=4096.0,
        **params,
    )


def start_arm_and_planner(
    start: StartNodes,
    tmp_path: Path,
    *,
    time_scale: float,
    robots: dict[str, str] | None = None,
    robot_params: dict[str, Any] | None = None,
    **params: Any,
) -> tuple[NodeProcess, NodeProcess]:
    """The simulated arm `arm1` (its executor's `robot_params` besides `time_scale`)
    and a simulated-engine planner (`params`), each in its own process (`timely up
    --only ...`); (robot, planner) once the robot is ready."""
    arm = executor_entry("arm1", "sim-arm", time_scale=time_scale, **(robot_params or {}))
    robot = start(arm, "executors", "arm")
    planner = start(sim_planner_entry(tmp_path, robots, **params), "planner", "planner")
    robot.wait_for_output("robot arm1: sim-arm executor ready", 60)
    return robot, planner


def start_drone_and_planner(
    start: StartNodes,
    tmp_path: Path,
    *,
    time_scale: float,
    executor: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    **params: Any,
) -> tuple[NodeProcess, NodeProcess]:
    """The simulated drone `drone1` (more executor parameters in `executor`) and a
    simulated-engine planner serving it (with the safety `limits`, if any), each in
    its own process; (robot, planner) once the robot is ready."""
    robot = start(
        executor_entry("drone1", "sim-drone", time_scale=time_scale, **(executor or {})),
        "executors",
        "drone",
    )
    config = sim_planner_entry(tmp_path, {"drone1": "drone"}, **params)
    if limits is not None:
        config["/**/timely_planner"]["ros__parameters"]["drone1"]["limits"] = limits
    planner = start(config, "planner", "planner")
    robot.wait_for_output("robot drone1: sim-drone executor ready", 60)
    return robot, planner


# the subcommands that wait for the planner (`--wait`, 5 s by default: a loaded
# machine can take longer to discover it in a new process)
WAITING_SUBCOMMANDS = frozenset({"plan", "scene", "status", "cancel", "approve", "lifecycle"})
CLI_WAIT_S = "30"


def timely_cli(
    tmp_path: Path, *args: str, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """`timely ARGS...` as a separate process on this test's DDS domain; a subcommand
    that waits for the planner waits CLI_WAIT_S unless ARGS say otherwise."""
    subcommand = next((a for a in args if not a.startswith("-")), "")
    wait = ["--wait", CLI_WAIT_S] if subcommand in WAITING_SUBCOMMANDS else []
    if "--wait" in args:
        wait = []
    return subprocess.run(
        [PYTHON, "-m", "timely_ros.cli", *args, *wait],
        cwd=REPO,
        env=ros_env(tmp_path / "ros_log"),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
