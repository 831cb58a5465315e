"""Robots' published scenes and their prefilled prefixes (Teola's partial prefill,
one level above the robot type's stored prefix).

A robot's scene is known before its tasks: what it perceives, republished as it
moves. Once a scene has stood for the debounce time, the service prefills the
robot's stored prefix + the scene's opening of the request part and pins it, so a
task then prefills only its instruction. Robots whose scenes tokenize alike share
one prefill. Prefilled scenes live within a KV budget; the least recently used
goes first. This module is the bookkeeping; `scene_prefill` does the engine work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

MIN_RETRY_S = 0.05  # a prefill that found no memory waits at least this long


@dataclass
class ScenePrefix:
    """A stored prefix + one scene, prefilled and pinned in the engine."""

    prefix_id: str
    token_ids: tuple[int, ...]
    blocks: int  # device blocks it holds beyond the robot prefix's full blocks
    last_used_s: float
    robots: set[str] = field(default_factory=set)
    variant: str | None = None  # the robots' fleet variant, whose KV it holds


@dataclass
class PublishedScene:
    text: str
    due_s: float | None  # when its prefill may start (debounced); None: nothing to do
    prefix: ScenePrefix | None = None  # the prefill of `text`, once done


def scene_prefix_id(token_ids: Sequence[int], variant: str | None = None) -> str:
    """Robots that see the same scene share its prefill, within one fleet variant."""
    digest = hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()[:16]
    return f"scene:{digest}" if variant is None else f"scene@{variant}:{digest}"


class SceneBook:
    def __init__(self, debounce_s: float, budget_blocks: int) -> None:
        self.debounce_s = debounce_s
        self.budget_blocks = budget_blocks
        self.published: dict[str, PublishedScene] = {}
        self.prefixes: dict[str, ScenePrefix] = {}  # by prefix id
        # forgotten, still pinned: only the loop calls the engine, and it unpins these
        # before it prefills again (an id may come back with the same scene)
        self.unpin_pending: list[str] = []

    # ---- scenes ------------------------------------------------------------
    def publish(self, robot_id: str, text: str, now_s: float) -> ScenePrefix | None:
        """Record `robot_id`'s scene (empty: none). Returns the prefix the robot no
        longer uses, if no other robot uses it either (the caller unpins it)."""
        current = self.published.get(robot_id)
        if current is not None and current.text == text:
            return None
        orphan = self.detach(robot_id)
        if text:
            self.published[robot_id] = PublishedScene(text, now_s + self.debounce_s)
        else:
            self.published.pop(robot_id, None)
        return orphan

    def text(self, robot_id: str) -> str:
        scene = self.published.get(robot_id)
        return scene.text if scene is not None else ""

    def detach(self, robot_id: str) -> ScenePrefix | None:
        """Take the robot off its scene's prefix and mark the scene for a new prefill
        (the robot's stored prefix may have changed). Returns the prefix if no robot
        uses it any more."""
        scene = self.published.get(robot_id)
        if scene is None or scene.prefix is None:
            return None
        prefix, scene.prefix = scene.prefix, None
        scene.due_s = scene.due_s if scene.due_s is not None else 0.0
        prefix.robots.discard(robot_id)
        return prefix if not prefix.robots else None

    # ---- prefill schedule --------------------------------------------------
    def next_due_s(self) -> float | None:
        dues = [s.due_s for s in self.published.values() if s.due_s is not None]
        return min(dues) if dues else None

    def take_unpins(self) -> list[str]:
        unpins, self.unpin_pending = self.unpin_pending, []
        return unpins

    def take_due(self, now_s: float) -> tuple[str, str] | None:
        """The robot and scene text whose prefill is due first, taken off the
        schedule (`attach` records the result)."""
        due = [(s.due_s, rid) for rid, s in self.published.items() if s.due_s is not None]
        if not due:
            return None
        due_s, robot_id = min(due)
        if due_s > now_s:
            return None
        scene = self.published[robot_id]
        scene.due_s = None
        return robot_id, scene.text

    def retry(self, robot_id: str, text: str, now_s: float) -> None:
        """Put a prefill that could not run now back on the schedule, one debounce
        time later (unless the robot has published another scene since)."""
        scene = self.published.get(robot_id)
        if scene is not None and scene.text == text and scene.due_s is None:
            scene.due_s = now_s + max(self.debounce_s, MIN_RETRY_S)

    def attach(self, robot_id: str, text: str, prefix: ScenePrefix, now_s: float) -> bool:
        """Give the robot the prefix prefilled for `text`; False if the robot has
        published another scene since (the prefix is then not attached)."""
        scene = self.published.get(robot_id)
        if scene is None or scene.text != text:
            return False
        self.prefixes.setdefault(prefix.prefix_id, prefix)
        prefix.robots.add(robot_id)
        prefix.last_used_s = now_s
        scene.prefix = prefix
        return True

    # ---- budget ------------------------------------------------------------
    def held_blocks(self) -> int:
        return sum(p.blocks for p in self.prefixes.values())

    def evictions_for(self, blocks: int) -> list[ScenePrefix] | None:
        """Least recently used prefixes to drop so `blocks` more fit the budget; None
        if even dropping all of them is not enough."""
        if blocks > self.budget_blocks:
            return None
        excess = self.held_blocks() + blocks - self.budget_blocks
        victims: list[ScenePrefix] = []
        for prefix in sorted(self.prefixes.values(), key=lambda p: p.last_used_s):
            if excess <= 0:
                break
            victims.append(prefix)
            excess -= prefix.blocks
        return victims

    def least_recent(self) -> ScenePrefix | None:
        return min(self.prefixes.values(), key=lambda p: p.last_used_s, default=None)

    def forget(self, prefix: ScenePrefix) -> None:
        """Drop a prefix (evicted, or used by nobody) and queue its unpinning; its
        robots keep their scene texts, served without a prefill until they publish
        again."""
        if self.prefixes.pop(prefix.prefix_id, None) is not None:
            self.unpin_pending.append(prefix.prefix_id)
        for robot_id in prefix.robots:
            scene = self.published.get(robot_id)
            if scene is not None and scene.prefix is prefix:
                scene.prefix = None
        prefix.robots.clear()

    # ---- admission ---------------------------------------------------------
    def prefix_for(self, robot_id: str) -> ScenePrefix | None:
        scene = self.published.get(robot_id)
        return scene.prefix if scene is not None else None
