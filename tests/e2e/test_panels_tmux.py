"""Panels read in a real tmux (issue 23), as a person sees them with capture-pane: at
160x48 a Log row is whole on screen (wrapped inside the side panel, which is wider on a
wide terminal), and `ctrl+] z` on the panel gives it the whole screen; the Changes view
keeps its four borders at 160x48 and at 80x24."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_tui.app import side_width
from tests.support import wait_for
from tests.tmux_support import PREFIX_KEY, TmuxOffice, row_text

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("tmux") is None, reason="tmux not installed (scripts/setup installs it)"
    ),
]
# The office logs this for an agent outside a git repository (tests' agents are): long
# enough to need two lines of the side panel.
NOT_A_REPO = "is not in a git repository"


@pytest.fixture
def tmux_office(short_tmp: Path) -> Iterator[TmuxOffice]:
    office = TmuxOffice(short_tmp, cols=160, rows=48)
    try:
        yield office
    finally:
        office.close()


def screen_rows(office: TmuxOffice) -> list[str]:
    return [row_text(row) for row in office.tmux.capture("office")]


def words(text: str) -> str:
    return " ".join(text.split())


def logged_detail(office: TmuxOffice) -> str:
    """The event's detail as log.jsonl holds it: what the row must show, whole."""
    log = office.home / "hive" / "log.jsonl"
    for line in log.read_text().splitlines():
        detail = json.loads(line).get("detail", "")
        if NOT_A_REPO in detail:
            return str(detail)
    raise AssertionError(f"no {NOT_A_REPO!r} event in {log}")


def test_a_log_row_is_whole_at_160x48_and_the_panel_zooms(tmux_office: TmuxOffice) -> None:
    office = tmux_office
    detail = logged_detail(office)
    office.tmux.keys("office", PREFIX_KEY, "l")
    left = 160 - side_width(160) + 1  # past the side panel's left border

    def side_text() -> str:
        return words(" ".join(row[left:] for row in screen_rows(office)))

    shown = wait_for(lambda: words(detail) in side_text() and side_text(), "the whole row")
    assert shown.count(NOT_A_REPO) >= 1
    # It took more than one line, each inside the panel, the lines after the first
    # hanging under the kind.
    rows = screen_rows(office)
    first = next(y for y, row in enumerate(rows) if f"- {detail[:12]}" in row[left:])
    assert rows[first + 1][left:].startswith(" " * 10), rows[first : first + 3]
    # Zoomed: the panel has the screen, the map and the pane are gone, the row is there.
    office.tmux.keys("office", PREFIX_KEY, "z")
    zoomed = wait_for(
        lambda: (rows := screen_rows(office)) and "Manager" not in "".join(rows) and rows,
        "the panel over the whole screen",
    )
    assert words(detail) in words(" ".join(zoomed))
    assert zoomed[0].lstrip().startswith("Board  Tasks  Log")
    office.tmux.keys("office", PREFIX_KEY, "z")
    wait_for(lambda: "Manager" in "".join(screen_rows(office)), "the floor back")
    office.tmux.keys("office", "Escape")
    office.settle()  # the pane back, at its size


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
def test_the_changes_view_keeps_its_borders(tmux_office: TmuxOffice, size: tuple[int, int]) -> None:
    office = tmux_office
    cols, rows = size
    if (cols, rows) != (160, 48):
        office.resize(cols, rows)
    office.tmux.keys("office", PREFIX_KEY, "v")
    screen = wait_for(
        lambda: (s := screen_rows(office)) and any("esc close" in r for r in s) and s,
        "the Changes view",
    )
    top = next(y for y, row in enumerate(screen) if row.startswith("╭"))
    bottom = rows - 1
    assert screen[bottom].startswith("╰") and screen[bottom].endswith("╯"), screen[-3:]
    assert screen[top].endswith("╮"), screen[top]
    for row in screen[top + 1 : bottom]:
        assert row.startswith("│") and len(row) == cols and row.endswith("│"), row
    office.tmux.keys("office", "Escape")
