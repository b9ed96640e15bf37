"""The differential harness: a program run in a hive-office pane shows what it shows in a
plain tmux pane of the same size, cell by cell (text, colours, attributes) and cursor.

hive-office runs inside tmux on an office of two bash agents; the same command is typed
into its focused pane and into a plain tmux pane sized to that pane's drawn interior
(tests/tmux_support.py). The expectation is whatever tmux shows at that moment: nothing
is recorded. Every case runs in each layout (default, zoom, grid) and some again after
the terminal is resized. Mouse clicks have no tmux reference (tmux makes no reports
without a client): the child must receive the clicked cell, as xterm's protocol says.
"""

from __future__ import annotations

import functools
import itertools
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import short_dir, wait_for
from tests.tmux_support import (
    PLAIN,
    Cell,
    Grid,
    Style,
    TmuxOffice,
    differences,
    row_text,
)

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux not installed (scripts/setup installs it)"
)

VIM = shutil.which("vim") or shutil.which("vi")
MOUSE_ECHO = Path(__file__).parents[1] / "fixtures" / "mouse_echo.py"
# How long a screen may take to match before the differences are reported: tmux and the
# office both show the output within milliseconds; this only absorbs a loaded machine.
MATCH_S = 8.0


@pytest.fixture(scope="module")
def office() -> Iterator[TmuxOffice]:
    # Short path: tmux's socket lives in it.
    with short_dir() as root:
        (root / "lines.txt").write_text("".join(f"line {n} of the file\n" for n in range(1, 301)))
        office = TmuxOffice(root)
        try:
            yield office
        finally:
            office.close()


@pytest.fixture(scope="module", params=["default", "zoom", "grid"])
def layout(request: pytest.FixtureRequest, office: TmuxOffice) -> TmuxOffice:
    office.set_layout(request.param)
    return office


def same_screen(
    office: TmuxOffice,
    *,
    cells: Callable[[Grid], Grid] = lambda grid: grid,
    rows: Callable[[Grid], list[Any]] | None = None,
) -> None:
    """Wait until the office pane shows what the tmux pane shows, cursor included.
    `cells` maps both screens before they are compared cell by cell; `rows` instead
    compares a summary of each row (for screens whose figures change between looks)."""
    last: list[str] = []

    def matched() -> bool:
        got, want = office.office_screen(), office.ref_screen()
        if rows is None:
            found = differences(cells(got), cells(want))
        else:
            found = [
                f"row {y}: office {a!r}\n    tmux:   {b!r}"
                for y, (a, b) in enumerate(zip(rows(got), rows(want), strict=True))
                if a != b
            ]
        cursor_got, cursor_want = office.cursor("office"), office.cursor("ref")
        if not found and cursor_got != cursor_want:
            found = [f"cursor at {cursor_got} in the office, {cursor_want} in tmux"]
        last[:] = found
        return not found

    try:
        wait_for(matched, "the same screen", MATCH_S)
    except AssertionError:
        box = office.box
        pytest.fail(
            f"{office.layout} layout, pane {box.cols}x{box.rows}: the office pane differs "
            "from tmux:\n" + "\n".join(last),
            pytrace=False,
        )


def run(office: TmuxOffice, command: str) -> None:
    office.both(f"clear; {command}")
    same_screen(office)


def showing(office: TmuxOffice, text: str) -> None:
    """Wait until both panes show `text`. A program that sets up its terminal with
    TCSAFLUSH (less, top) drops keys typed before it is ready, and a screen compared
    before it starts can match the cleared prompt in both panes: each would let a
    case's next keys reach one pane's program and not the other's."""

    def shown(screen: Grid) -> bool:
        return any(text in row_text(row) for row in screen)

    try:
        wait_for(
            lambda: shown(office.ref_screen()) and shown(office.office_screen()),
            f"{text!r} in both panes",
            MATCH_S,
        )
    except AssertionError:
        screens = {"office": office.office_screen(), "tmux": office.ref_screen()}
        pytest.fail(
            f"{office.layout} layout: {text!r} not in both panes:\n"
            + "\n".join(
                f"--- {name}\n" + "\n".join(row_text(row).rstrip() for row in grid)
                for name, grid in screens.items()
            ),
            pytrace=False,
        )


_MARKS = itertools.count()


def back_at_prompt(office: TmuxOffice) -> None:
    """Wait until the shell reads again in both panes. A program that is quitting may
    drop keys typed meanwhile (vim and less flush their input as they restore the
    terminal), and a screen compared then can match the program's last screen in both
    panes. So: echo a mark, and type it again (after ctrl+u) until the shell runs it."""
    mark = f"back-{next(_MARKS)}"
    for target, screen in (("office", office.office_screen), ("ref", office.ref_screen)):

        def ran(screen: Callable[[], Grid] = screen) -> bool:
            return any(row_text(row).rstrip() == mark for row in screen())

        for _ in range(5):
            office.tmux.keys(target, "C-u")
            office.tmux.type(target, f"echo {mark}")
            try:
                wait_for(ran, f"{mark} in the {target} pane", 2)
                break
            except AssertionError:
                continue
        else:
            pytest.fail(f"the shell in the {target} pane never ran `echo {mark}`")


@contextmanager
def full_screen(office: TmuxOffice, command: str, ready: str, *quit_keys: str) -> Iterator[None]:
    """Run a full-screen program in both panes, wait until both show `ready`; if the
    case fails, quit it in both, so the next case starts at a prompt."""
    office.both(f"clear; {command}")
    try:
        showing(office, ready)
        same_screen(office)
        yield
    except BaseException:
        office.keys_both(*quit_keys)
        raise


# --- the cases: each types the same thing into both panes ------------------------------


def filled_screen(office: TmuxOffice) -> None:
    """More lines than rows: the prompt must be on the last row."""
    run(office, "seq 1 100")
    assert row_text(office.office_screen()[-1]) == "$"


def exact_width(office: TmuxOffice) -> None:
    width = office.box.cols
    run(office, f"printf '%{width}s\\n' '' | tr ' ' =; printf '%{width + 3}s\\n' '' | tr ' ' -")


def scroll_region(office: TmuxOffice) -> None:
    run(
        office,
        "seq 1 12; printf '\\e[3;8r\\e[8;1H'; for i in $(seq 1 9); do echo region $i; done; "
        "printf '\\e[r'; echo top",
    )


def alternate_screen(office: TmuxOffice) -> None:
    run(
        office,
        "echo before; printf '\\e[?1049h\\e[2J\\e[3;5Hin the alternate screen'; read x; "
        "printf '\\e[?1049l'; echo after",
    )
    # Back on the main screen: "before", the command line and "after", as they were.
    office.keys_both("Enter")
    same_screen(office)


def cjk(office: TmuxOffice) -> None:
    width = office.box.cols
    # The second line puts a wide character on the last column, which must wrap whole.
    run(
        office,
        f"echo '日本語のテキスト 中文 한국어 ｶﾀｶﾅ'; printf '%{width - 1}s漢字\\n' '' | tr ' ' x",
    )


def emoji(office: TmuxOffice) -> None:
    run(office, "printf 'a\\u2764b \\u2764\\ufe0fc \\U0001f44dd \\U0001f600e|\\n'")


def colours_256(office: TmuxOffice) -> None:
    run(
        office,
        "for i in $(seq 0 255); do printf '\\e[48;5;%dm%4d' $i $i; done; printf '\\e[0m\\n'; "
        "for i in $(seq 0 255); do printf '\\e[38;5;%dm#' $i; done; printf '\\e[0m\\n'",
    )


def truecolour(office: TmuxOffice) -> None:
    run(
        office,
        "for i in $(seq 0 5 255); do printf '\\e[38;2;%d;%d;99m\\e[48;2;%d;0;%dm#' "
        "$i $((255-i)) $((255-i)) $i; done; printf '\\e[0m\\n'",
    )


# Rich, which draws the office's screen, has a single and a double underline but no
# curly, dotted or dashed one: the office shows those as a single underline.
_RICH_UNDERLINE = {"curly": "underline", "dotted": "underline", "dashed": "underline"}


def _as_rich_shows(grid: Grid) -> Grid:
    return [
        [
            Cell(
                c.text,
                c.style._replace(attrs=frozenset(_RICH_UNDERLINE.get(a, a) for a in c.style.attrs)),
            )
            for c in row
        ]
        for row in grid
    ]


def sgr_attributes(office: TmuxOffice) -> None:
    office.both(
        "clear; for a in 1 2 3 4 4:2 4:3 4:4 4:5 5 7 8 9 21 53 '1;3;4;9' '2;7'; do "
        "printf '\\e[%sm[%s]\\e[0m ' $a $a; done; echo; "
        "for c in $(seq 30 37) $(seq 90 97) $(seq 40 47) $(seq 100 107); "
        "do printf '\\e[%sm%s\\e[0m ' $c $c; done; echo"
    )
    same_screen(office, cells=_as_rich_shows)


def vim_split(office: TmuxOffice) -> None:
    if VIM is None:
        pytest.skip("neither vim nor vi is installed")
    vim = f"{VIM} -u NONE -i NONE -n -N -c 'set laststatus=2' -c split lines.txt"
    with full_screen(office, vim, "line 3 of the file", "Escape", ":qa!", "Enter"):
        office.both(":3")
        same_screen(office)
    office.both(":qa!")
    back_at_prompt(office)
    same_screen(office)


def less_prompt(office: TmuxOffice) -> None:
    with full_screen(office, "less lines.txt", "line 3 of the file", "q"):
        office.keys_both("Space")
        same_screen(office)
    office.keys_both("q")
    back_at_prompt(office)
    same_screen(office)


def _masked(grid: Grid) -> list[tuple[list[str], set[Style]]]:
    """top's figures change between any two looks, and with their widths where a row is
    cut: each row's words but the last (maybe cut), and the styles on it, are kept."""
    rows = []
    for row in grid:
        words = re.findall(r"[A-Za-z%()]+", row_text(row))
        rows.append((words[:-1], {c.style for c in row if c.text.strip() or c.style != PLAIN}))
    return rows


def top(office: TmuxOffice) -> None:
    office.both("clear; top -d 100 -p $$")
    try:
        showing(office, "PID")
        same_screen(office, rows=_masked)
    finally:
        office.keys_both("q")
    back_at_prompt(office)
    # top leaves its last screen as it was, the cursor on the last row.
    same_screen(office, rows=_masked)


CASES: dict[str, Callable[[TmuxOffice], None]] = {
    f.__name__: f
    for f in (
        filled_screen, exact_width, scroll_region, alternate_screen, cjk, emoji, colours_256,
        truecolour, sgr_attributes, vim_split, less_prompt, top,
    )
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_same_as_tmux(layout: TmuxOffice, case: str) -> None:
    CASES[case](layout)


@pytest.mark.parametrize("size", [(80, 24), (250, 70)], ids=["80x24", "250x70"])
def test_same_as_tmux_after_resize(layout: TmuxOffice, size: tuple[int, int]) -> None:
    try:
        layout.resize(*size)
        filled_screen(layout)
        vim_split(layout)
    finally:
        layout.resize(160, 48)


@pytest.mark.parametrize("protocol", ["sgr", "x10"])
def test_click_reaches_the_clicked_cell(layout: TmuxOffice, protocol: str) -> None:
    office = layout
    run_id = f"{layout.layout}-{protocol}"
    office.tmux.type("office", f"clear; {sys.executable} {MOUSE_ECHO} {protocol} {run_id}")
    try:
        # Once its line is up, it has asked for mouse reports.
        wait_for(functools.partial(shown, office, f"clicks ({protocol} {run_id}):"), "mouse_echo")
        click_cells(office)
    finally:
        office.tmux.type("office", "q", enter=False)


def shown(office: TmuxOffice, line: str) -> bool:
    return any(row_text(r) == line for r in office.office_screen())


def click_cells(office: TmuxOffice) -> None:
    box = office.box
    cells = [(0, 0), (box.cols - 1, box.rows - 1), (box.cols // 2, box.rows // 2)]
    for col, row in cells:
        # The outer terminal's report of a left click on that cell (1-based, SGR: the app
        # asks its terminal for SGR reports).
        x, y = box.left + col + 1, box.top + row + 1
        for end in "Mm":
            office.tmux(
                "send-keys",
                "-t",
                "office",
                "-H",
                *(f"{b:02x}" for b in f"\x1b[<0;{x};{y}{end}".encode()),
            )
        report = f"release {col + 1} {row + 1}"
        wait_for(
            functools.partial(shown, office, report),
            f"the click on cell ({col}, {row}) reported as {col + 1};{row + 1}",
            MATCH_S,
        )
