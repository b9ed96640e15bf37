"""Panels a person can read (issue 23): a panel zoomed to the whole screen and back, the
Inbox tab's count kept live, the Changes view inside the screen at 80x24 and 160x48, the
help screen without markup debris, and map labels whose name and marks stay apart. The
app is attached to a real `hive-office serve` (no agent CLIs) over the SocketLink
(tests/app/conftest.py). The look in a real tmux is tests/e2e/test_panels_tmux.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from textual.containers import VerticalScroll
from textual.widgets import Static, TabbedContent

from hive_core.hive import init_office
from hive_core.mail import write_draft
from hive_core.paths import HivePaths
from hive_core.schema import Draft, LogEvent
from hive_tui.app import side_width
from hive_tui.map.widget import OfficeMap
from hive_tui.messages import AgentInfo
from hive_tui.panels.log import LogLines, LogPanel
from hive_tui.screens.diff import DiffScreen
from hive_tui.screens.help import HelpScreen
from hive_tui.terminal.pane import TerminalPane
from tests.app.conftest import ServeApp, run_app
from tests.app.test_app import _roster
from tests.app.test_office_map import MapApp, screen_text
from tests.support import until

PREFIX = "ctrl+right_square_bracket"
LONG = (
    "could not start: exited (code 1) right after it started (0.4 s). Log in once in "
    "Michael's pane, the others follow; or run the demo"
)


def _paths(root: Path) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(_roster(root))
    init_office(paths)
    return paths


def _log_text(lines: LogLines) -> str:
    return " ".join(lines.render_line(y).text.strip() for y in range(lines.size.height))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_a_panel_zooms_to_the_whole_screen_and_back(
    size: tuple[int, int], short_tmp: Path, serve_app: ServeApp
) -> None:
    app = serve_app(_paths(short_tmp), agents=False)
    async with run_app(app, size) as pilot:
        side = app.query_one("#side")
        await until(pilot, lambda: side.outer_size.width == side_width(size[0]), "the side")
        log = app.query_one(LogPanel)
        log.add([LogEvent(ts="2026-01-01T10:00:00Z", kind="agent", agent="jim", detail=LONG)])
        await pilot.press(PREFIX, "l")
        lines = app.query_one(LogLines)
        assert app.focused is lines
        await pilot.press(PREFIX, "z")
        await pilot.pause()
        # The panel has the whole width; the map and the panes are gone; every word is on
        # screen, wrapped, with nothing to scroll sideways.
        assert app.layout_mode == "panel"
        assert side.outer_size.width == size[0]
        assert not app.query_one("#left").display and app.focused is lines
        assert " ".join(LONG.split()) in " ".join(_log_text(lines).split())
        assert lines.virtual_size.width <= lines.size.width
        # Another panel stays zoomed; z again is back, the keys still the panel's.
        await pilot.press(PREFIX, "b")
        assert app.layout_mode == "panel" and side.outer_size.width == size[0]
        await pilot.press(PREFIX, "l", PREFIX, "z")
        await pilot.pause()
        assert app.layout_mode == "default" and app.query_one("#left").display
        assert side.outer_size.width == side_width(size[0]) and app.focused is lines
        # Zoomed, esc goes back to the pane and out of the zoom; z there zooms the pane.
        await pilot.press(PREFIX, "z", "escape")
        await pilot.pause()
        assert app.layout_mode == "default" and isinstance(app.focused, TerminalPane)
        await pilot.press(PREFIX, "z")
        assert app.layout_mode == "zoom" and not side.display
        await pilot.press(PREFIX, "z")


def test_the_side_panel_widens_and_the_pane_keeps_its_columns() -> None:
    assert side_width(80) == 26  # as before at 80x24: the pane keeps 54 columns
    assert side_width(120) == 38 and 120 - side_width(120) >= 82
    assert side_width(160) == 64  # was 48: a log line of 60 cells
    assert side_width(300) == 72
    assert all(side_width(w + 1) >= side_width(w) for w in range(40, 300))


async def test_the_inbox_tab_counts_what_waits_and_follows_it(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    paths = _paths(short_tmp)
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        tab = app.query_one(TabbedContent).get_tab("tab-inbox")
        await until(pilot, lambda: app.escalations == {}, "the inbox read")
        assert tab.label.plain == "Inbox"
        for subject in ("Which vendor?", "Which DB?"):
            write_draft(
                paths.mailbox("jim"),
                Draft(to="human", act="query", subject=subject, body="?", needs_human=True),
            )
        await until(pilot, lambda: tab.label.plain == "Inbox 2", "the count of two")
        await pilot.press(PREFIX, "i", "enter", *"B", "ctrl+s")
        await until(pilot, lambda: tab.label.plain == "Inbox 1", "the count after an answer")


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_changes_view_stays_inside_the_screen(
    size: tuple[int, int], short_tmp: Path, serve_app: ServeApp
) -> None:
    app = serve_app(_paths(short_tmp), agents=False)
    async with run_app(app, size) as pilot:
        await pilot.press(PREFIX, "v")
        screen = await until(
            pilot, lambda: isinstance(app.screen, DiffScreen) and app.screen, "the view"
        )
        status = screen.query_one("#diff-status", Static)
        await until(pilot, lambda: "esc close" in str(status.content), "the worktrees read")
        box = screen.query_one("#diff-box").region
        # Its four borders on screen: the bottom one on the last row, not past it.
        assert box.x == 0 and box.right == size[0]
        assert box.y >= 1 and box.bottom == size[1]
        await pilot.press("escape")


async def test_the_help_screen_shows_each_key_without_markup(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    app = serve_app(_paths(short_tmp), agents=False)
    async with run_app(app, (120, 60)) as pilot:
        await pilot.press(PREFIX, "?")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        static = app.screen.query_one(VerticalScroll).query_one(Static)
        plain = "\n".join(static.render_line(y).text for y in range(static.size.height))
        assert "[/b]" not in plain and "[b]" not in plain
        # The copy-mode key `[` is there, as a key, with what it does.
        assert re.search(r"^    \[ +copy mode:", plain, re.M), plain
        # Too long for one line, it goes on under its own text, not under the keys.
        rows = plain.splitlines()
        at = next(y for y, row in enumerate(rows) if "copy mode:" in row)
        column = rows[at].index("copy mode:")
        assert not rows[at + 1][:column].strip() and rows[at + 1][column] != " ", rows[at + 1]
        assert re.search(r"^    ctrl\+\] send ctrl\+\] itself", plain, re.M)
        await pilot.press("escape")


@pytest.mark.parametrize("size", [(160, 14), (80, 8)])
async def test_a_map_label_keeps_the_name_and_its_marks_apart(size: tuple[int, int]) -> None:
    manager = AgentInfo(
        "m", "Michael", "manager", manager=True, status="idle", unread=2, needs_you=True
    )
    app = MapApp([manager, AgentInfo("j", "Jim", "eng", status="idle")])
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        text = "\n".join(screen_text(app.query_one(OfficeMap)))
        # The name (whole, or cut with an ellipsis), a space, then the marks.
        found = re.search(r"M (Michael|Micha?e?…) !✉2", text)
        assert found, text
        assert "Michael!" not in text and "l!✉" not in text
