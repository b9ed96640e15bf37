"""Copy mode in the app (issue 12): a shell agent prints known lines; the prefix and `[`
enter copy mode, `/` and `?` search, space and y copy the selection, which the app
writes to the terminal as OSC 52 (outside tmux) and says so; the view stays frozen while
output goes on, and survives zoom; leaving shows the live pane. Inside tmux the copy
goes to tmux's paste buffer (issue 23: tmux's default `set-clipboard external` drops an
OSC 52): the last test runs the app in a real tmux as it comes and reads the copy back
from tmux's buffer; one before it gives the app a tmux that is not there."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot

from hive_core.cli import hive
from hive_core.hive import init_office
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_tui.app import HiveApp
from hive_tui.terminal.pane import TerminalPane
from tests.support import until, wait_for
from tests.tmux_support import PREFIX_KEY, Cell, TmuxOffice, row_text

PREFIX = "ctrl+right_square_bracket"
# Known lines, then `cat`: the agent keeps running and prints nothing more by itself.
SCRIPT = (
    'for i in $(seq 1 80); do echo "row $i apple"; done; '
    "echo 'the banana split'; echo 'last words'; exec cat"
)


def _office(root: Path) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(
        '[office]\nmanager = "michael"\n\n[[agents]]\nid = "michael"\nname = "Michael"\n'
        f'provider = "shell"\ncwd = "{root}"\ncommand = ["sh", "-c", {json.dumps(SCRIPT)}]\n'
    )
    init_office(paths)
    return paths


@pytest.fixture
async def app(short_tmp: Path) -> AsyncIterator[HiveApp]:
    root = short_tmp
    yield HiveApp(Office(_office(root), program=hive))


def shown(pane: TerminalPane) -> list[str]:
    return [pane.render_line(y).text for y in range(pane.size.height)]


async def _printed(pilot: Pilot[None], pane: TerminalPane) -> None:
    await until(pilot, lambda: any("last words" in row for row in shown(pane)), "the agent's lines")


def typed(text: str) -> list[str]:
    """`text` as the keys Pilot presses."""
    return ["space" if char == " " else char for char in text]


def osc52(text: str) -> str:
    return f"\x1b]52;c;{base64.b64encode(text.encode()).decode()}\a"


async def test_search_select_and_copy_writes_osc52_and_leaves(
    app: HiveApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TMUX", raising=False)
    told = _told(app, monkeypatch)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = app.pane("michael")
        await _printed(pilot, pane)
        driver = app._driver
        assert driver is not None
        written: list[str] = []
        write = driver.write

        def record(data: str) -> None:
            written.append(data)
            write(data)

        monkeypatch.setattr(driver, "write", record)
        live = shown(pane)

        await pilot.press(PREFIX, "left_square_bracket")
        assert pane.in_copy_mode and app.focused is pane
        history = pane.emulator.history_size
        assert history > 0 and shown(pane)[0].endswith(f"[0/{history}]")

        # Output while copying is parsed, not shown.
        pane.feed(b"while copying\r\n")
        await pilot.pause()
        assert not any("while copying" in row for row in shown(pane))
        pane.scroll_history(5)  # what the wheel does when the child asked for no mouse
        assert shown(pane)[0].endswith(f"[5/{history}]")

        # Back to an early line and its match, found by searching up.
        await pilot.press("question_mark", *typed("row 3 "), "enter")
        cursor = pane._copy.cursor if pane._copy else None
        assert cursor is not None and pane._copy_lines is not None
        assert "".join(pane._copy_lines[cursor.line]).startswith("row 3 apple")
        assert shown(pane)[0].endswith(f"/{history}]") and not shown(pane)[0].endswith("[0/")
        # The prefix still works in copy mode: zoom resizes (a reflow); copy mode stays.
        await pilot.press(PREFIX, "z")
        await until(pilot, lambda: pane.size.width > 110, "the zoomed pane")
        assert pane.in_copy_mode and app.layout_mode == "zoom"
        await pilot.press("slash", *"banana", "enter")
        prompt_gone = shown(pane)[-1]
        assert "search down" not in prompt_gone
        await pilot.press("space", "dollar_sign", "y")
        copied = "banana split"
        assert osc52(copied) in written and app.clipboard == copied
        assert told == [
            "Copied 12 characters on 1 line to the terminal's clipboard "
            "(OSC 52, if your terminal allows it)."
        ]
        assert not pane.in_copy_mode
        # Live again, at the bottom, with what was printed meanwhile.
        await until(pilot, lambda: any("while copying" in row for row in shown(pane)), "live")
        assert shown(pane) != live

        # q leaves without copying anything.
        written.clear()
        await pilot.press(PREFIX, "left_square_bracket", "space", "k", "q")
        assert not pane.in_copy_mode and not any("\x1b]52" in w for w in written)
        # Keys reach the agent again.
        await pilot.press(*"echoed", "enter")
        await until(pilot, lambda: sum("echoed" in row for row in shown(pane)) == 2, "cat's echo")


def _told(app: HiveApp, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the app tells the person in notifications, as it tells it."""
    told: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_: told.append(message))
    return told


async def test_a_copy_tmux_refuses_says_why_and_goes_to_the_terminal(
    app: HiveApp, monkeypatch: pytest.MonkeyPatch, short_tmp: Path
) -> None:
    # $TMUX names a server that is not running: `tmux load-buffer` fails.
    monkeypatch.setenv("TMUX", f"{short_tmp}/no-tmux-here,1,0")
    told = _told(app, monkeypatch)
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.pane("michael")
        await _printed(pilot, pane)
        await pilot.press(PREFIX, "left_square_bracket", "g", "v", "j", "dollar_sign", "y")
        await until(pilot, lambda: told, "what the copy did")
        assert told[0].startswith("Could not copy 23 characters on 2 lines to tmux's paste buffer")
        assert "no-tmux-here" in told[0] and told[0].endswith(
            "Sent to the terminal's clipboard (OSC 52, if your terminal allows it)."
        )
        assert app.clipboard == "row 1 apple\nrow 2 apple"


async def test_copy_mode_on_an_exited_agent_and_in_the_grid(app: HiveApp) -> None:
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.pane("michael")
        await _printed(pilot, pane)
        pane.exited = True
        await pilot.press(PREFIX, "g")
        await pilot.press(PREFIX, "left_square_bracket", "g")
        assert pane.in_copy_mode and pane._copy is not None
        assert shown(pane)[0].startswith("row 1 apple")
        await pilot.press(PREFIX, "g")  # out of the grid: another size
        await pilot.press("v", "j", "dollar_sign", "y")
        assert app.clipboard == "row 1 apple\nrow 2 apple" and not pane.in_copy_mode


@pytest.fixture
def tmux_office(short_tmp: Path) -> Iterator[TmuxOffice]:
    root = short_tmp
    office = TmuxOffice(root, cols=120, rows=36)
    try:
        yield office
    finally:
        office.close()


def test_the_copy_reaches_tmuxs_buffer_as_tmux_comes(tmux_office: TmuxOffice) -> None:
    tmux = tmux_office.tmux
    # tmux as it comes: set-clipboard external, which drops a program's OSC 52.
    assert tmux("show", "-sv", "set-clipboard").strip() == "external"
    tmux.type("office", "echo hive-copy-$((6 * 7)) done")
    wait_for(
        lambda: any("hive-copy-42 done" in row_text(r) for r in tmux_office.office_screen()),
        "the echo",
    )
    tmux.keys("office", PREFIX_KEY, "[")
    wait_for(
        lambda: row_text(tmux_office.office_screen()[0]).rstrip().endswith("/0]"),
        "the position indicator",
    )
    tmux.keys("office", "?", "h", "i", "v", "e", "-", "c", "o", "p", "y", "-", "4", "Enter")
    tmux.keys("office", "Space", "$", "y")
    # show-buffer fails until there is a buffer: ask without check while waiting.
    buffer = [*tmux.base, "show-buffer"]
    wait_for(
        lambda: (
            subprocess.run(buffer, capture_output=True, text=True, env=tmux.env).stdout
            == "hive-copy-42 done"
        ),
        "the copy in tmux's buffer",
    )
    wait_for(
        lambda: not row_text(tmux_office.office_screen()[0]).rstrip().endswith("/0]"),
        "copy mode to end",
    )
    # And the app says so (a notification, which may wrap: its words, in order).
    said = "Copied 17 characters on 1 line to tmux's paste buffer (prefix ] pastes it)."
    wait_for(
        lambda: said.split() == _words_from(tmux.capture("office"), "Copied")[: len(said.split())],
        "the copy told",
    )


def _words_from(grid: list[list[Cell]], first: str) -> list[str]:
    """The words on screen inside the box that holds `first`, from `first` on, row by
    row (a notification's text, wrapped)."""
    rows = [row_text(r) for r in grid]
    for y, row in enumerate(rows):
        at = row.find(first)
        if at >= 0:
            words: list[str] = []
            for text in rows[y : y + 4]:
                inside = text[at:].split("▌")[0].split("│")[0]
                words += inside.split()
            return words
    return []
