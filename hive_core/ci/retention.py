"""Retention: the office's hourly sweep of the cache, deleting what `expired` decides
and the memory entries of what it deletes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hive_core.ci.cache import attempts
from hive_core.ci.runs import Cached, expired
from hive_core.paths import CiRun, HivePaths

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from hive_core.schema import OfficeSettings

SWEEP_INTERVAL_S = 3600.0


class Index(Protocol):
    """What the sweep asks of memory's index (memory.MemoryStore is one)."""

    def delete_source_file(self, path: Path | str) -> int: ...

    def paths_of(self, source: str) -> set[str]: ...


# --- effects: retention --------------------------------------------------------------------


def _scan(run: CiRun) -> Cached:
    size, newest, summary, logs = 0, 0.0, False, False
    for file in run.files():
        try:
            st = file.lstat()
        except OSError:
            continue
        size += st.st_size
        newest = max(newest, st.st_mtime)
        summary |= file == run.summary
        logs |= file != run.summary
    return Cached(run, size, newest, summary, logs)


def sweep(paths: HivePaths, settings: OfficeSettings, store: Index) -> list[str]:
    """One retention pass; what was deleted and why (for the office's log)."""
    found = [_scan(run) for run in attempts(paths)]
    plan = expired(
        found,
        time.time(),
        settings.ci_logs_max_age_days * 86400,
        settings.ci_logs_max_mb * 1e6,
    )
    done: list[str] = []
    for run, why in plan:
        # run.json and its entries first: an entry never outlives its file, and a crash
        # after this leaves logs the next pass takes as orphans.
        with contextlib.suppress(FileNotFoundError):
            run.summary.unlink()
        store.delete_source_file(run.summary)
        for file in run.files():
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
        _prune(paths, run.root)
        done.append(f"{run.root.relative_to(paths.ci_logs).as_posix()}: {why}")
    # Entries whose run.json is gone however it went.
    for rel in store.paths_of("ci"):
        if not os.path.lexists(os.path.normpath(paths.hive / rel)):
            store.delete_source_file(rel)
            done.append(f"{rel}: entries without their run.json")
    return done


def _prune(paths: HivePaths, folder: Path) -> None:
    """Remove `folder` and the folders above it up to the cache, while they are empty."""
    while folder != paths.ci_logs and paths.ci_logs in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


async def sweep_loop(
    paths: HivePaths,
    settings: OfficeSettings,
    stop: asyncio.Event,
    log: Callable[[str], None],
    open_index: Callable[[], AbstractContextManager[Index]],
) -> None:
    """The office's retention loop: a pass at start, then every SWEEP_INTERVAL_S, each on
    an index opened for it; each deletion goes to `log` (the office's log)."""
    while not stop.is_set():
        for line in await asyncio.to_thread(_sweep_opened, paths, settings, open_index):
            log(f"ci-logs: deleted {line}")
        try:
            await asyncio.wait_for(stop.wait(), SWEEP_INTERVAL_S)
        except TimeoutError:
            continue


def _sweep_opened(
    paths: HivePaths,
    settings: OfficeSettings,
    open_index: Callable[[], AbstractContextManager[Index]],
) -> list[str]:
    with open_index() as index:
        return sweep(paths, settings, index)
