"""A Tello drone through djitellopy (Tello SDK 2.0 text commands over UDP).

Each motion skill maps to one SDK command; the drone answers `ok` once it has
stopped, `error ...` otherwise. On cancel we send `stop` (hover in place). Perception
skills need a vision pipeline on the video stream, which this backend does not
have: they fail with a message saying so.

A path (`fly_path`, streamed legs) is flown leg by leg as relative moves along the
drone's axes (`forward`/`back`, `left`/`right`, `up`/`down`, the components that are
not 0), whose directions the SDK names; not as `go x y z`, whose axes' signs the
SDK guide leaves unsaid. Each leg ends where `go` would, and stays inside the box
spanned by its start and end (so inside a box geofence both lie in). The SDK moves
at least 20 cm per command: a leg with a smaller non-zero component fails before
anything of the call is sent, naming it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from djitellopy import Tello
from djitellopy.tello import TelloException

from robot_models.skills import Skill, SkillSet, SkillValue
from timely_ros.backends.base import Progress, SkillFailed
from timely_ros.config import ExecutorParams

_MOVES = {
    "move_forward": "forward",
    "move_backward": "back",
    "move_left": "left",
    "move_right": "right",
    "move_up": "up",
    "move_down": "down",
    "turn_cw": "cw",
    "turn_ccw": "ccw",
}
_PLAIN = {"takeoff": "takeoff", "land": "land"}


_AXES = (("forward", "back"), ("left", "right"), ("up", "down"))  # a leg's components
MIN_MOVE_CM = 20  # the SDK's shortest relative move


def sdk_commands(skill: Skill, args: tuple[SkillValue, ...]) -> list[str]:
    """The SDK commands of a call, in order (none for `delay`: hovering needs none)."""
    if skill.name in _MOVES:
        return [f"{_MOVES[skill.name]} {int(args[0])}"]  # type: ignore[arg-type]
    if skill.name in _PLAIN:
        return [_PLAIN[skill.name]]
    if skill.name == "delay":
        return []
    if skill.name == "fly_path":
        return _path_commands(skill, args)
    raise SkillFailed(
        f"skill '{skill.name}' is not supported by the tello backend "
        "(it needs a vision pipeline on the video stream)"
    )


def _path_commands(skill: Skill, args: tuple[SkillValue, ...]) -> list[str]:
    commands = []
    for number, leg in enumerate(skill.elements(args), start=1):
        for value, (ahead, behind) in zip(leg, _AXES, strict=True):
            cm = int(value)  # type: ignore[arg-type]
            if cm and abs(cm) < MIN_MOVE_CM:
                shown = ",".join(str(v) for v in leg)
                raise SkillFailed(
                    f"fly_path leg {number} ({shown}): {ahead} {cm} cm is shorter than the "
                    f"Tello SDK's {MIN_MOVE_CM} cm move; nothing of this path was sent"
                )
            if cm:
                commands.append(f"{ahead if cm > 0 else behind} {abs(cm)}")
    return commands


class _Drone(Tello):
    """djitellopy's Tello, addressed at any host:port (a fake drone on loopback)."""

    def __init__(self, host: str, port: int, retry_count: int) -> None:
        super().__init__(host=host, retry_count=retry_count)
        self.address = (host, port)

    def drop_stale_responses(self) -> None:
        """Forget replies that arrived after their command timed out or was stopped,
        so the next command reads its own reply."""
        self.get_own_udp_object()["responses"].clear()


class TelloBackend:
    def __init__(
        self, params: ExecutorParams, drone_factory: Callable[..., Tello] = _Drone
    ) -> None:
        self._skills = SkillSet.load("drone", streamed=True)  # fp legs too
        self._params = params
        self._factory = drone_factory
        self._drone: _Drone | None = None
        self._lock = threading.Lock()

    @property
    def skill_set(self) -> SkillSet:
        return self._skills

    def _connected(self) -> _Drone:
        if self._drone is None:
            p = self._params
            drone = self._factory(p.tello_host, p.tello_port, p.tello_retry_count)
            self._send(drone, "command")  # enter SDK mode
            self._drone = drone
        return self._drone

    def _send(self, drone: _Drone, command: str) -> None:
        drone.drop_stale_responses()
        try:
            drone.send_control_command(command, timeout=self._params.tello_timeout_s)
        except TelloException as err:
            raise SkillFailed(f"tello {self._params.tello_host}: {err}") from None

    def telemetry(self) -> str:
        """Battery, height and yaw from the drone's state stream, as text."""
        if self._drone is None:
            return ""
        state = self._drone.get_current_state()
        if not state:
            return "no state"
        return f"bat {state.get('bat', '?')}% h {state.get('h', '?')}cm yaw {state.get('yaw', '?')}"

    def run(
        self, skill: Skill, args: tuple[SkillValue, ...], stop: threading.Event, progress: Progress
    ) -> str:
        commands = sdk_commands(skill, args)
        with self._lock:
            drone = self._connected()
            if skill.name == "delay":  # hover, wake early on cancel
                stop.wait(float(args[0]))  # type: ignore[arg-type]
            for done, command in enumerate(commands):
                if stop.is_set():
                    break
                progress(done / len(commands), f"{command} | {self.telemetry()}")
                self._send(drone, command)
        progress(1.0, f"{' ; '.join(commands) or skill.name} | {self.telemetry()}")
        return ""

    def halt(self) -> None:
        """Stop and hover now, even while a move command is outstanding."""
        if self._drone is not None:
            self._drone.send_command_without_return("stop")

    def close(self) -> None:
        if self._drone is not None:
            self._drone.drop_stale_responses()
