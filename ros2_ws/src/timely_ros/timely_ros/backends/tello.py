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

A command succeeds only when the drone answers exactly `ok`; any other answer
(`error Motor stop`, even `error Unknown token`) fails the call with the drone's
words. `tello_retry_count` tries are spent only on a command the drone refused with
such an answer (it did not run, so sending it again cannot repeat a move); a
command left unanswered within `tello_timeout_s` is never sent again: a move's
`ok` only comes when the move ends, so the drone may well still be flying it.

Replies carry no sequence number, so each command must get its own: a reply is
taken as a command's only if every earlier command has had its reply. A command
that timed out, or one cut short by `stop` (and the `stop` itself), still owes
its reply; before the next command is sent, the owed replies are awaited for up to
`tello_timeout_s` and discarded (logged) as they come. If one has not come by then,
that next command is not sent and fails saying so, and the owed reply is taken as
lost (the drone may never have heard that command); only a reply later still than
that could be misread, which is why the wait is as long as a command's own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import djitellopy.tello as djitello
from djitellopy import Tello

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


_POLL_S = 0.01  # how often the reply queue is looked at
_GAP_S = 0.1  # pause after a reply before the next command (as djitellopy: else dropped)
_log = logging.getLogger(__name__)


def _text(reply: bytes) -> str:
    return reply.decode("utf-8", "replace").strip()


class _Drone(Tello):
    """djitellopy's Tello (its UDP sockets, receiver threads and state stream), addressed
    at any host:port, with commands and replies kept in step (see the module docstring):
    djitellopy's own send_control_command takes any reply containing "ok" as success
    and reads a late reply as the next command's."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host=host)
        self.address = (host, port)
        self.name = f"tello {host}"
        self._link = threading.Lock()  # the reply queue, _owed and _stops, against send_stop
        self._owed: list[str] = []  # commands sent whose replies have not come yet
        self._stops = 0  # `stop`s sent: an exchange in flight then leaves its reply owed
        self._quiet_until = 0.0  # monotonic time before which nothing is sent (_GAP_S)

    def _replies(self) -> list[bytes]:
        """The replies from this drone, in arrival order (appended by djitellopy's thread)."""
        return self.get_own_udp_object()["responses"]

    def _sendto(self, command: str) -> None:
        # djitellopy's send_command_without_return would log "no response expected"
        djitello.client_socket.sendto(command.encode("utf-8"), self.address)

    def _discard_late(self) -> None:
        """Drop the replies owed by earlier commands, as many as have come (under _link)."""
        replies = self._replies()
        while self._owed and replies:
            text = _text(replies.pop(0))
            _log.warning(
                "%s: discarded the late answer %r (owed for: %s)",
                self.name,
                text,
                ", ".join(self._owed),
            )
            self._owed.pop(0)
            self._quiet_until = time.monotonic() + _GAP_S

    def exchange(self, command: str, timeout_s: float, stop: threading.Event) -> str | None:
        """Send `command` once and return its reply (stripped text); None when `stop` was
        set before it went out or a `stop` was sent while it awaited its reply. Raises
        SkillFailed when no reply came within `timeout_s` (it is then owed), or when a
        reply owed by an earlier command has not come within `timeout_s` (then
        `command` is not sent, and that reply is taken as lost)."""
        deadline = time.monotonic() + timeout_s
        while True:  # first the replies earlier commands owe
            with self._link:
                self._discard_late()
                if stop.is_set():
                    return None
                if not self._owed and time.monotonic() >= self._quiet_until:
                    self._replies().clear()  # unasked for (none owed): not this command's
                    stops = self._stops
                    self._sendto(command)
                    break
                if self._owed and time.monotonic() >= deadline:
                    lost = " and ".join(repr(c) for c in self._owed)
                    self._owed.clear()
                    raise SkillFailed(
                        f"{self.name}: {command}: not sent: the late answer to {lost} did not "
                        f"come within {timeout_s:g} s, so the link is out of step (that "
                        "answer is now taken as lost)"
                    )
            time.sleep(_POLL_S)
        deadline = time.monotonic() + timeout_s
        while True:
            with self._link:
                if self._stops != stops:  # the next reply may be the stop's
                    self._owed.append(command)
                    return None
                replies = self._replies()
                if replies:
                    self._quiet_until = time.monotonic() + _GAP_S
                    return _text(replies.pop(0))
                if time.monotonic() >= deadline:
                    self._owed.append(command)
                    raise SkillFailed(f"{self.name}: {command}: no answer within {timeout_s:g} s")
            time.sleep(_POLL_S)

    def send_stop(self) -> None:
        """Send `stop` (hover) now, even while a command awaits its reply: the stop's
        reply and that command's are then owed."""
        with self._link:
            self._stops += 1
            self._owed.append("stop")
            self._sendto("stop")


class TelloBackend:
    def __init__(
        self, params: ExecutorParams, drone_factory: Callable[[str, int], _Drone] = _Drone
    ) -> None:
        self._skills = SkillSet.load("drone", streamed=True)  # fp legs too
        self._params = params
        self._factory = drone_factory
        self._drone: _Drone | None = None
        self._sdk_mode = False  # `command` answered `ok`
        self._lock = threading.Lock()

    @property
    def skill_set(self) -> SkillSet:
        return self._skills

    def _send(self, drone: _Drone, command: str, stop: threading.Event) -> bool:
        """Send `command` until the drone answers `ok` (True), resending it only when the
        drone refused it (`error ...`: it did not run), up to tello_retry_count tries;
        False when a stop cut it short. Raises SkillFailed with the drone's answer."""
        tries = self._params.tello_retry_count
        reply = ""
        for _ in range(tries):
            answer = drone.exchange(command, self._params.tello_timeout_s, stop)
            if answer is None:
                return False
            reply = answer
            if reply.lower() == "ok":
                return True
        last = f" (the last of {tries} tries)" if tries > 1 else ""
        raise SkillFailed(f"{drone.name}: {command}: the drone answered {reply!r}{last}")

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
            if self._drone is None:  # kept even if `command` fails: it may owe a reply
                self._drone = self._factory(self._params.tello_host, self._params.tello_port)
            drone = self._drone
            if not self._sdk_mode:
                if not self._send(drone, "command", stop):  # enter SDK mode
                    return ""
                self._sdk_mode = True
            if skill.name == "delay":  # hover, wake early on cancel
                stop.wait(float(args[0]))  # type: ignore[arg-type]
            for done, command in enumerate(commands):
                if stop.is_set():
                    break
                progress(done / len(commands), f"{command} | {self.telemetry()}")
                if not self._send(drone, command, stop):
                    break
        progress(1.0, f"{' ; '.join(commands) or skill.name} | {self.telemetry()}")
        return ""

    def halt(self) -> None:
        """Stop and hover now, even while a move command is outstanding."""
        if self._drone is not None:
            self._drone.send_stop()

    def close(self) -> None:
        """Nothing to release: djitellopy's sockets live as long as the process."""
