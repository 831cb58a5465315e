"""Heartbeats, so that each side notices within a bound when the other is gone.

DDS notices a dead or frozen participant only when its lease runs out (about 20 s
with the default settings), and a restarted planner's action server looks the same
as the one before it. So the planner and each robot's executor publish a small
heartbeat (`std_msgs/String`, JSON `{"source", "incarnation", "period_s"}`) a few
times a second, and whoever depends on them watches it: the planner its robots,
the robots and the clients their planner. A new incarnation means a restart, and
what the old one was doing is gone.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

HEARTBEAT_PERIOD_S = 0.2


def new_incarnation() -> str:
    return uuid.uuid4().hex[:12]


def heartbeat_payload(source: str, incarnation: str, period_s: float) -> str:
    return json.dumps({"source": source, "incarnation": incarnation, "period_s": period_s})


@dataclass(frozen=True)
class Beat:
    source: str
    incarnation: str


def parse_heartbeat(data: str) -> Beat | None:
    """The heartbeat in `data`, or None if it is not one (ignored, never fatal)."""
    try:
        raw = json.loads(data)
        return Beat(str(raw["source"]), str(raw["incarnation"]))
    except (ValueError, KeyError, TypeError):
        return None


@dataclass
class _Seen:
    incarnation: str
    at: float  # time.monotonic()
    responding: bool = True


class LivenessWatch:
    """Last heartbeat per source. A source never heard from is unknown (`silent_s`
    None): callers fall back to what they did before heartbeats, so peers that do
    not send any (another vendor's executor) keep working."""

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, _Seen] = {}

    def beat(self, beat: Beat) -> tuple[bool, bool]:
        """Record a heartbeat. Returns (came back after being declared gone,
        restarted with a new incarnation)."""
        with self._lock:
            seen = self._seen.get(beat.source)
            now = self._clock()
            if seen is None:
                self._seen[beat.source] = _Seen(beat.incarnation, now)
                return False, False
            back = not seen.responding
            restarted = seen.incarnation != beat.incarnation
            seen.incarnation, seen.at, seen.responding = beat.incarnation, now, True
            return back, restarted

    def silent_s(self, source: str) -> float | None:
        """Seconds since the last heartbeat of `source`; None if never heard."""
        with self._lock:
            seen = self._seen.get(source)
            return None if seen is None else self._clock() - seen.at

    def responding(self, source: str) -> bool:
        """False once a source that was heard stays silent past the timeout."""
        silent = self.silent_s(source)
        return silent is None or silent <= self.timeout_s

    def incarnation(self, source: str) -> str | None:
        with self._lock:
            seen = self._seen.get(source)
            return None if seen is None else seen.incarnation

    def newly_gone(self) -> list[str]:
        """Sources that went silent past the timeout since the last call (each is
        reported once, until it beats again)."""
        now = self._clock()
        gone = []
        with self._lock:
            for source, seen in self._seen.items():
                if seen.responding and now - seen.at > self.timeout_s:
                    seen.responding = False
                    gone.append(source)
        return gone

    def not_responding(self) -> list[str]:
        with self._lock:
            return sorted(s for s, seen in self._seen.items() if not seen.responding)


def publish_heartbeats(node: Any, topic: str, source: str, incarnation: str) -> None:
    """Publish `source`'s heartbeat on `topic` every HEARTBEAT_PERIOD_S, on a callback
    group of its own so busy goal threads never delay it."""
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from std_msgs.msg import String

    from timely_ros.qos import LATEST

    publisher = node.create_publisher(String, topic, LATEST)
    message = String(data=heartbeat_payload(source, incarnation, HEARTBEAT_PERIOD_S))
    node.create_timer(
        HEARTBEAT_PERIOD_S,
        lambda: publisher.publish(message),
        callback_group=MutuallyExclusiveCallbackGroup(),
    )


def watch_heartbeats(node: Any, topic: str, on_beat: Callable[[Beat], None], group: Any) -> None:
    """Call `on_beat` with each heartbeat on `topic` (malformed ones are ignored)."""
    from std_msgs.msg import String

    from timely_ros.qos import LATEST

    def received(msg: String) -> None:
        beat = parse_heartbeat(msg.data)
        if beat is not None:
            on_beat(beat)

    node.create_subscription(String, topic, received, LATEST, callback_group=group)
