"""Copy mode, as tmux's (vi keys): a cursor over a pane's lines (scrollback, then the
screen), search, a selection, and the selected text to copy.

    lines = FrozenLines(history_size, read_history, screen)   # (Line, wraps) rows
    state = enter(lines, height=24, cursor=Point(len(lines) - 1, 0))
    step = press(state, "slash", "/", lines)        # keys as Textual names them
    step.state                                      # None: copy mode is over
    step.copied                                     # the selection's text, to the clipboard

Pure: nothing here knows Textual or the emulator. A line is a tuple of cells, as the
emulator lays them out ("" is the right half of a wide character, a grapheme cluster is
one cell), so columns are the screen's whatever a string's width would be measured as.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

import msgspec

if TYPE_CHECKING:
    from hive_core.terminal.emulator import Run

Line = tuple[str, ...]
"""One entry per cell: its text, or "" for the right half of a wide character."""
Row = tuple[Line, bool]
"""A line and whether it wraps into the next."""


class Lines(Protocol):
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Line: ...
    def wraps(self, index: int) -> bool:
        """Line `index` goes on in the next one: the child wrote past its end (a soft
        wrap), it did not start a new line."""
        ...

    def quick_text(self, index: int) -> str | None:
        """Line `index` as plain text (trailing blanks dropped) if that is cheaper to
        have than its cells; None: read the cells."""
        ...


class Point(NamedTuple):
    line: int
    """0 is the oldest line of the scrollback."""
    col: int
    """In cells."""


class CopyState(msgspec.Struct, frozen=True):
    cursor: Point
    top: int
    """The first line in view."""
    height: int
    """Lines in view."""
    anchor: Point | None = None
    """Where the selection started (space or v); the cursor is its other end."""
    search: str = ""
    """The last pattern searched for, which n and N repeat."""
    forward: bool = True
    """Its direction: / forward (down), ? backward (up)."""
    prompt: str | None = None
    """A pattern being typed after / or ?."""
    prompt_forward: bool = True
    message: str = ""
    """What the last key found out (a search that found nothing, or wrapped)."""


class Step(NamedTuple):
    state: CopyState | None
    """None: copy mode is over."""
    copied: str | None = None


def line_of(runs: Sequence[Run]) -> Line:
    """A row of the emulator (its runs) as cells."""
    cells: list[str] = []
    for run in runs:
        if run.cluster:
            cells.append(run.text)
            cells.extend([""] * (run.cells - 1))
            continue
        width = run.cells // len(run.text) if run.text else 1
        for char in run.text:
            cells.append(char)
            cells.extend([""] * (width - 1))
    return tuple(cells)


def cells_of(text: str, width: int) -> Line:
    """`text` laid out as a terminal would (East Asian wide characters take two cells),
    padded to `width` cells. For plain text only; the pane reads the emulator's cells."""
    cells: list[str] = []
    for char in text:
        cells.append(char)
        if unicodedata.east_asian_width(char) in "WF":
            cells.append("")
    return tuple(cells) + (" ",) * (width - len(cells))


class FrozenLines:
    """A pane's lines as they were when copy mode began: the scrollback, read when first
    needed (reading a row of it costs a fraction of a millisecond, and most are never
    looked at) and kept, then the screen as it was. Output that arrives meanwhile is
    parsed by the emulator but not seen here: the scrollback grows at its end, so a row
    read later is the same row (until the scrollback is full and drops its oldest)."""

    def __init__(
        self,
        history: int,
        read: Callable[[int], Row],
        screen: Sequence[Row],
        history_text: Sequence[str] = (),
    ) -> None:
        self.history = history
        self._read = read
        self._screen = tuple(screen)
        self._cache: dict[int, Row] = {}
        # The scrollback as plain text, if the emulator gave it: a search reads the cells
        # of only the rows that hold the pattern (a scrollback of 10,000 rows is read
        # cell by cell in seconds, as text in milliseconds).
        self._text = history_text if len(history_text) == history else ()

    def __len__(self) -> int:
        return self.history + len(self._screen)

    def _row(self, index: int) -> Row:
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index >= self.history:
            return self._screen[index - self.history]
        row = self._cache.get(index)
        if row is None:
            row = self._cache[index] = self._read(index)
        return row

    def __getitem__(self, index: int) -> Line:
        return self._row(index)[0]

    def wraps(self, index: int) -> bool:
        return self._row(index)[1]

    def quick_text(self, index: int) -> str | None:
        if index < len(self._text) and index not in self._cache:
            return self._text[index]
        return None


# --- positions -----------------------------------------------------------------------


def snap(line: Line, col: int) -> int:
    """`col` inside `line`, on the first cell of the character there."""
    col = max(0, min(col, len(line) - 1))
    while col > 0 and line[col] == "":
        col -= 1
    return col


def _char_end(line: Line, col: int) -> int:
    """The last cell of the character starting at `col` (a wide one has two)."""
    end = col
    while end + 1 < len(line) and line[end + 1] == "":
        end += 1
    return end


def _last_char(line: Line) -> int:
    """vi's `$`: the last cell that is not blank (0 on a blank line)."""
    for col in range(len(line) - 1, -1, -1):
        if line[col] not in ("", " "):
            return col
    return 0


def _class(cell: str) -> int:
    """vi's word classes: 0 blank, 1 word characters, 2 other punctuation."""
    if cell in ("", " ") or cell.isspace():
        return 0
    return 1 if cell[0].isalnum() or cell[0] == "_" or len(cell) > 1 else 2


def _next_word(lines: Lines, at: Point) -> Point:
    """vi's `w`: the start of the next word, across lines (a line's end is a blank)."""
    line_no, col = at.line, at.col
    line = lines[line_no]
    start = _class(line[col]) if line else 0
    col = _char_end(line, col) + 1
    while True:
        while col < len(line):
            cls = _class(line[col])
            if line[col] != "" and cls != 0 and cls != start:
                return Point(line_no, col)
            if cls == 0 and line[col] != "":
                start = 0
            col += 1
        if line_no + 1 >= len(lines):
            return Point(line_no, snap(line, len(line) - 1))
        line_no, col, start = line_no + 1, 0, 0
        line = lines[line_no]


def _prev_word(lines: Lines, at: Point) -> Point:
    """vi's `b`: the start of this word or the one before, across lines."""
    line_no, col = at.line, at.col
    line = lines[line_no]
    # Walk back over blanks, then over the word the first non-blank belongs to.
    col -= 1
    while True:
        while col >= 0 and _class(line[col]) == 0:
            col -= 1
        if col >= 0:
            break
        if line_no == 0:
            return Point(0, 0)
        line_no -= 1
        line = lines[line_no]
        col = len(line) - 1
    col = snap(line, col)
    cls = _class(line[col])
    while col > 0 and _class(line[snap(line, col - 1)]) == cls:
        col = snap(line, col - 1)
    return Point(line_no, col)


# --- search --------------------------------------------------------------------------


def _text(line: Line) -> tuple[str, list[int]]:
    """The line's text and, for each of its characters, the cell it is in."""
    chars: list[str] = []
    cols: list[int] = []
    for col, cell in enumerate(line):
        chars.append(cell)
        cols.extend([col] * len(cell))
    return "".join(chars), cols


def _matches(line: Line, needle: str, fold: bool) -> list[int]:
    """The cells where `needle` starts in `line`, left to right (overlapping ones too)."""
    text, cols = _text(line)
    if fold:
        lowered = text.lower()
        # Lowering can change a string's length (rarely); then it is searched as it is.
        text = lowered if len(lowered) == len(text) else text
    found: list[int] = []
    index = text.find(needle)
    while index >= 0:
        found.append(cols[index])
        index = text.find(needle, index + 1)
    return found


def find(lines: Lines, pattern: str, at: Point, forward: bool) -> tuple[Point, bool] | None:
    """The next match of `pattern` after `at` (before it, backward), wrapping around the
    ends as tmux does, with whether it wrapped. Case matters only if the pattern has a
    capital letter (tmux's rule). None: nowhere."""
    if not pattern:
        return None
    fold = pattern == pattern.lower()
    needle = pattern.lower() if fold else pattern
    count = len(lines)
    step = 1 if forward else -1
    # The cursor's line is looked at twice: first after the cursor, and last (after going
    # round every other line) before it, the cursor's own cell included.
    # What must be in a line's text for a match (its trailing blanks may be trimmed).
    core = needle.rstrip(" ")
    for n in range(count + 1):
        line_no = (at.line + step * n) % count
        quick = lines.quick_text(line_no) if core else None
        if quick is not None and core not in (quick.lower() if fold else quick):
            continue
        cols = _matches(lines[line_no], needle, fold)
        if n == 0:
            cols = [c for c in cols if (c > at.col if forward else c < at.col)]
        elif n == count:
            cols = [c for c in cols if (c <= at.col if forward else c >= at.col)]
        if cols:
            wrapped = not 0 <= at.line + step * n < count
            return Point(line_no, cols[0] if forward else cols[-1]), wrapped
    return None


# --- the selection -------------------------------------------------------------------


def selection(state: CopyState, lines: Lines) -> tuple[Point, Point] | None:
    """The selected cells, first to last (both included, a wide character whole)."""
    if state.anchor is None:
        return None
    a, b = sorted((state.anchor, state.cursor))
    start = Point(a.line, snap(lines[a.line], a.col))
    end_line = lines[b.line]
    return start, Point(b.line, _char_end(end_line, snap(end_line, b.col)))


def selected_text(state: CopyState, lines: Lines) -> str:
    """What tmux copies: the selected cells, each line's trailing blanks dropped, lines
    joined with newlines, except where the child's output only wrapped."""
    span = selection(state, lines)
    if span is None:
        return ""
    start, end = span
    out: list[str] = []
    for line_no in range(start.line, end.line + 1):
        line = lines[line_no]
        first = start.col if line_no == start.line else 0
        last = end.col if line_no == end.line else len(line) - 1
        text = "".join(line[first : last + 1])
        if line_no < end.line and lines.wraps(line_no):
            out.append(text)
        else:
            out.append(text.rstrip(" ") + "\n")
    return "".join(out).removesuffix("\n")


# --- keys ----------------------------------------------------------------------------


def enter(lines: Lines, height: int, cursor: Point, top: int | None = None) -> CopyState:
    """Copy mode over `lines`, `height` of them in view (the bottom ones unless `top`)."""
    bottom = max(0, len(lines) - height)
    state = CopyState(cursor=cursor, top=bottom if top is None else top, height=height)
    return _move(state, lines, cursor)


def position(state: CopyState, lines: Lines) -> str:
    """tmux's indicator: how many lines the view is above the bottom, of how many."""
    bottom = max(0, len(lines) - state.height)
    return f"[{bottom - state.top}/{bottom}]"


def resized(state: CopyState, old: Lines, new: Lines, height: int) -> CopyState:
    """The same state over the lines after a resize (reflowed): the cursor and the
    selection keep their distance from the last line, the view its distance from the
    bottom; columns are kept inside the new lines."""

    def keep(point: Point) -> Point:
        line_no = max(0, min(len(new) - 1, len(new) - (len(old) - point.line)))
        return Point(line_no, snap(new[line_no], point.col))

    old_bottom = max(0, len(old) - state.height)
    bottom = max(0, len(new) - height)
    top = max(0, bottom - (old_bottom - state.top))
    anchor = keep(state.anchor) if state.anchor is not None else None
    moved = msgspec.structs.replace(state, height=height, top=top, anchor=anchor)
    return _move(moved, new, keep(state.cursor))


def _move(state: CopyState, lines: Lines, to: Point, *, top: int | None = None) -> CopyState:
    """The cursor at `to` (kept inside the lines) with the view scrolled just enough to
    show it."""
    line_no = max(0, min(len(lines) - 1, to.line))
    cursor = Point(line_no, max(0, min(to.col, len(lines[line_no]) - 1)))
    view = state.top if top is None else top
    view = min(max(view, line_no - state.height + 1), line_no)
    view = max(0, min(view, max(0, len(lines) - state.height)))
    return msgspec.structs.replace(state, cursor=cursor, top=view, message="")


def scroll(state: CopyState, lines: Lines, up: int) -> CopyState:
    """The view `up` lines up (down if negative), as the wheel does in tmux's copy mode:
    the cursor stays on its line while that line is in view."""
    top = max(0, min(state.top - up, max(0, len(lines) - state.height)))
    line = min(max(state.cursor.line, top), top + state.height - 1)
    return _move(state, lines, Point(line, state.cursor.col), top=top)


_PAGE_KEYS = {
    "pageup": -1,
    "shift+pageup": -1,
    "ctrl+b": -1,
    "pagedown": 1,
    "shift+pagedown": 1,
    "ctrl+f": 1,
}
_HALF_PAGE_KEYS = {"ctrl+u": -1, "ctrl+d": 1}


def press(state: CopyState, key: str, character: str | None, lines: Lines) -> Step:
    """One key in copy mode. `key` and `character` as Textual gives them."""
    if state.prompt is not None:
        return Step(_prompt_key(state, key, character, lines))
    name = character if character and character.isprintable() else key
    cursor = state.cursor
    here = lines[cursor.line]
    col = snap(here, cursor.col)
    match name:
        case "q" | "escape":
            return Step(None)
        case "enter" | "y":
            if state.anchor is None:
                return Step(
                    msgspec.structs.replace(state, message="no selection: space starts one")
                )
            return Step(None, selected_text(state, lines))
        case " " | "v":
            return Step(msgspec.structs.replace(state, anchor=Point(cursor.line, col), message=""))
        case "up" | "k":
            return Step(_move(state, lines, Point(cursor.line - 1, cursor.col)))
        case "down" | "j":
            return Step(_move(state, lines, Point(cursor.line + 1, cursor.col)))
        case "left" | "h":
            return Step(_move(state, lines, Point(cursor.line, snap(here, col - 1))))
        case "right" | "l":
            return Step(
                _move(state, lines, Point(cursor.line, snap(here, _char_end(here, col) + 1)))
            )
        case "0" | "home":
            return Step(_move(state, lines, Point(cursor.line, 0)))
        case "$" | "end":
            return Step(_move(state, lines, Point(cursor.line, _last_char(here))))
        case "^":
            first = next((c for c, cell in enumerate(here) if _class(cell)), 0)
            return Step(_move(state, lines, Point(cursor.line, first)))
        case "g":
            return Step(_move(state, lines, Point(0, 0)))
        case "G":
            last = len(lines) - 1
            return Step(_move(state, lines, Point(last, 0)))
        case "w":
            return Step(_move(state, lines, _next_word(lines, Point(cursor.line, col))))
        case "b":
            return Step(_move(state, lines, _prev_word(lines, Point(cursor.line, col))))
        case "/" | "?":
            return Step(msgspec.structs.replace(state, prompt="", prompt_forward=name == "/"))
        case "n" | "N":
            forward = state.forward if name == "n" else not state.forward
            return Step(_search(state, lines, state.search, forward))
    if name in _PAGE_KEYS or name in _HALF_PAGE_KEYS:
        page = _PAGE_KEYS.get(name, 0) * state.height or _HALF_PAGE_KEYS[name] * (state.height // 2)
        return Step(
            _move(state, lines, Point(cursor.line + page, cursor.col), top=state.top + page)
        )
    return Step(state)


def _prompt_key(state: CopyState, key: str, character: str | None, lines: Lines) -> CopyState:
    prompt = state.prompt or ""
    if key == "escape":
        return msgspec.structs.replace(state, prompt=None)
    if key == "enter":
        done = msgspec.structs.replace(state, prompt=None)
        if not prompt:  # tmux: an empty search repeats the last one
            return _search(done, lines, state.search, state.prompt_forward)
        return _search(done, lines, prompt, state.prompt_forward)
    if key in ("backspace", "ctrl+h"):
        if not prompt:
            return msgspec.structs.replace(state, prompt=None)
        return msgspec.structs.replace(state, prompt=prompt[:-1])
    if key == "ctrl+u":
        return msgspec.structs.replace(state, prompt="")
    if character and character.isprintable():
        return msgspec.structs.replace(state, prompt=prompt + character)
    return state


def _search(state: CopyState, lines: Lines, pattern: str, forward: bool) -> CopyState:
    remembered = msgspec.structs.replace(state, search=pattern, forward=forward)
    if not pattern:
        return remembered
    found = find(lines, pattern, state.cursor, forward)
    if found is None:
        return msgspec.structs.replace(remembered, message=f"not found: {pattern}")
    at, wrapped = found
    moved = _move(remembered, lines, at)
    if wrapped:
        hit = "bottom, went on at the top" if forward else "top, went on at the bottom"
        return msgspec.structs.replace(moved, message=f"search hit {hit}")
    return moved
