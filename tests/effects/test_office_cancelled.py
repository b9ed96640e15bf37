"""An office run in-process (the app's LocalLink, a test) whose run is cancelled instead
of stopped - the app cancels its workers when it exits - still ends as a stop ends it:
the run returns, its loops and the hive watcher's thread end, and what the person queued
is routed and committed (issue 25: with the watcher on a thread of its own, such a run
never ended and the app's worker, and the test around it, waited forever)."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from hive_core.cli import hive
from hive_core.config import load_office
from hive_core.hive import init_office
from hive_core.mail import iter_inbox, write_draft
from hive_core.office import Office
from hive_core.office.routes import RouteDriver
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Draft

WAIT_S = 30.0  # a guard against a hang only; nothing here is timed


async def _until(predicate: object, what: str) -> None:
    for _ in range(int(WAIT_S / 0.05)):
        if callable(predicate) and predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _watchers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("watch")]


async def test_a_cancelled_run_ends_as_a_stop_ends_it(short_tmp: Path) -> None:
    paths = HivePaths(short_tmp / "home")
    init_office(paths)
    manager = load_office(paths.office_toml).office.manager
    office = Office(paths, agents=False, program=hive)
    run = asyncio.create_task(office.run(asyncio.Event()))
    await _until(paths.hook_socket.exists, "the office listening")
    await _until(lambda: bool(_watchers()), "the hive watcher's thread")

    write_draft(paths.mailbox(HUMAN), Draft(to=manager, subject="queued as the app exits"))
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, WAIT_S)

    left = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert left == []
    await _until(lambda: not _watchers(), "the hive watcher's thread gone")
    subjects = [m.subject for m in iter_inbox(paths.mailbox(manager))]
    assert "queued as the app exits" in subjects
    dirty = subprocess.run(
        ["git", "status", "--porcelain"], cwd=paths.hive, capture_output=True, text=True
    ).stdout
    assert dirty == ""


async def test_the_route_loop_cancelled_as_it_is_woken_ends(tmp_path: Path) -> None:
    """The office's stop wakes the route loop; a cancel that comes with the wake (the
    app's exit) ends it too, and is not taken for the wake (on 3.11 wait_for returned
    the wake, and the loop went on routing after its office had ended)."""
    router = SimpleNamespace(
        deferred=(), paused=None, finish_claims=lambda: None, scan_all=lambda: None
    )
    driver = RouteDriver(
        HivePaths(tmp_path / "home"),
        cast(Any, router),
        cast(Any, None),
        cast(Any, None),
        cast(Any, SimpleNamespace(refresh=lambda ids: None)),
        {},
        routed=[],
        hive=[],
        tell=lambda *a: None,
        poke=lambda: None,
        office_log=lambda line: None,
        log_event=lambda event: None,
        health=cast(Any, None),
    )
    stop = asyncio.Event()
    routing = asyncio.create_task(driver.run(stop))
    await asyncio.sleep(0.05)
    driver.wake()
    routing.cancel()
    try:
        await asyncio.wait({routing}, timeout=WAIT_S)
        assert routing.cancelled()
    finally:
        stop.set()
        driver.wake()
        await asyncio.wait({routing}, timeout=WAIT_S)
        driver.thread.shutdown()
