"""The route driver: when the router runs, and who hears what it did.

Passes run on one route thread (never overlapping, never on the loop: the app's
screen), started by kicks (`hive send`), the hive watcher and a slow sweep. The router
reports what it wrote with its recipients; the watcher's own view of the same files is
sorted so listeners, the committer and memory hear of each change once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from watchfiles import Change, watch

from hive_core.committer import Committer
from hive_core.desks.state import AgentState
from hive_core.events.unread import UnreadIndex
from hive_core.fsio import TEMP_PREFIX
from hive_core.health import HealthBoard
from hive_core.ids import utc_now_iso
from hive_core.memory.keeper import MemoryKeeper
from hive_core.paths import HivePaths, PlaceKind
from hive_core.routing.router import WRITE_GRACE_S, DiskFull, Router, RouteStats
from hive_core.schema import LogEvent, Message

# The sweep only catches what the watcher and the kicks missed, so it can be slow.
SWEEP_INTERVAL_S = 10.0
# Watcher batching: changes are grouped for this long (ms). Kicks make CLI-sent mail
# immediate, so this only bounds hand-written files and costs no idle CPU worth noting.
WATCH_DEBOUNCE_MS = 50
WATCH_STEP_MS = 50
# A path the router reported stands for the watcher's `added` of it this long (the
# watcher lags a busy burst by a second or two). Past it, or past this many paths (files
# the watcher never saw), it is forgotten: the watcher then tells the committer and
# memory again, which is harmless.
REPORTED_FOR_S = 10.0
REPORTED_MAX = 50_000
# While a pass runs, what it delivered is read into the unread index this often: a
# question on the loop meanwhile reads the files delivered since (a burst delivers
# hundreds a second, and each file read there is four system calls the loop may wait on
# the route and commit threads to come back from).
READ_ALONG_S = 0.05
# While a full disk pauses routing, it is tried again this often.
DISK_RETRY_S = 1.0
# An outbox and what the router keeps under it: its own work, which it reports itself.
OUTBOX_KINDS: frozenset[PlaceKind | None] = frozenset({"outbox", "routing", "sent", "bad"})


class RouteDriver:
    def __init__(
        self,
        paths: HivePaths,
        router: Router,
        committer: Committer,
        memory: MemoryKeeper,
        inboxes: UnreadIndex,
        states: Mapping[str, AgentState],
        *,
        routed: list[Callable[[RouteStats], None]],
        hive: list[Callable[[set[Path]], None]],
        tell: Callable[..., None],
        poke: Callable[[], None],
        office_log: Callable[[str], None],
        log_event: Callable[[LogEvent], None],
        health: HealthBoard,
    ) -> None:
        self.paths = paths
        self.router = router
        self.committer = committer
        self.memory = memory
        self.inboxes = inboxes
        self.states = states
        self.routed_listeners = routed
        self.hive_listeners = hive
        self.tell = tell
        self.poke = poke
        self.office_log = office_log
        self.log_event = log_event
        self.health = health
        self._kicked: set[str] = set()
        # Routing passes touch the disk in bulk: they run here, one at a time, never on
        # the loop (the app's screen); what they report comes back through the loop.
        self.thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="route"
        )
        # The hive watcher's own thread (`_watch_thread`), for as long as the office runs.
        self.watcher = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="watch"
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        # The reports of the route pass under way (route thread only), see _route_pass.
        self._gathered: list[RouteStats] | None = None
        # What the router wrote and reported (as the watcher spells paths), see
        # _sort_changes.
        self._reported: dict[str, float] = {}
        self._reported_lock = threading.Lock()
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Let the route loop see its stop now."""
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Route kicked outboxes at once; sweep everything now and then. Each pass runs
        on the route thread; kicks that arrive meanwhile are gathered for the next one."""
        loop = self.loop = asyncio.get_running_loop()
        next_sweep = loop.time() + SWEEP_INTERVAL_S
        while not stop.is_set():
            timeout = max(0.0, next_sweep - loop.time())
            if self.router.deferred:
                timeout = min(timeout, WRITE_GRACE_S / 2)
            paused = self.router.paused
            if paused:
                timeout = min(timeout, DISK_RETRY_S)
            # Not wait_for: on 3.11 it loses a cancel that comes as the wake is set (it
            # returns the wake instead), and this loop went on after its office ended.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            kicked, self._kicked = self._kicked, set()
            # While the disk is full, every pass is a sweep: it finishes the claims left.
            sweep = loop.time() >= next_sweep or paused is not None
            running = loop.run_in_executor(self.thread, self._route_pass, kicked, sweep)
            try:
                await self._read_along(running)
                await asyncio.shield(running)
            except DiskFull as full:
                if paused is None:
                    self.office_log(str(full))
                self.health.report("disk", str(full))
            except asyncio.CancelledError:
                # Whoever routes next (the final pass at stop) must not overlap this one.
                with contextlib.suppress(Exception):
                    await running
                raise
            else:
                if paused is not None:
                    self.office_log("the disk has room again; routing resumed")
                    self.health.clear("disk")
            if sweep:
                next_sweep = loop.time() + SWEEP_INTERVAL_S

    async def _read_along(self, running: asyncio.Future[None]) -> None:
        """While a pass runs, read what it delivered so far into the unread index, on a
        worker: a hook or tick on the loop meanwhile then finds the inboxes read (a
        burst's pass runs for seconds, and the loop would decode its arrivals itself)."""
        while not running.done():
            await asyncio.wait({running}, timeout=READ_ALONG_S)
            if not running.done():
                await asyncio.to_thread(self.inboxes.refresh, sorted(self.states))

    def _route_pass(self, kicked: set[str], sweep: bool) -> None:
        """On the route thread. The reports of its scans are gathered, so the unread
        index reads the inboxes they filled once for the whole pass (_deliver)."""
        gathered: list[RouteStats] = []
        self._gathered = gathered
        try:
            for who in sorted(kicked):
                self.router.scan(who)
            for owner in {self._outbox_owner(p) for p in list(self.router.deferred)}:
                if owner:
                    self.router.scan(owner)
            if sweep:
                self.router.finish_claims()
                self.router.scan_all()
        finally:
            self._gathered = None
            self._deliver(gathered)

    def request_scan(self, who: str) -> None:
        self._kicked.add(who)
        self._wake.set()

    async def watch(self, stop: asyncio.Event) -> None:
        """Watch the hive until stopped. If the watcher fails it is logged and started
        again: without it the committer would miss changes nobody reports."""
        try:
            while not stop.is_set():
                try:
                    await self._watch_once(stop)
                except Exception as exc:
                    self.log_event(
                        LogEvent(
                            ts=utc_now_iso(),
                            kind="office",
                            detail=f"hive watcher failed: {exc!r}",
                        )
                    )
                    await asyncio.sleep(1)
        finally:
            # Its thread has been told to halt; an idle one must not outlive the office.
            self.watcher.shutdown(wait=False)

    async def _watch_once(self, stop: asyncio.Event) -> None:
        """The watcher runs on a thread of its own, not as watchfiles' awatch on the loop:
        a routing burst is thousands of changes a batch, and turning them into Change
        values and sorting them took the loop (the app's keys) for up to 0.1 s a batch.
        Only what they mean comes back to the loop."""
        loop = self.loop = asyncio.get_running_loop()
        halt = threading.Event()
        relay = loop.create_task(stop.wait())
        relay.add_done_callback(lambda _: halt.set())
        try:
            await loop.run_in_executor(self.watcher, self._watch_thread, loop, halt)
        finally:
            halt.set()
            relay.cancel()

    def _watch_thread(self, loop: asyncio.AbstractEventLoop, halt: threading.Event) -> None:
        """On the watcher's thread until `halt`: each batch of changes sorted here, what
        it means handed to the loop (`_watched`)."""
        paths = self.paths
        git_dir = str(self.paths.git_dir)

        def interesting(path: str) -> bool:
            # Claims (gitignored) and temp files (never committed, never memory) concern
            # no one but their writer, and are half the events of a routing burst.
            if path.startswith(git_dir) or os.path.basename(path).startswith(TEMP_PREFIX):
                return False
            place = paths.locate(path)
            return place is None or place.kind != "routing"

        for changes in watch(
            self.paths.hive,
            watch_filter=None,
            debounce=WATCH_DEBOUNCE_MS,
            step=WATCH_STEP_MS,
            stop_event=halt,
            recursive=True,
            raise_interrupt=False,
        ):
            wanted = {(change, path) for change, path in changes if interesting(path)}
            if not wanted:
                continue
            sorted_out = self._sort_changes(wanted)
            try:
                loop.call_soon_threadsafe(self._watched, *sorted_out)
            except RuntimeError:  # the loop closed: the office is gone
                return

    def _watched(self, outboxes: set[str], touched: set[Path], news: set[Path]) -> None:
        """On the loop: what one batch of the watcher's changes means."""
        for owner in sorted(outboxes):
            self.request_scan(owner)
        self.memory.changed(touched)
        if news:
            self.tell(self.hive_listeners, news)

    def _sort_changes(
        self, changes: set[tuple[Change, str]]
    ) -> tuple[set[str], set[Path], set[Path]]:
        """Outboxes with new files, every changed path (told to the committer here), and
        what of it the hive listeners get: not the router's own work (outboxes, claims,
        archives, deliveries into inboxes), which it reports itself with recipients. Only
        readers take files out of an inbox, and that the listeners must still hear of.

        A file the router created and reported is already with the committer and memory:
        its `added` is left out (plain string work, half the events of a burst). Anything
        else that happens to it afterwards is a change of its own and is told."""
        since = time.monotonic() - REPORTED_FOR_S
        with self._reported_lock:
            reported = self._reported
            fresh = [
                (change, raw)
                for change, raw in changes
                if not (change == Change.added and reported.pop(raw, 0.0) > since)
            ]
            for _, raw in changes:
                reported.pop(raw, None)
        outboxes: set[str] = set()
        touched: set[Path] = set()
        news: set[Path] = set()
        locate = self.paths.locate
        for change, raw in fresh:
            path = Path(raw)
            touched.add(path)
            place = locate(raw)
            kind = place.kind if place else None
            if place is not None and kind in OUTBOX_KINDS:
                if change != Change.deleted and kind == "outbox" and place.owner:
                    outboxes.add(place.owner)
            elif not (change == Change.added and kind == "inbox"):
                news.add(path)
        self.committer.touch(*touched)
        return outboxes, touched, news

    def post(self, recipient: str, message: Message) -> None:
        """An office notice, written on the route thread: its atomic write ends in an
        fsync (5-30 ms here), and one wake tick may post one per hookless agent."""
        self.loop = asyncio.get_running_loop()
        future = self.thread.submit(self.router.post, recipient, message)
        future.add_done_callback(self._posted)

    def _posted(self, future: concurrent.futures.Future[None]) -> None:
        if (exc := future.exception()) is not None:
            self.office_log(f"a notice could not be posted: {exc!r}")

    def routed(self, stats: RouteStats) -> None:
        """The router's report of one pass: from the route thread, or from the loop for
        the office's own notices and the passes at start and stop."""
        # The committer is thread-safe, and a burst touches thousands of paths.
        # The pass's touched paths are what its notes account for.
        explains = self.committer.touch(*stats.touched)
        for kind, _who in stats.notes:
            self.committer.note(kind, explains=explains)
        loop = self.loop
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if loop is None or loop.is_closed() or here is loop:
            self._apply_routed(stats)  # on the loop, or no loop runs the office
            return
        now = time.monotonic()
        with self._reported_lock:
            if len(self._reported) > REPORTED_MAX:
                self._reported.clear()
            self._reported.update((str(path), now) for path in stats.touched)
        if self._gathered is not None:
            self._gathered.append(stats)  # delivered at the end of the route pass
        else:
            self._deliver([stats])

    def _deliver(self, reports: list[RouteStats]) -> None:
        """On the route thread: hand reports to the loop. The new mail is read into the
        unread index first: the wake tick that follows (and every hook) asks for it there."""
        loop = self.loop
        if loop is None or loop.is_closed():
            for stats in reports:
                self._apply_routed(stats)  # no loop runs the office any more
            return
        inboxes: set[str] = set().union(*(stats.inboxes for stats in reports))
        self.inboxes.refresh(sorted(inboxes & self.states.keys()))
        for stats in reports:
            loop.call_soon_threadsafe(self._apply_routed, stats)

    def _apply_routed(self, stats: RouteStats) -> None:
        self.memory.changed(stats.touched)
        # The router knows exactly what it wrote: tell listeners now, not when (or if)
        # the watcher gets round to it.
        self.tell(self.routed_listeners, stats)
        if stats.routes:
            self.poke()

    def _outbox_owner(self, path: Path) -> str | None:
        """Whose outbox a path is in (an agent id or `human`), or None."""
        place = self.paths.locate(path)
        return place.owner if place and place.kind in OUTBOX_KINDS else None
