"""The app as a client of a real `hive-office serve` (issue 11): HiveApp over a
SocketLink under Pilot, next to raw socket clients (tests/e2e/test_clients_serve.py's).
The pane shows what was printed before it attached, then the live stream; keys typed
in it reach the agent; two clients share the panes and the keyboard; detaching one
leaves the other working, and `ctrl+] d` ends the app with the office running."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hive_core.clients.protocol import Bye, Detach
from hive_core.paths import HivePaths
from hive_tui import link as link_module
from hive_tui.app import HiveApp
from hive_tui.client import run_client
from hive_tui.link import LinkRefused, SocketLink
from tests.e2e.test_clients_serve import Client
from tests.e2e.test_clients_serve import Office as Served
from tests.support import until

PREFIX = "ctrl+right_square_bracket"


@pytest.fixture
def office() -> Iterator[Served]:
    # A short root: a Unix socket path has a 108-byte limit.
    root = Path(os.environ.get("TMPDIR", "/tmp")) / f"hcl-{os.getpid()}-{time.monotonic_ns()}"
    root.mkdir()
    served = Served(root)
    try:
        yield served
    finally:
        served.stop()
        shutil.rmtree(root, ignore_errors=True)


def shown(app: HiveApp, agent: str) -> str:
    """What the agent's pane holds: its history, then its screen."""
    emulator = app.pane(agent).emulator
    rows = [*emulator.history_text()]
    rows += ["".join(run.text for run in emulator.line(y)) for y in range(emulator.size[0])]
    return "\n".join(line.rstrip() for line in rows)


def has_line(text: str, line: str) -> bool:
    return line in text.splitlines()


async def type_line(pilot: Any, text: str) -> None:
    app = pilot.app
    await until(pilot, lambda: app.focused is app.pane(app.focused_agent), "a focused pane")
    await pilot.press(*["space" if c == " " else c for c in text], "enter")


async def test_the_app_shows_the_screen_from_before_then_live_output_and_its_keys_arrive(
    office: Served,
) -> None:
    app = HiveApp(SocketLink.connect(office.paths))
    async with app.run_test(size=(120, 40)) as pilot:
        # Printed by michael's shell before anyone attached: from the office's snapshot.
        await until(pilot, lambda: "early-42" in shown(app, "michael"), "the snapshot")
        await until(pilot, lambda: office.attached() == 1, "one client in clients.json")
        # Keys typed into the focused pane reach the agent; its output comes back live.
        await type_line(pilot, "seq 41 43")
        await until(pilot, lambda: has_line(shown(app, "michael"), "42"), "the live output")
        # The pty follows the pane's interior (the smallest client showing it).
        pane = app.pane("michael")
        rows, cols = pane.content_region.height, pane.content_region.width
        await type_line(pilot, "stty size")
        await until(pilot, lambda: has_line(shown(app, "michael"), f"{rows} {cols}"), "the size")
        # An action goes through the office's one dispatch and its reply comes back.
        await pilot.press(PREFIX, "x")
        await until(pilot, lambda: app.link.view("michael").paused, "michael paused")


async def test_two_clients_share_panes_and_keys_and_detaching_one_leaves_the_other(
    office: Served,
) -> None:
    app = HiveApp(SocketLink.connect(office.paths))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "early-42" in shown(app, "michael"), "the snapshot")
        other = Client(office.paths.client_socket)
        other.until(lambda: "michael" in other.screens, "the other client's snapshot")
        # Keys from the raw client: the app's pane shows what they did.
        other.type("michael", "seq 51 53")
        await until(pilot, lambda: has_line(shown(app, "michael"), "52"), "output in the app")
        # Keys from the app: the raw client sees it.
        await type_line(pilot, "seq 61 63")
        other.until(lambda: "\n62" in other.text("michael"), "output in the other client")
        # The raw client detaches; the app goes on.
        other.send(Detach())
        other.until(lambda: other.closed, "the other client's connection closed")
        assert any(isinstance(m, Bye) and m.why == "detached" for m in other.got)
        await type_line(pilot, "seq 71 73")
        await until(pilot, lambda: has_line(shown(app, "michael"), "72"), "the app still live")
        # ctrl+] d: the app ends, the office (and what it printed) stays.
        await pilot.press(PREFIX, "d")
        await until(pilot, lambda: app.ended, "the app to end")
    assert app.return_code == 0 and app.ended is not None and "detached" in app.ended
    assert office.proc.poll() is None, "the office outlives its screen"
    again = Client(office.paths.client_socket)
    again.until(lambda: "\n72" in again.text("michael"), "the scrollback, at the next attach")
    again.close()


async def test_quit_asks_and_stop_stops_the_office(office: Served) -> None:
    app = HiveApp(SocketLink.connect(office.paths))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "early-42" in shown(app, "michael"), "the snapshot")
        # q asks; esc changes nothing.
        await pilot.press(PREFIX, "q")
        await until(pilot, lambda: type(app.screen).__name__ == "QuitScreen", "the question")
        await pilot.press("escape")
        await type_line(pilot, "seq 81 83")
        await until(pilot, lambda: has_line(shown(app, "michael"), "82"), "still attached")
        await pilot.press(PREFIX, "q", "s")
        await until(pilot, lambda: app.ended, "the app to end")
    assert app.ended is not None and "stopped" in app.ended
    assert office.proc.wait(timeout=60) == 0


def test_a_client_with_no_office_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = HivePaths(tmp_path / "home")
    assert run_client(paths) == 1
    assert "cannot attach to the office" in capsys.readouterr().err


def test_a_client_of_another_protocol_version_is_told_which(
    office: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    allowed = SocketLink.connect(office.paths)
    assert allowed.roster == ["michael", "pam"]
    allowed._sock.close()
    monkeypatch.setattr(link_module, "PROTOCOL_VERSION", 99)
    with pytest.raises(LinkRefused, match="version 99"):
        SocketLink.connect(office.paths)
    assert run_client(office.paths) == 1
    assert "speaks version 99" in capsys.readouterr().err
    assert office.proc.poll() is None


async def test_pause_and_resume_through_the_socket_link(office: Served) -> None:
    """The person's pause and resume reach the office over the link (an Action), and
    the office's answer comes back as the agent's view: the pane's title says so, and
    the registry every `hive` reads has it."""
    app = HiveApp(SocketLink.connect(office.paths))
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.pane("michael").is_mounted, "the panes")
        await pilot.press(PREFIX, "2")
        await until(pilot, lambda: app.focused is app.pane("pam"), "pam's pane focused")
        await pilot.press(PREFIX, "x")
        await until(pilot, lambda: app.link.view("pam").paused, "pam paused by the office")
        await until(pilot, lambda: "paused" in str(app.pane("pam").border_title), "the title")
        registry = office.paths.registry
        await until(
            pilot,
            lambda: '"paused":true' in registry.read_text().replace(" ", ""),
            "the registry shows pam paused",
        )
        await pilot.press(PREFIX, "x")
        await until(pilot, lambda: not app.link.view("pam").paused, "pam resumed")
        assert "paused" not in str(app.pane("pam").border_title)
        await pilot.press(PREFIX, "d")
        await until(pilot, lambda: app.ended, "the app to detach")
    assert office.proc.poll() is None  # the office goes on
