"""Another planner of this planner's name on the same ROS domain (another machine, or
a process without the journal's lock): both would answer every goal on the one action
name and drive the same robots, and clients would take the two heartbeats for
restarts. A planner hears it on its own heartbeat topic, as a beat of its own name
with another incarnation, and refuses goals while it hears one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from timely_ros.liveness import HEARTBEAT_PERIOD_S, Beat

# a twin counts as gone after this long without its beat (several missed periods)
TWIN_SILENT_S = 10 * HEARTBEAT_PERIOD_S


class TwinWatch:
    """Beats of `source` from incarnations other than `incarnation`."""

    def __init__(
        self, source: str, incarnation: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.source = source
        self.incarnation = incarnation
        self._clock = clock
        self._lock = threading.Lock()
        self._heard: dict[str, float] = {}  # twin incarnation -> last beat

    def beat(self, beat: Beat) -> bool:
        """Record a heartbeat from the planner's topic; True when it is a twin not
        heard for TWIN_SILENT_S (worth reporting)."""
        if beat.source != self.source or beat.incarnation == self.incarnation:
            return False
        with self._lock:
            now = self._clock()
            last = self._heard.get(beat.incarnation)
            self._heard[beat.incarnation] = now
            return last is None or now - last > TWIN_SILENT_S

    def twin(self) -> str | None:
        """The incarnation of a twin heard within TWIN_SILENT_S, or None."""
        with self._lock:
            now = self._clock()
            live = [i for i, at in self._heard.items() if now - at <= TWIN_SILENT_S]
            return min(live) if live else None

    def why(self) -> str | None:
        """Why goals are refused now, or None."""
        twin = self.twin()
        if twin is None:
            return None
        return (
            f"another planner named {self.source} (incarnation {twin}) is running on this "
            "ROS domain: both would answer goals and drive the same robots; stop one, or "
            "give each its own namespace"
        )
