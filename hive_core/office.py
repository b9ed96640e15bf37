"""The office without a screen: one process that owns a home and runs its parts.

`hive-office serve` runs this headless; the app runs the same object inside Textual.
It holds the office lock (one office per home), then runs the router (driven by the
hive watcher, the kick socket and a slow sweep) and the committer until told to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from watchfiles import Change, awatch

from hive_core.committer import Committer
from hive_core.config import load_office
from hive_core.hive import ensure_mailbox, read_registry, registry_from_roster, write_registry
from hive_core.paths import HivePaths
from hive_core.routing.decide import Floor
from hive_core.routing.router import WRITE_GRACE_S, Router, RouteStats
from hive_core.schema import HUMAN, OfficeConfig

# The sweep only catches what the watcher and the kicks missed, so it can be slow.
SWEEP_INTERVAL_S = 10.0
# Watcher batching: changes are grouped for this long (ms). Kicks make CLI-sent mail
# immediate, so this only bounds hand-written files and costs no idle CPU worth noting.
WATCH_DEBOUNCE_MS = 50
WATCH_STEP_MS = 50


class OfficeBusy(Exception):
    def __init__(self, paths: HivePaths, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"another office is already running on {paths.home} ({who}). Stop it first "
            f"(kill {pid or '<pid>'}), or use --home for a different office."
        )
        self.pid = pid


@contextlib.contextmanager
def office_lock(paths: HivePaths) -> Iterator[None]:
    """Hold the home's office lock. flock dies with the process, so a crash never
    leaves a stale lock behind."""
    paths.run.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(paths.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OfficeBusy(paths, _read_pid(paths.pid_file)) from None
        paths.pid_file.write_text(f"{os.getpid()}\n")
        try:
            yield
        finally:
            paths.pid_file.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


class Office:
    def __init__(self, paths: HivePaths, config: OfficeConfig | None = None) -> None:
        self.paths = paths
        self.config = config or load_office(paths.office_toml)
        self.committer = Committer(paths.hive)
        registry = read_registry(paths)
        archived = frozenset(
            e.id for e in (registry.agents if registry else []) if e.status == "archived"
        )
        self.router = Router(
            paths, Floor.from_config(self.config, archived), on_change=self._routed
        )
        self._kicked: set[str] = set()
        self._wake = asyncio.Event()

    # --- start-up -------------------------------------------------------------------

    def prepare(self) -> None:
        """Make sure every mailbox exists and the registry matches the roster."""
        for who in [*(a.id for a in self.config.agents), HUMAN]:
            ensure_mailbox(self.paths, who)
        previous = read_registry(self.paths)
        registry = registry_from_roster(self.config, previous)
        for entry in registry.agents:
            if entry.status not in ("archived", "offline"):
                entry.status = "offline"  # nothing runs until this office starts it
            entry.pid = None
        if registry != previous:
            write_registry(self.paths, registry)
            self.committer.touch(self.paths.registry)

    # --- running --------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        self.prepare()
        self.router.recover()
        self.router.scan_all()
        kick = await self._open_kick_socket()
        # The committer stops last, after the final routing pass, so its last commit
        # holds everything.
        commit_stop = asyncio.Event()
        committing = asyncio.create_task(self.committer.run(commit_stop), name="commit")
        routing = [
            asyncio.create_task(self._watch(stop), name="watch"),
            asyncio.create_task(self._route_loop(stop), name="route"),
        ]
        try:
            await stop.wait()
        finally:
            self._wake.set()
            kick.close()
            self.paths.kick_socket.unlink(missing_ok=True)
            await asyncio.gather(*routing, return_exceptions=True)
            self.router.scan_all()
            commit_stop.set()
            await committing

    async def _route_loop(self, stop: asyncio.Event) -> None:
        """Route kicked outboxes at once; sweep everything now and then."""
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + SWEEP_INTERVAL_S
        while not stop.is_set():
            timeout = max(0.0, next_sweep - loop.time())
            if self.router.deferred:
                timeout = min(timeout, WRITE_GRACE_S / 2)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            kicked, self._kicked = self._kicked, set()
            for who in sorted(kicked):
                self.router.scan(who)
            if self.router.deferred:
                for owner in {_owner(self.paths, p) for p in self.router.deferred}:
                    if owner:
                        self.router.scan(owner)
            if loop.time() >= next_sweep:
                self.router.finish_claims()
                self.router.scan_all()
                next_sweep = loop.time() + SWEEP_INTERVAL_S

    def _request_scan(self, who: str) -> None:
        self._kicked.add(who)
        self._wake.set()

    async def _open_kick_socket(self) -> asyncio.DatagramTransport:
        path = self.paths.kick_socket
        path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(path))
        os.chmod(path, 0o600)
        office = self

        class KickProtocol(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: object) -> None:
                office._request_scan(data[:64].decode("ascii", "replace"))

        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
            KickProtocol, sock=sock
        )
        return transport

    async def _watch(self, stop: asyncio.Event) -> None:
        hive = self.paths.hive
        git_dir = str(hive / ".git")

        def interesting(_change: Change, path: str) -> bool:
            return not path.startswith(git_dir)

        async for changes in awatch(
            hive,
            watch_filter=interesting,
            debounce=WATCH_DEBOUNCE_MS,
            step=WATCH_STEP_MS,
            stop_event=stop,
            recursive=True,
        ):
            touched = []
            for change, raw in changes:
                path = Path(raw)
                touched.append(path)
                if change != Change.deleted and path.parent.name == "outbox":
                    owner = _owner(self.paths, path)
                    if owner:
                        self._request_scan(owner)
            self.committer.touch(*touched)

    def _routed(self, stats: RouteStats) -> None:
        self.committer.touch(*stats.touched)
        for kind, _who in stats.notes:
            self.committer.note(kind)


def _owner(paths: HivePaths, path: Path) -> str | None:
    """Whose outbox a path is in (an agent id or `human`), or None."""
    try:
        rel = path.relative_to(paths.hive).parts
    except ValueError:
        return None
    if len(rel) >= 3 and rel[0] == "agents" and rel[2] == "outbox":
        return rel[1]
    if len(rel) >= 2 and rel[0] == HUMAN and rel[1] == "outbox":
        return HUMAN
    return None
