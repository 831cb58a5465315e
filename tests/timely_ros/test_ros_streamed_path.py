"""The streamed skill over ROS 2: a planner node (in this process, on a simulated
engine paced to the wall clock and forced to write a plan with a 4-leg `fp` path)
serving the simulated drone `drone1` (`timely up`, its own process). Each leg
reaches the drone's executor as a goal of its own while the call is still being
decoded, and the drone runs the legs in order; a cancel stops the leg it runs, and
no leg after it is ever sent; a leg the drone fails ends the goal, naming it, or,
with `replan_on_failure`, is replanned: no later leg of its path is sent and the
plan goes on from the failure."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.timely_ros.ros_support import (
    TEST_EXECUTOR_WAIT_S,
    TEST_PLANNER_TIMEOUT_S,
    TEST_ROBOT_TIMEOUT_S,
    NodeProcess,
    RosClient,
    StartNodes,
    executor_entry,
    wait_until,
)

pytestmark = pytest.mark.ros

LEGS = ["fp(100,0,50)", "fp(0,100,0)", "fp(-100,0,0)", "fp(0,-100,0)"]
PLAN = "tk();fp(100,0,50,0,100,0,-100,0,0,0,-100,0);ld();"
INSTRUCTION = "Fly a square at 1.5 m"
RECOVERY = "fp(0,-50,0,50,0,0);ld();"  # written after a failure observation


def _service(decode_s: float, plans: dict[str, str] | None = None) -> Any:
    """A planning service whose engine writes PLAN for any request (RECOVERY after a
    failure observation; `plans[word]` for a request whose prompt holds `word`),
    `decode_s` of wall time per token, with drone1's streamed
    skill and its StreamedPath tool."""
    from timely_ros.config import RobotSpec
    from timely_ros.paced_engine import PacedSimulatedEngine
    from timely_ros.service_factory import register_streamed_path
    from tokenizers import Tokenizer

    from robot_models.checkpoints import default_planner_path
    from robot_models.language import load_language
    from timely_core.clock import MonotonicClock
    from timely_core.engine.sim.engine import SimulatedEngineConfig
    from timely_core.engine.sim.latency import LatencyModel
    from timely_core.service import PlanningService

    tokenizer = Tokenizer.from_file(str(default_planner_path() / "tokenizer.json"))
    plan = list(tokenizer.encode(PLAN, add_special_tokens=False).ids)
    recovery = list(tokenizer.encode(RECOVERY, add_special_tokens=False).ids)
    eos = tokenizer.token_to_id("<eos>")
    assert eos is not None

    others = {w: list(tokenizer.encode(p, add_special_tokens=False).ids)
              for w, p in (plans or {}).items()}  # fmt: skip

    def script(prompt_ids: Sequence[int]) -> list[int]:
        prompt = tokenizer.decode(list(prompt_ids))
        if prompt.endswith("')\n"):  # a failure observation
            return recovery
        return next((ids for word, ids in others.items() if word in prompt), plan)

    engine = PacedSimulatedEngine(
        LatencyModel(decode_s=decode_s, prefill_token_s=1e-5),
        script,
        SimulatedEngineConfig(eos_token_id=eos),
    )
    service = PlanningService(engine, tokenizer, "timely", clock=MonotonicClock())
    service.register_robot("drone1", load_language("drone", streamed_skills=True))
    register_streamed_path(service, RobotSpec(id="drone1", type="drone", streamed_skills=True))
    return service


class _Planner:
    """A planner node serving `service`, on an executor of its own sized as `timely
    up` sizes it (a goal holds a thread while its robot runs), spun on a thread."""

    def __init__(self, ros_client: RosClient, service: Any, replan_on_failure: bool) -> None:
        from rclpy.parameter import Parameter
        from timely_ros.bringup import executor_threads
        from timely_ros.config import PlannerParams, RobotSpec, planner_to_parameters
        from timely_ros.executor import TimelyExecutor
        from timely_ros.planner_node import PlannerNode

        params = PlannerParams(
            engine="simulated",
            robots=[RobotSpec(id="drone1", type="drone", streamed_skills=True)],
            executor_wait_s=TEST_EXECUTOR_WAIT_S,
            robot_timeout_s=TEST_ROBOT_TIMEOUT_S,
            replan_on_failure=replan_on_failure,
        )
        self.service = service
        self.node = PlannerNode(
            service=service,
            namespace=f"/{params.namespace}",
            context=ros_client.context,
            parameter_overrides=[
                Parameter(k, value=v) for k, v in planner_to_parameters(params).items()
            ],
        )
        self._executor = TimelyExecutor(
            num_threads=executor_threads([self.node]), context=ros_client.context
        )
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        with contextlib.suppress(ExternalShutdownException):
            self._executor.spin()

    def close(self) -> None:
        self._executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        self.service.close_tools()
        self._thread.join(timeout=5)


def _drone(node_processes: StartNodes, time_scale: float, **params: Any) -> NodeProcess:
    robot = node_processes(
        executor_entry("drone1", "sim-drone", time_scale=time_scale, **params),
        "executors",
        "drone",
    )
    robot.wait_for_output("robot drone1: sim-drone executor ready", 60)
    return robot


@pytest.fixture
def planner_for(ros_client: RosClient) -> Iterator[Any]:
    started: list[_Planner] = []

    def start(
        decode_s: float, replan_on_failure: bool = False, plans: dict[str, str] | None = None
    ) -> Any:
        started.append(_Planner(ros_client, _service(decode_s, plans), replan_on_failure))
        return started[-1].service

    yield start
    for planner in started:
        planner.close()


def _runs(robot: NodeProcess, task_id: str, event: str) -> list[tuple[list[str], float]]:
    """The executor's goals of the task that had `event`: their calls and when."""
    found = re.findall(
        rf"event={event} robot=drone1 task={task_id} segment=\d+ skills=(\[.*?\]) "
        r"mono=([\d.]+)",
        robot.output(),
    )
    return [(json.loads(skills), float(mono)) for skills, mono in found]


def _plan_to_success(ros_client: RosClient, drone: NodeProcess) -> tuple[Any, list[dict[str, Any]]]:
    """The planned goal, succeeded, and the robot progress published meanwhile."""
    from action_msgs.msg import GoalStatus
    from std_msgs.msg import String
    from timely_ros.plan_client import PlanClient, make_goal

    progress: list[dict[str, Any]] = []
    ros_client.node.create_subscription(
        String, "/timely/robot_progress", lambda m: progress.append(json.loads(m.data)), 100
    )
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60)
    call = client.send(make_goal("drone1", INSTRUCTION, scene="visible: wall"))
    assert call.done.wait(120), drone.output()[-3000:]
    assert call.status == GoalStatus.STATUS_SUCCEEDED, call.final_result().error
    return call, progress


def test_each_leg_runs_on_the_drone_while_the_path_is_decoded(
    node_processes: StartNodes, ros_client: RosClient, planner_for: Any
) -> None:
    drone = _drone(node_processes, time_scale=0.1)  # a leg runs about 0.3 s
    planner_for(0.3)  # about 8 tokens per leg: 2.4 s of decoding each
    call, progress = _plan_to_success(ros_client, drone)
    assert [s.text for s in call.segments] == ["tk();", PLAN[5:-5], "ld();"]
    task_id = call.segments[0].task_id
    executed = _runs(drone, task_id, "segment_executed")
    # tk, then each leg as a goal of its own, in order, then ld (the path's own
    # segment is not sent again)
    assert [skills for skills, _ in executed] == [
        ["takeoff()"],
        *([leg] for leg in LEGS),
        ["land()"],
    ]
    # before the path's segment (at its ')') reached the client, the drone had flown
    # the first two legs and started the third (each leg is decoded in about 2.4 s
    # and flown in about 0.3 s: a goal's round trip to the drone has seconds to spare)
    path_segment_at = call.segment_times[1]
    assert all(mono < path_segment_at for _, mono in executed[1:3])
    started = re.findall(
        rf"event=segment_started robot=drone1 task={task_id} segment=\d+ mono=([\d.]+)",
        drone.output(),
    )
    assert len(started) == 6 and float(started[3]) < path_segment_at  # tk, 4 legs, ld
    # the path's segment starts with its first leg and ends after its last
    wait_until(lambda: any(p["event"] == "end" and p["segment"] == 2 for p in progress), 10, "")
    path = [(p["event"], p.get("element")) for p in progress if p["segment"] == 1]
    assert [e for e in path if e[0] != "progress"] == [
        ("start", 0),
        ("element_end", 0),
        *((kind, n) for n in (1, 2, 3) for kind in ("element_start", "element_end")),
        ("end", None),
    ]


def test_a_cancel_stops_the_leg_and_nothing_after_it_is_sent(
    node_processes: StartNodes, ros_client: RosClient, planner_for: Any
) -> None:
    from timely_ros.plan_client import PlanClient, make_goal

    drone = _drone(node_processes, time_scale=1.0)  # a leg runs about 3 s
    planner_for(0.01)  # every leg is queued at the planner while tk() runs
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60)
    call = client.send(make_goal("drone1", INSTRUCTION, scene="visible: wall"))
    wait_until(lambda: bool(call.segments), 60, "the first segment")
    task_id = call.segments[0].task_id
    # segment_started names no skills: count the goals started (tk, leg 1, leg 2)
    wait_until(
        lambda: len(re.findall(rf"event=segment_started robot=drone1 task={task_id} ",
                               drone.output())) >= 3,
        60,
        "the drone to start the second leg",
    )  # fmt: skip
    client.cancel(call)
    assert call.done.wait(30)
    time.sleep(4.0)  # the next leg would have started and ended had it been sent
    started = re.findall(rf"event=segment_started robot=drone1 task={task_id} ", drone.output())
    executed = _runs(drone, task_id, "segment_executed")
    assert [skills for skills, _ in executed] == [["takeoff()"], [LEGS[0]]]
    assert len(started) == 3  # tk, leg 1, leg 2 (cancelled): no leg 3, 4 nor ld
    assert f"event=segment_cancelled robot=drone1 task={task_id}" in drone.output()


def test_a_failed_leg_ends_the_goal_and_no_later_leg_is_sent(
    node_processes: StartNodes, ros_client: RosClient, planner_for: Any
) -> None:
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    drone = _drone(node_processes, time_scale=0.1, fail_skills=["fp"])  # the first leg fails
    planner_for(0.01)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60)
    call = client.send(make_goal("drone1", INSTRUCTION, scene="visible: wall"))
    assert call.done.wait(60)
    result = call.final_result()
    assert call.status == GoalStatus.STATUS_ABORTED
    assert result.error.startswith(
        f"robot drone1 aborted element 1 ({LEGS[0]}) of segment 1: robot drone1, "
        "fly_path: injected failure of fp"
    ), result.error
    time.sleep(1.0)  # a later leg would have started by now had it been sent
    task_id = call.segments[0].task_id
    started = re.findall(rf"event=segment_started robot=drone1 task={task_id} ", drone.output())
    assert len(started) == 2  # tk and the failed leg


def test_a_failed_leg_is_replanned_and_no_later_leg_of_its_path_is_sent(
    node_processes: StartNodes, ros_client: RosClient, planner_for: Any
) -> None:
    """The first leg fails while the path is still decoded: its other legs are
    never sent, the path's segment is streamed, the plan rolls back to its end
    with the failure as an observation, and the recovery flies and lands."""

    drone = _drone(node_processes, time_scale=0.1, fail_skills=["fp"])  # the first leg fails
    planner_for(0.15, replan_on_failure=True)  # it fails before the second leg is decoded
    call, progress = _plan_to_success(ros_client, drone)
    result = call.final_result()
    assert result.plan == "tk();" + PLAN[5:-5] + RECOVERY
    # the failed path's segment is in the plan (its first leg ran); RECOVERY follows
    assert [s.text for s in call.segments] == ["tk();", PLAN[5:-5], RECOVERY[:19], "ld();"]
    task_id = call.segments[0].task_id
    executed = _runs(drone, task_id, "segment_executed")
    assert [skills for skills, _ in executed] == [
        ["takeoff()"],
        ["fp(0,-50,0)"],
        ["fp(50,0,0)"],
        ["land()"],
    ]
    started = re.findall(rf"event=segment_started robot=drone1 task={task_id} ", drone.output())
    assert len(started) == 5  # tk, the failed leg, the recovery's two legs, ld
    rolled = [p for p in progress if p["event"] == "rolled_back"]
    assert [p["segment"] for p in rolled] == [1]
    assert rolled[0]["error"].startswith(
        "element 1: robot drone1, fly_path: injected failure of fp"
    ), rolled


def test_a_path_that_waits_for_its_drone_runs_after_the_goal_before_it(
    node_processes: StartNodes, ros_client: RosClient, planner_for: Any
) -> None:
    """Two path goals for one drone: the second's legs come while the first runs, so
    it waits for the drone (one goal at a time), then flies all of its own."""
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    drone = _drone(node_processes, time_scale=0.1)
    planner_for(0.05)
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60)
    calls = [client.send(make_goal("drone1", INSTRUCTION, scene="visible: wall")) for _ in "ab"]
    for call in calls:
        assert call.done.wait(120), drone.output()[-3000:]
        assert call.status == GoalStatus.STATUS_SUCCEEDED, call.final_result().error
    started = re.findall(r"event=segment_started robot=drone1 task=(\S+) ", drone.output())
    first, second = (call.segments[0].task_id for call in calls)
    assert started.count(first) == started.count(second) == 6  # tk, 4 legs, ld each
    tasks = [t for t in started if t in (first, second)]
    assert sum(a != b for a, b in itertools.pairwise(tasks)) == 1, tasks


def test_a_path_whose_first_leg_waits_for_its_drone_flies_once_the_drone_is_free(
    node_processes: StartNodes, ros_client: RosClient, planner_for: Any
) -> None:
    """A hover holds the drone while a long path starting with a leg is decoded:
    the path's first leg waits for the drone and gets it while the rest of its path is
    still being decoded (its segment not dispatched yet); it flies every leg."""
    from action_msgs.msg import GoalStatus
    from timely_ros.plan_client import PlanClient, make_goal

    legs = ",".join(["100,0,0", "-100,0,0"] * 3)  # a segment holds at most 64 tokens
    drone = _drone(node_processes, time_scale=0.1)
    planner_for(0.15, plans={"Hop": "dl(30);dl(20);ld();", "Tour": f"fp({legs});ld();"})
    client = PlanClient(ros_client.node, planner_timeout_s=TEST_PLANNER_TIMEOUT_S)
    assert client.wait_for_server(60)
    hop = client.send(make_goal("drone1", "Hop over the wall", scene="visible: wall"))
    wait_until(lambda: len(hop.segments) >= 1, 60, "the hop's first leg")
    tour = client.send(make_goal("drone1", "Tour the room", scene="visible: wall"))
    for call in (hop, tour):
        assert call.done.wait(120), drone.output()[-3000:]
        assert call.status == GoalStatus.STATUS_SUCCEEDED, call.final_result().error
    assert tour.final_result().plan == f"fp({legs});ld();"
    started = re.findall(r"event=segment_started robot=drone1 task=(\S+) ", drone.output())
    assert started.count(tour.segments[0].task_id) == 7  # 6 legs and the landing
