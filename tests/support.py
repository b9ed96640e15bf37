"""What many tests share: waiting for a condition with a deadline.

    wait_for(predicate, what, timeout=60) -> the predicate's first truthy value
    await until(pilot, predicate, what, timeout=60) -> the same, without blocking the loop
    with short_dir() as root: ...   a fresh folder under /tmp, removed afterwards

Tests never sleep as synchronisation: they poll for the condition they need and fail
with `what` when the deadline passes. The default deadline is generous because only a
failing test ever reaches it; a test that waits on something slow (a real claude turn)
passes its own.

Offices keep AF_UNIX sockets under their home, and a socket path is limited to 107 bytes:
pytest's `tmp_path` is often deeper than that, so tests that start an office use a short
folder under /tmp (the `short_tmp` fixture in conftest.py; `short_dir` where a fixture cannot
be used: hypothesis examples, wider-scoped fixtures).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from hive_core.office import Office
    from hive_tui.app import HiveApp

T = TypeVar("T")
# What a predicate returns while the condition does not hold yet: the value it returns once
# it holds is typed without these (`lambda: pid_of(x)` waits for an int).
Falsy = None | Literal[False, ""]

TIMEOUT_S = 60.0
# Short enough that a test does not idle, long enough not to starve the process it waits on
# (two cores are shared by everything on these machines).
POLL_S = 0.02


def wait_for(predicate: Callable[[], T | Falsy], what: str, timeout: float = TIMEOUT_S) -> T:
    """Call `predicate` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL_S)


async def until(
    pilot: Pilot[Any] | None,
    predicate: Callable[[], T | Falsy],
    what: str,
    timeout: float = TIMEOUT_S,
) -> T:
    """`wait_for` on an event loop. Inside `app.run_test()` pass the pilot: its pause lets the
    screen process timers and messages between polls; elsewhere pass None."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        if pilot is None:
            await asyncio.sleep(POLL_S)
        else:
            await pilot.pause(POLL_S)


@contextmanager
def short_dir(prefix: str = "hive-") -> Iterator[Path]:
    """A fresh folder under /tmp, removed with everything in it afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, onerror=_writable_and_retry)


def _writable_and_retry(function: Callable[[str], object], path: str, _exc: object) -> None:
    # Some tests take write permission away from a folder to prove a refusal; a test that
    # left one behind, or a process still writing into the folder, must not fail teardown.
    try:
        os.chmod(os.path.dirname(path), stat.S_IRWXU)
        function(path)
    except OSError:
        pass


def office_of(app: HiveApp) -> Office:
    """The in-process office of an app a test built with `HiveApp(Office(...))`."""
    from hive_tui.link import LocalLink

    assert isinstance(app.link, LocalLink), app.link
    return app.link.office


def shell_roster(*agents: str) -> str:
    """office.toml for a team of shell desks (no model API), the first the manager."""
    desks = "".join(
        f'\n[[agents]]\nid = "{a}"\nname = "{a.title()}"\nprovider = "shell"\n' for a in agents
    )
    return f'[office]\nmanager = "{agents[0]}"\n{desks}'
