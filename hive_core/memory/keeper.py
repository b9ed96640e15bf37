"""The office's side of memory: keep memory.db current as the hive changes, tidy an
agent's notes when it goes idle, and apply office.toml's retention to every agent's
notes and archive at start and every RETENTION_INTERVAL_S. All SQLite work happens on one thread of its own (a
connection belongs to the thread that opened it), so the office's loop never waits on it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from hive_core.memory.fold import should_tidy
from hive_core.memory.retention import Retention, sweep
from hive_core.memory.sources import TooLarge, entries_for
from hive_core.memory.store import MemoryStore, open_store
from hive_core.memory.tidy import summariser_for, tidy
from hive_core.pace import no_pace
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, is_agent_id

# Changes are indexed in batches at most this often.
INDEX_INTERVAL_S = 0.2
# While changes keep coming (a routing burst), indexing waits until they pause this long,
# but no longer than INDEX_DEFER_MAX_S after the first: indexing 2,000 messages takes a
# CPU second, and during the burst the office's loop (the keys typed meanwhile) and the
# route and commit threads need it more than a search does.
INDEX_QUIET_S = 0.5
INDEX_DEFER_MAX_S = 10.0
# A batch is indexed this many files a transaction, giving way between them (pace.py):
# a file is ~0.3 ms of reading and writing.
INDEX_CHUNK = 16
# Retention is about days and megabytes: an hourly sweep is prompt enough.
RETENTION_INTERVAL_S = 3600.0


class MemoryKeeper:
    def __init__(
        self,
        paths: HivePaths,
        *,
        budget: int,
        use_cli: bool,
        log: Callable[[str, str], None],
        retention: Retention | None = None,
        give_way: Callable[[], None] = no_pace,
    ) -> None:
        self.paths = paths
        self.budget = budget
        self.retention = retention or Retention()
        # Fold with the agent's own CLI (a model call) where it has one, else by rule.
        self.use_cli = use_cli
        self.log = log
        self._give_way = give_way
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="memory"
        )
        self._store: MemoryStore | None = None
        # The sets told since the last batch, as told: merged and filtered on the memory
        # thread (_index). A routing pass tells thousands of paths; filtering them here,
        # on the office's loop, took it ~0.3 s of a 2,000-message burst (py-spy), while
        # the keys the person types wait on that loop to be echoed.
        self._pending: list[set[Path]] = []
        # When a change was last told (time.monotonic): indexing waits for a pause.
        self._last_change = 0.0
        self._wake = asyncio.Event()
        self._closed = False
        # What the index could not take that was told already (_tell).
        self._told: set[str] = set()

    def changed(self, paths: set[Path]) -> None:
        """Hive files that changed (from the router or the watcher). The set is kept as
        it is, not copied: callers hand over a set they no longer change."""
        if not paths:
            return
        self._pending.append(paths)
        self._last_change = time.monotonic()
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._thread, self._open)
            sweep_at = loop.time()
            while not stop.is_set():
                if self.retention.on and loop.time() >= sweep_at:
                    await loop.run_in_executor(self._thread, self._sweep)
                    sweep_at = loop.time() + RETENTION_INTERVAL_S
                waiters = [
                    asyncio.ensure_future(self._wake.wait()),
                    asyncio.ensure_future(stop.wait()),
                ]
                await asyncio.wait(
                    waiters,
                    timeout=max(0.0, sweep_at - loop.time()) if self.retention.on else None,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for waiter in waiters:
                    waiter.cancel()
                if not self._wake.is_set():
                    continue  # stopping, or time for the sweep
                self._wake.clear()
                await self._pause(stop)
                told, self._pending = self._pending, []
                if told:
                    await loop.run_in_executor(self._thread, self._index, told)
        finally:
            self._closed = True
            await loop.run_in_executor(self._thread, self._close)
            self._thread.shutdown(wait=False)

    async def _pause(self, stop: asyncio.Event) -> None:
        """Until the changes pause for INDEX_QUIET_S (INDEX_DEFER_MAX_S at most), and
        INDEX_INTERVAL_S at least; at once when the office stops (what is pending is
        indexed then)."""
        start = time.monotonic()
        wait = INDEX_INTERVAL_S
        while wait > 0 and not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            now = time.monotonic()
            wait = min(self._last_change + INDEX_QUIET_S, start + INDEX_DEFER_MAX_S) - now

    def idle(self, spec: AgentSpec) -> None:
        """The agent finished a turn: fold its notes if they call for it."""
        if self._closed:
            return  # the office is shutting down; the next start's first idle will do it
        asyncio.get_running_loop().run_in_executor(self._thread, self._tidy, spec)

    # --- on the memory thread ------------------------------------------------------------

    def _open(self) -> None:
        try:
            self._store = open_store(self.paths)
        except Exception as exc:
            self.log("office", f"memory index unavailable: {exc!r}")
            return
        for line in self._store.recovered:
            self.log("office", f"memory: {line}")
        for line in self._store.refused:
            self._tell(line)
        self._store.recovered = []

    def _tell(self, line: str) -> None:
        """Log what the index could not take, once a run: a source file refused or cut
        is read again at every change, and must not log at every change."""
        if line not in self._told:
            self._told.add(line)
            self.log("office", f"memory: {line}")

    def _close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _index(self, told: list[set[Path]]) -> None:
        # Temporary files (an atomic write's `.name`) are gone by now or soon.
        batch = {p for p in set().union(*told) if not p.name.startswith(".")}
        if not batch:
            return
        if self._store is not None and self._store.replaced():
            # A CLI found memory.db damaged and rebuilt it: write to the new one.
            self._close()
        if self._store is None:
            self._open()
        if self._store is None:
            return
        store = self._store
        files = sorted(batch)
        try:
            for start in range(0, len(files), INDEX_CHUNK):
                self._give_way()
                changes = entries_for(self.paths, files[start : start + INDEX_CHUNK])
                for line in changes.refused:
                    self._tell(line)
                store.apply(changes)
        except Exception as exc:
            self.log("office", f"memory index update failed: {exc!r}")
        for line in store.recovered:
            self.log("office", f"memory: {line}")
        store.recovered = []

    def _tidy(self, spec: AgentSpec) -> None:
        box = self.paths.mailbox(spec.id)
        notes = box.notes.stat().st_size if box.notes.exists() else 0
        index = box.memory.stat().st_size if box.memory.exists() else 0
        if not should_tidy(notes, index, True, self.budget):
            return
        try:
            fold = tidy(
                self.paths,
                spec.id,
                budget=self.budget,
                summariser=summariser_for(spec, Path(spec.cwd).expanduser())
                if self.use_cli
                else None,
                store=self._store,
            )
        except TooLarge as exc:
            self._tell(str(exc))
            return
        except Exception as exc:
            self.log(spec.id, f"memory tidy failed (notes kept): {exc!r}")
            return
        if fold is not None:
            self.log(spec.id, f"memory tidied ({fold.method}): {len(fold.changes)} change(s)")

    def _sweep(self) -> None:
        agents = sorted(p.name for p in self.paths.agents_dir.glob("*") if is_agent_id(p.name))
        for agent_id in agents:
            try:
                dropped = sweep(self.paths, agent_id, self.retention, store=self._store)
            except TooLarge as exc:
                self._tell(str(exc))
                continue
            except Exception as exc:
                self.log(agent_id, f"memory retention failed (nothing dropped): {exc!r}")
                continue
            if dropped:
                self.log(agent_id, f"memory retention dropped {dropped} old piece(s)")
