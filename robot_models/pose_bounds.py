"""Where a drone can be, as far as a plan's text tells before it runs.

A point is not enough: a conditional may or may not run its block, and a skill
such as `sweep` turns by an angle only known when it runs. So the commanded
position is kept as an interval per axis (cm, start frame: x forward, y left, z
up from the ground under the start position) and the heading as an angle
(degrees counter-clockwise from +x) or None once it is unknown. Every point the
drone may reach lies in the intervals; the checks test the intervals' ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

TAKEOFF_ALTITUDE_CM = 100.0  # the Tello takes off to hover at about 1 m (drone.yaml)


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float

    def shift(self, delta: float) -> Interval:
        return Interval(self.lo + delta, self.hi + delta)

    def widen(self, radius: float) -> Interval:
        return Interval(self.lo - radius, self.hi + radius)

    def hull(self, other: Interval) -> Interval:
        return Interval(min(self.lo, other.lo), max(self.hi, other.hi))


_ORIGIN = Interval(0.0, 0.0)


@dataclass(frozen=True)
class PoseBounds:
    x: Interval = _ORIGIN
    y: Interval = _ORIGIN
    z: Interval = _ORIGIN
    heading_deg: float | None = 0.0

    def axis(self, name: str) -> Interval:
        return {"x": self.x, "y": self.y, "z": self.z}[name]

    def moved(self, forward: float, left: float, up: float) -> PoseBounds:
        """After a straight move given in the drone's own frame. With the heading
        unknown, a horizontal move may go any way: both intervals widen by it."""
        z = self.z.shift(up)
        if forward == 0 and left == 0:
            return replace(self, z=z)
        if self.heading_deg is None:
            reach = math.hypot(forward, left)
            return replace(self, x=self.x.widen(reach), y=self.y.widen(reach), z=z)
        h = math.radians(self.heading_deg)
        dx = round(forward * math.cos(h) - left * math.sin(h), 6)  # 6e-17 is not a move
        dy = round(forward * math.sin(h) + left * math.cos(h), 6)
        return replace(self, x=self.x.shift(dx), y=self.y.shift(dy), z=z)

    def turned(self, degrees_ccw: float | None) -> PoseBounds:
        """After a turn; None: by an angle not known before it runs."""
        if degrees_ccw is None or self.heading_deg is None:
            return replace(self, heading_deg=None)
        return replace(self, heading_deg=(self.heading_deg + degrees_ccw) % 360.0)

    def at_altitude(self, altitude_cm: float, at_least: bool) -> PoseBounds:
        """Takeoff (`at_least`: it climbs to the altitude, never descends to it) or
        landing (down to the ground, 0)."""
        if at_least:
            return replace(
                self, z=Interval(max(self.z.lo, altitude_cm), max(self.z.hi, altitude_cm))
            )
        return replace(self, z=Interval(altitude_cm, altitude_cm))

    def hull(self, other: PoseBounds) -> PoseBounds:
        """Either of two poses (a block that may or may not run)."""
        same = self.heading_deg is not None and self.heading_deg == other.heading_deg
        return PoseBounds(
            self.x.hull(other.x),
            self.y.hull(other.y),
            self.z.hull(other.z),
            self.heading_deg if same else None,
        )

    @property
    def exact(self) -> bool:
        return all(i.lo == i.hi for i in (self.x, self.y, self.z))
