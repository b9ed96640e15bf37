"""hive-office inside a real tmux, beside plain tmux panes: the driver that the tmux
parity harness (tests/e2e/test_tmux_parity.py) and the throughput and key-latency benches
share.

One tmux server per `TmuxOffice`, with two sessions: `office` runs `hive-office` on an
office of shell agents (bash, no rc files), and `ref` is a plain tmux pane running the
same bash, sized to the interior drawn for the focused agent's pane. Both shells get the
same environment, including the TERM the office gives its agents, so a program run in
both sees the same terminal and any difference is the office's.

Screens are read with `capture-pane -p -e` and parsed into cells (text, style); the
office pane's interior is cut out of the outer capture at the box drawn around it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from rich.cells import get_character_cell_size

from tests.support import wait_for

BIN = Path(sys.executable).parent
PREFIX_KEY = "C-]"
AGENTS = (("a0", "Alpha"), ("a1", "Beta"))
# What the office sets for every agent (hive_core/agents/provider.py); the reference
# pane gets the same, so both children see one terminal type.
CHILD_TERM = {"TERM": "xterm-256color", "COLORTERM": "truecolor"}
SHELL = ["bash", "--norc", "--noprofile", "-i"]
# Given to each shell directly: tmux starts its sessions through sh, which drops PS1.
PS1 = "$ "


# --- cells -------------------------------------------------------------------------------


class Style(NamedTuple):
    fg: str | None = None  # "p<index>" for the palette, "#rrggbb", None: the terminal's
    bg: str | None = None
    attrs: frozenset[str] = frozenset()


class Cell(NamedTuple):
    text: str  # "" for the right half of a wide character
    style: Style


PLAIN = Style()
BLANK = Cell(" ", PLAIN)
_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
_ATTR_ON = {
    1: "bold", 2: "dim", 3: "italic", 4: "underline", 5: "blink", 6: "blink", 7: "reverse",
    8: "hidden", 9: "strike", 21: "underline2", 53: "overline",
}  # fmt: skip
_ATTR_OFF = {
    22: ("bold", "dim"), 23: ("italic",), 24: ("underline", "underline2", "curly", "dotted",
    "dashed"), 25: ("blink",), 27: ("reverse",), 28: ("hidden",), 29: ("strike",),
    55: ("overline",),
}  # fmt: skip
_UNDERLINE_STYLES = {1: "underline", 2: "underline2", 3: "curly", 4: "dotted", 5: "dashed"}
# Attributes a space shows only through its colours: on a blank cell they are invisible.
_VISIBLE_ON_BLANK = {"reverse", "underline", "underline2", "curly", "dotted", "dashed",
                     "strike", "overline"}  # fmt: skip


def _colour(params: list[str], i: int) -> tuple[str | None, int]:
    """The extended colour at params[i:] (after 38/48/58) and how many params it used."""
    if i < len(params) and params[i] == "5" and i + 1 < len(params):
        return f"p{int(params[i + 1])}", 2
    if i < len(params) and params[i] == "2" and i + 3 < len(params):
        r, g, b = (int(v or 0) for v in params[i + 1 : i + 4])
        return f"#{r:02x}{g:02x}{b:02x}", 4
    return None, len(params) - i


def apply_sgr(style: Style, codes: str) -> Style:
    fg, bg, attrs = style.fg, style.bg, set(style.attrs)
    params = codes.split(";") if codes else ["0"]
    i = 0
    while i < len(params):
        raw = params[i]
        i += 1
        if ":" in raw:  # sub-parameters: 4:3 (curly underline), 38:2::r:g:b, ...
            head, *sub = raw.split(":")
            if head == "4":
                for name in _ATTR_OFF[24]:
                    attrs.discard(name)
                if sub and sub[0] and int(sub[0]) in _UNDERLINE_STYLES:
                    attrs.add(_UNDERLINE_STYLES[int(sub[0])])
            elif head in ("38", "48"):
                sub = [s for s in sub if s != ""] if sub[:1] == ["5"] else sub
                if sub[:1] == ["2"] and len(sub) == 5:  # 38:2:<colour space>:r:g:b
                    sub = ["2", *sub[2:]]
                value, _ = _colour(sub, 0)
                fg, bg = (value, bg) if head == "38" else (fg, value)
            continue
        n = int(raw or 0)
        if n == 0:
            fg, bg, attrs = None, None, set()
        elif n in _ATTR_ON:
            attrs.add(_ATTR_ON[n])
        elif n in _ATTR_OFF:
            attrs.difference_update(_ATTR_OFF[n])
        elif 30 <= n <= 37:
            fg = f"p{n - 30}"
        elif 90 <= n <= 97:
            fg = f"p{n - 90 + 8}"
        elif 40 <= n <= 47:
            bg = f"p{n - 40}"
        elif 100 <= n <= 107:
            bg = f"p{n - 100 + 8}"
        elif n == 39:
            fg = None
        elif n == 49:
            bg = None
        elif n in (38, 48, 58):
            value, used = _colour(params, i)
            i += used
            if n == 38:
                fg = value
            elif n == 48:
                bg = value
    return Style(fg, bg, frozenset(attrs))


def visible(cell: Cell) -> Cell:
    """The cell as a person sees it: a blank's foreground and text attributes drop out."""
    if cell.text.strip():
        return cell
    attrs = cell.style.attrs & _VISIBLE_ON_BLANK
    fg = cell.style.fg if attrs else None
    return Cell(" ", Style(fg, cell.style.bg, attrs))


def parse_line(line: str, style: Style = PLAIN) -> tuple[list[Cell], Style]:
    """One line of `capture-pane -p -e` as cells, wide characters as two (text, then ""),
    and the style in effect at its end."""
    cells: list[Cell] = []
    pos = 0
    for match in [*_SGR.finditer(line), None]:
        end = match.start() if match else len(line)
        for ch in line[pos:end]:
            if ch < " ":
                continue
            width = get_character_cell_size(ch)
            if width == 0 and cells:  # combining, ZWJ, a variation selector: same cell
                last = -2 if cells[-1].text == "" and len(cells) > 1 else -1
                cells[last] = Cell(cells[last].text + ch, cells[last].style)
            elif width:
                cells.append(Cell(ch, style))
                if width == 2:
                    cells.append(Cell("", style))
        if match:
            style = apply_sgr(style, match.group(1))
            pos = match.end()
    return cells, style


Grid = list[list[Cell]]


def parse_capture(text: str) -> Grid:
    # tmux writes only the changes from one cell to the next, across line ends too.
    grid, style = [], PLAIN
    for line in text.split("\n"):
        cells, style = parse_line(line, style)
        grid.append(cells)
    return grid


def crop(grid: Grid, top: int, left: int, rows: int, cols: int) -> Grid:
    out = []
    for y in range(top, top + rows):
        line = grid[y] if y < len(grid) else []
        row = line[left : left + cols]
        out.append([visible(c) for c in row] + [BLANK] * (cols - len(row)))
    return out


def row_text(row: list[Cell]) -> str:
    return "".join(c.text for c in row).rstrip()


def differences(got: Grid, want: Grid, limit: int = 6) -> list[str]:
    """Rows that differ, each with both texts and the first differing cell; [] if equal."""
    found = []
    for y in range(max(len(got), len(want))):
        a = got[y] if y < len(got) else []
        b = want[y] if y < len(want) else []
        if a == b:
            continue
        x = next((i for i, (p, q) in enumerate(zip(a, b, strict=False)) if p != q), None)
        where = (
            f"col {x}: office {a[x]!r} vs tmux {b[x]!r}"
            if x is not None
            else f"width {len(a)} vs {len(b)}"
        )
        found.append(f"row {y}: {where}\n    office: {row_text(a)!r}\n    tmux:   {row_text(b)!r}")
        if len(found) == limit:
            found.append("...")
            break
    return found


# --- the office in tmux ------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """The interior of a pane's box on the outer screen."""

    top: int
    left: int
    rows: int
    cols: int


def find_box(grid: Grid, title: str) -> Box | None:
    """The box whose top border carries `title` (e.g. "1 Alpha")."""
    for y, row in enumerate(grid):
        text = "".join(c.text or "\0" for c in row)
        at = text.find(f" {title} ")
        if at < 0:
            continue
        left = max(text.rfind(corner, 0, at) for corner in "╭┌┏╔")
        right = min((i for i in (text.find(corner, at) for corner in "╮┐┓╗") if i >= 0), default=-1)
        if left < 0 or right < 0:
            continue
        bottom = next(
            (b for b in range(y + 1, len(grid)) if left < len(grid[b])
             and grid[b][left].text in ("╰", "└", "┗", "╚")),
            None,
        )  # fmt: skip
        if bottom is not None:
            return Box(y + 1, left + 1, bottom - y - 1, right - left - 1)
    return None


class Tmux:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        conf = root / "tmux.conf"
        # What our users run: tmux's 256-colour terminal, not the 'screen' default.
        # remain-on-exit: an app that fails leaves its last screen (a traceback) to report.
        conf.write_text("set -g default-terminal tmux-256color\nset -g remain-on-exit on\n")
        self.base = ["tmux", "-S", str(root / "tmux.sock"), "-f", str(conf)]
        # pytest-xdist's workers export COLUMNS=80 LINES=24, and a program reads those
        # over its tty's size (Rich, curses): the app in a 160x48 window drew 80x24.
        self.env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            [*self.base, *args], capture_output=True, text=True, check=True, env=self.env
        ).stdout

    def capture(self, target: str) -> Grid:
        # -N keeps trailing spaces, so a row's width is the pane's.
        return parse_capture(self("capture-pane", "-p", "-e", "-N", "-t", target).rstrip("\n"))

    def cursor(self, target: str) -> tuple[int, int] | None:
        """The cursor's cell, None while the program in the pane hides it."""
        shown, x, y = self(
            "display", "-p", "-t", target, "#{cursor_flag} #{cursor_x} #{cursor_y}"
        ).split()
        return (int(x), int(y)) if shown == "1" else None

    def type(self, target: str, text: str, enter: bool = True) -> None:
        self("send-keys", "-t", target, "-l", text)
        if enter:
            self("send-keys", "-t", target, "Enter")

    def keys(self, target: str, *keys: str) -> None:
        self("send-keys", "-t", target, *keys)

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, env=self.env)


def tmux_env(root: Path) -> dict[str, str]:
    """The environment of the tmux server, so of both shells: nothing of the caller's
    but PATH, and a HOME of its own (bash, vim and less write nothing into a person's)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "XDG_CACHE_HOME": cache,  # the app's cached cffi module (terminal/ghostty_abi.py)
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HISTFILE": "",
        "LESSHISTFILE": "-",
        "COLORTERM": "truecolor",
    }


def write_office(root: Path) -> Path:
    home = root / "office"
    home.mkdir()
    roster = f'[office]\nmanager = "{AGENTS[0][0]}"\n' + "".join(
        f'\n[[agents]]\nid = "{a}"\nname = "{name}"\nprovider = "shell"\ncwd = "{root}"\n'
        f'command = {list(SHELL)!r}\nenv = {{ PS1 = "{PS1}" }}\n'.replace("'", '"')
        for a, name in AGENTS
    )
    (home / "office.toml").write_text(roster)
    subprocess.run(
        [str(BIN / "hive-office"), "init", "--home", str(home)], check=True, capture_output=True
    )
    return home


class TmuxOffice:
    """hive-office in tmux session `office` (cols x rows), a plain pane in session `ref`."""

    def __init__(self, root: Path, cols: int = 160, rows: int = 48) -> None:
        self.root = root
        self.env = tmux_env(root)
        self.tmux = Tmux(root, self.env)
        self.home = write_office(root)
        self.layout = "default"
        app = [str(BIN / "hive-office"), "--home", str(self.home)]
        self.tmux(
            "new-session", "-d", "-s", "office", "-x", str(cols), "-y", str(rows),
            "-c", str(root), shlex.join(app),
        )  # fmt: skip
        found = wait_for(
            lambda: "exited" if self.app_exited() else self.find_box(),
            "the focused agent's pane on screen",
            60,
        )
        if not isinstance(found, Box):
            text = self.tmux("capture-pane", "-p", "-t", "office")
            raise AssertionError(f"hive-office exited at start; its screen:\n{text}")
        self.box = found
        self.wait_prompt("office")
        # The shell the office's agents run, with the terminal type the office gives them.
        terminal = [f"{k}={v}" for k, v in CHILD_TERM.items()]
        ref = ["env", "-u", "TMUX", "-u", "TMUX_PANE", *terminal, f"PS1={PS1}", *SHELL]
        self.tmux(
            "new-session", "-d", "-s", "ref", "-x", str(self.box.cols), "-y", str(self.box.rows),
            "-c", str(root), shlex.join(ref),
        )  # fmt: skip
        self.wait_prompt("ref")

    def find_box(self) -> Box | None:
        return find_box(self.tmux.capture("office"), f"1 {AGENTS[0][1]}")

    def app_exited(self) -> bool:
        return self.tmux("display", "-p", "-t", "office", "#{pane_dead}").strip() == "1"

    def office_screen(self) -> Grid:
        box = self.box
        return crop(self.tmux.capture("office"), box.top, box.left, box.rows, box.cols)

    def ref_screen(self) -> Grid:
        return crop(self.tmux.capture("ref"), 0, 0, self.box.rows, self.box.cols)

    def cursor(self, target: str) -> tuple[int, int] | None:
        """The cursor's cell (None: hidden), relative to the office pane's interior."""
        at = self.tmux.cursor(target)
        if at is None or target != "office":
            return at
        return at[0] - self.box.left, at[1] - self.box.top

    def wait_prompt(self, target: str) -> None:
        screen = self.office_screen if target == "office" else self.ref_screen
        wait_for(
            lambda: any(row_text(r).startswith("$") for r in screen()), f"a prompt in {target}", 30
        )

    def set_layout(self, layout: str) -> None:
        """default, zoom or grid: the prefix and z/g toggle them, as a person would."""
        if layout == self.layout:
            return
        if self.layout != "default":
            self.tmux.keys("office", PREFIX_KEY, self.layout[0])
        if layout != "default":
            self.tmux.keys("office", PREFIX_KEY, layout[0])
        self.layout = layout
        self.settle()

    def resize(self, cols: int, rows: int) -> None:
        self.tmux("resize-window", "-t", "office", "-x", str(cols), "-y", str(rows))
        self.settle()

    def settle(self) -> None:
        """Wait for the office's box to stay put, then size the reference pane to it."""
        last: list[Box | None] = [None]

        def still() -> Box | None:
            time.sleep(0.15)
            box = self.find_box()
            same = box if box is not None and box == last[0] else None
            last[0] = box
            return same

        self.box = wait_for(still, "the office's layout to settle", 20)
        self.tmux("resize-window", "-t", "ref", "-x", str(self.box.cols), "-y", str(self.box.rows))

    def both(self, text: str, enter: bool = True) -> None:
        """Type the same line into the office's focused pane and the reference pane."""
        for target in ("office", "ref"):
            self.tmux.type(target, text, enter)

    def keys_both(self, *keys: str) -> None:
        for target in ("office", "ref"):
            self.tmux.keys(target, *keys)

    def close(self) -> None:
        """Stop the office (its agents stop with it; the app, its client, leaves when it
        goes), then end tmux. The office outlives the app, so ending tmux alone would
        leave it running (issue 11)."""
        subprocess.run(
            [str(BIN / "hive-office"), "stop", "--home", str(self.home)], capture_output=True
        )
        with contextlib.suppress(AssertionError):
            wait_for(self.app_exited, "the app to quit", 20)
        self.tmux.kill()
