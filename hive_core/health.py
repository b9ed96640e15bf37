"""What is wrong with a running office right now, for `doctor`, the app and the log.

A part of the office that cannot do its job (a loop that died, commits that fail, a
full disk that paused routing) reports a problem under its own name and clears it when
it recovers. The office keeps the current set in `run/health.json` so that `doctor`, a
separate process, can say what is wrong; the app is told through `on_change`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from hive_core.fsio import atomic_write
from hive_core.ids import utc_now_iso


class Problem(msgspec.Struct, kw_only=True):
    component: str
    detail: str
    since: str


class Health(msgspec.Struct, kw_only=True):
    pid: int
    updated: str
    problems: list[Problem] = []


_decoder = msgspec.json.Decoder(Health)


def read_health(path: Path) -> Health | None:
    """The last health a running office wrote, or None (no office, or unreadable)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


class HealthBoard:
    """The office's own view of its problems; written to disk only when it changes."""

    def __init__(self, path: Path, *, on_change: Callable[[list[Problem]], None] | None = None):
        self.path = path
        self.on_change = on_change
        self._problems: dict[str, Problem] = {}

    @property
    def problems(self) -> list[Problem]:
        return list(self._problems.values())

    def report(self, component: str, detail: str) -> None:
        current = self._problems.get(component)
        if current is not None and current.detail == detail:
            return
        since = current.since if current else utc_now_iso()
        self._problems[component] = Problem(component=component, detail=detail, since=since)
        self._publish()

    def set(self, component: str, detail: str | None) -> None:
        """`report` the problem, or `clear` it when `detail` is None (what the office's
        parts are given to say how they are)."""
        if detail is None:
            self.clear(component)
        else:
            self.report(component, detail)

    def clear(self, component: str) -> None:
        if self._problems.pop(component, None) is not None:
            self._publish()

    def publish(self) -> None:
        """Write the current state (at start-up, so a stale file never outlives a run)."""
        self._publish()

    def _publish(self) -> None:
        health = Health(pid=os.getpid(), updated=utc_now_iso(), problems=self.problems)
        # A full disk is itself reported; the in-memory view stays right.
        with contextlib.suppress(OSError):
            atomic_write(self.path, msgspec.json.encode(health), fsync=False)
        if self.on_change is not None:
            self.on_change(self.problems)
