"""Accepted goals and their progress, journaled in SQLite (WAL mode), so that a
planner restarted after a crash reports every goal it was serving as interrupted,
with what it was doing, instead of forgetting it.

One file may serve several planners (rows carry the planner's name); a planner only
ever settles rows of its own name left by an earlier incarnation. Ended rows are
kept for inspection, the newest `keep` per planner. While a planner runs it holds a
lock on the file for its name (`<file>.<name>.lock`): a second planner of the same
name with the same journal (the same config started twice) would settle the live
one's goals as interrupted, so it is refused (`JournalInUse`).
"""

from __future__ import annotations

import fcntl
import os
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS goals (
    goal_id TEXT PRIMARY KEY,
    planner TEXT NOT NULL,
    incarnation TEXT NOT NULL,
    robot_id TEXT NOT NULL,
    instruction TEXT NOT NULL,
    accepted_at REAL NOT NULL,
    state TEXT NOT NULL,
    ended_at REAL,
    outcome TEXT
);
CREATE INDEX IF NOT EXISTS goals_open ON goals (planner, ended_at);
"""


@dataclass(frozen=True)
class Interrupted:
    goal_id: str
    robot_id: str
    instruction: str
    incarnation: str  # of the planner that was serving it
    reason: str


class JournalInUse(RuntimeError):
    """Another running planner of the same name holds the journal."""


class GoalJournal:
    def __init__(self, path: str | Path, planner: str, incarnation: str, keep: int = 10_000):
        """OSError or sqlite3.Error when the file cannot be opened; JournalInUse when a
        running planner of this name holds it."""
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._planner, self._incarnation, self._keep = planner, incarnation, keep
        self._lock = threading.Lock()
        self._closed = False
        self._held = _hold(self.path, planner)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across a process crash
        self._db.executescript(_SCHEMA)

    def accepted(self, goal_id: str, robot_id: str, instruction: str) -> None:
        with self._lock:
            if self._closed:  # shutting down: goal threads may still be ending
                return
            self._db.execute(
                "INSERT OR REPLACE INTO goals (goal_id, planner, incarnation, robot_id, "
                "instruction, accepted_at, state) VALUES (?, ?, ?, ?, ?, ?, 'accepted')",
                (goal_id, self._planner, self._incarnation, robot_id, instruction, time.time()),
            )

    def progress(self, goal_id: str, state: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._db.execute(
                "UPDATE goals SET state = ? WHERE goal_id = ? AND ended_at IS NULL",
                (state, goal_id),
            )

    def ended(self, goal_id: str, outcome: str) -> None:
        with self._lock:
            if self._closed:
                return
            self._db.execute(
                "UPDATE goals SET ended_at = ?, outcome = ? WHERE goal_id = ?",
                (time.time(), outcome, goal_id),
            )
            self._prune()

    def interrupted(self) -> list[Interrupted]:
        """Settle the goals an earlier incarnation of this planner left open: each
        becomes aborted with the reason, and is returned (once)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT goal_id, robot_id, instruction, incarnation, state FROM goals "
                "WHERE planner = ? AND ended_at IS NULL AND incarnation != ? "
                "ORDER BY accepted_at",
                (self._planner, self._incarnation),
            ).fetchall()
            out = []
            for goal_id, robot_id, instruction, incarnation, state in rows:
                reason = (
                    f"aborted: the planner (incarnation {incarnation}) stopped while the goal "
                    f"was {state}"
                )
                self._db.execute(
                    "UPDATE goals SET ended_at = ?, outcome = ? WHERE goal_id = ?",
                    (time.time(), reason, goal_id),
                )
                out.append(Interrupted(goal_id, robot_id, instruction, incarnation, reason))
            return out

    def outcome(self, goal_id: str) -> str | None:
        """How a goal ended (None: open or unknown)."""
        with self._lock:
            row = self._db.execute(
                "SELECT outcome FROM goals WHERE goal_id = ?", (goal_id,)
            ).fetchone()
        return None if row is None else row[0]

    def _prune(self) -> None:
        self._db.execute(
            "DELETE FROM goals WHERE planner = ? AND ended_at IS NOT NULL AND goal_id NOT IN "
            "(SELECT goal_id FROM goals WHERE planner = ? AND ended_at IS NOT NULL "
            "ORDER BY ended_at DESC LIMIT ?)",
            (self._planner, self._planner, self._keep),
        )

    def close(self) -> None:
        """Goals still open stay open in the file: the next incarnation reports them."""
        with self._lock:
            self._closed = True
            self._db.close()
            os.close(self._held)  # the lock goes with it


def _hold(path: Path, planner: str) -> int:
    """Lock `path` for `planner` for this process's life (the descriptor, kept open);
    JournalInUse naming the process that holds it."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", planner.strip("/")) or "planner"
    lock = path.with_name(f"{path.name}.{name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise JournalInUse(
            f"planner {planner} already runs with journal {path} (process {holder}); a "
            "second one would take its goals for interrupted: stop it, or give this one "
            "another namespace or journal_path"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
