"""The app as users get it, for the app's tests (issue 25): a real `hive-office serve` of a
home, and HiveApp attached to it over the SocketLink.

    app = serve_app(paths)                 # the roster's CLIs started
    app = serve_app(paths, agents=False)   # `serve --no-agents`
    async with run_app(app, (160, 48)) as pilot: ...

The home must be ready (office.toml written, `init_office` run). After the test each
office is stopped (SIGTERM, as `hive-office stop` does) unless the test stopped it from
the app, and either way it must have exited 0. A test that needs the office's internals
(its supervisor, listeners or states) runs it in-process, `HiveApp(Office(...))`, and
says why.
"""

from __future__ import annotations

import os
import socket
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from functools import partial

import pytest
from textual.pilot import Pilot

from hive_core.clients.protocol import PROTOCOL_VERSION, Hello, Snapshot, encode, office_reader
from hive_core.paths import HivePaths
from hive_core.terminal.emulator import Emulator, GhosttyEmulator
from hive_tui.app import HiveApp
from hive_tui.link import SocketLink
from tests.serve_support import ServedOffice
from tests.support import TIMEOUT_S, until, wait_for

ServeApp = Callable[..., HiveApp]


@pytest.fixture
def serve_app() -> Iterator[ServeApp]:
    offices: list[ServedOffice] = []

    def attach(paths: HivePaths, *, agents: bool = True) -> HiveApp:
        office = ServedOffice(paths.home, agents=agents)
        offices.append(office)
        office.start()
        app = HiveApp(wait_for(partial(_connected, paths), "the office to take a client"))
        _record_screens(app)
        return app

    yield attach
    for office in offices:
        if office.proc is None:
            continue  # it never started: the test failed there already
        code = office.stop() if office.running() else office.process.wait()
        assert code == 0, f"the office exited {code}: {office.log.read_text()}"


# What the link handed each app for its panes, in order, for pane_says' report: it is how
# a recorder's READY lost in the pane's emulator (not on the way) was found.
_RECEIVED: weakref.WeakKeyDictionary[HiveApp, list[str]] = weakref.WeakKeyDictionary()


def _record_screens(app: HiveApp) -> None:
    received = _RECEIVED.setdefault(app, [])
    output, snapshot = app.pane_output, app.pane_snapshot

    def pane_output(agent_id: str, data: bytes) -> None:
        received.append(f"{time.monotonic():.3f} {agent_id} output {data[:60]!r}")
        output(agent_id, data)

    def pane_snapshot(agent_id: str, data: bytes) -> None:
        screen = GhosttyEmulator()
        screen.restore(data)
        top = [_text(screen, row) for row in range(min(3, screen.size[0]))]
        received.append(f"{time.monotonic():.3f} {agent_id} snapshot {screen.size} {top}")
        snapshot(agent_id, data)

    app.pane_output = pane_output  # type: ignore[method-assign]
    app.pane_snapshot = pane_snapshot  # type: ignore[method-assign]


def _text(screen: Emulator, row: int) -> str:
    return "".join(run.text for run in screen.line(row)).rstrip()


def _office_screen(paths: HivePaths, agent: str) -> str:
    """The office's own copy of the agent's screen, as a second client gets it."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(paths.client_socket))
            sock.sendall(
                encode(Hello(version=PROTOCOL_VERSION, pid=os.getpid(), term_cols=80, term_rows=24))
            )
            reader = office_reader()
            while True:
                data = sock.recv(1 << 16)
                if not data:
                    return "(the office closed the connection)"
                for message in reader.feed(data):
                    if isinstance(message, Snapshot) and message.agent == agent:
                        screen = GhosttyEmulator()
                        screen.restore(message.data)
                        rows = [_text(screen, r) for r in range(screen.size[0])]
                        return f"{screen.size}, history {screen.history_size}: {[r for r in rows if r]}"
    except OSError as e:
        return f"(cannot ask: {e})"


def _connected(paths: HivePaths) -> SocketLink | None:
    try:
        return SocketLink.connect(paths)
    except (FileNotFoundError, ConnectionRefusedError):
        return None  # its socket file is not there yet, or is bound and not listening yet


async def settled(pilot: Pilot[None], app: HiveApp) -> None:
    """The app's start is done: every pane mounted, the manager's focused. Over the socket
    the panes' first screens can come before that, and a key pressed then may go to a pane
    that start-up takes the focus from."""
    await until(pilot, lambda: all(app.pane(a).is_mounted for a in app.roster), "the panes")
    await until(pilot, lambda: app.focused is app.pane(app.focused_agent), "a focused pane")


async def pane_says(
    pilot: Pilot[None], app: HiveApp, agent: str, text: str, timeout: float = TIMEOUT_S
) -> None:
    """Until `text` is drawn in the first four rows of the agent's pane; if it never is,
    the failure says what the pane draws and what its emulator holds, what the link gave
    it, the office's own copy of the screen, what the office says of the agent and its
    log: where on the way from the child to the pane the text went missing."""
    pane = app.pane(agent)

    def top() -> str:
        return "".join(pane.render_line(y).text for y in range(4))

    try:
        await until(pilot, lambda: text in top(), f"{text!r} in {agent}'s pane", timeout)
    except AssertionError as timed_out:
        rows = [pane.render_line(y).text.rstrip() for y in range(pane.size.height)]
        emulator = [_text(pane.emulator, r) for r in range(pane.emulator.size[0])]
        received = [line for line in _RECEIVED.get(app, []) if f" {agent} " in line]
        paths = app.link.paths
        serve_out = paths.home.parent / "serve.out"
        raise AssertionError(
            f"{timed_out}. The pane (mounted {pane.is_mounted}, size {pane.size}, emulator "
            f"{pane.emulator.size}, exited {pane.exited}, notice {pane.notice!r}) draws "
            f"{[r for r in rows if r]}; its emulator holds {[r for r in emulator if r]} (history "
            f"{pane.emulator.history_size}); the link gave it {received[:20]}; the office's "
            f"copy: {_office_screen(app.link.paths, agent)}; "
            f"the office says {app.link.view(agent)}; serve: "
            f"{serve_out.read_text()[-1500:] if serve_out.exists() else '(no serve.out)'}; "
            f"the log: {paths.log.read_text()[-1500:] if paths.log.exists() else '(none)'}"
        ) from None


@asynccontextmanager
async def run_app(app: HiveApp, size: tuple[int, int]) -> AsyncIterator[Pilot[None]]:
    """`app.run_test`, the app then leaving as SIGTERM makes it leave: detached from an
    office that runs on its own, an office in its own process stopped. Either way it stops
    hearing the office before its screen goes, as it does for a person (a test that only
    left `run_test` had the office's notices reach a screen whose widgets were gone)."""
    async with app.run_test(size=size) as pilot:
        # The side's hidden panels follow the first frame (HiveApp._mount_panels); the
        # tests read and key them from the start.
        await until(pilot, lambda: app.panels_mounted, "the side's panels")
        yield pilot
        await app.leave(stop=not app.link.detachable)


async def rewritten_until(
    pilot: Pilot[None], write: Callable[[], object], seen: Callable[[], bool], what: str
) -> None:
    """`write` the hive's files, again until `seen`: the office starts its watcher after
    its client socket, so what a test writes just after attaching can come before the
    watcher and never be reported."""
    for _ in range(100):
        write()
        for _ in range(25):
            await pilot.pause(0.02)
            if seen():
                return
    raise AssertionError(f"the office's watcher never reported {what}")
