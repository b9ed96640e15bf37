"""The Board tab: board.md, rendered lightly and fast enough for a 2,000-line board.

Textual's Markdown widget builds a widget per block (about 4 s and a 1 s stall of the
event loop for 741 lines), so this is a Line-API widget instead: the text is parsed once
into styled runs per source line (pure functions below, tested alone), wrapped to the
width into a flat list of rows, and only visible rows are turned into Strips, each
cached until the text, the width or the theme changes.

The markdown is the common subset a manager writes: headings, bullets, numbered items,
checkboxes, `code`, **bold**, quotes, fenced blocks and rules. Everything else shows as
written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, chop_cells
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from hive_core.text import shown as clean

EMPTY_BOARD = "The board is empty: the manager writes it with `hive board --write`."
TAB_WIDTH = 4
# Lines that identify the reader's place when the board is rewritten around it.
ANCHOR_LINES = 3

# A run of text and the role that styles it ("" is plain text). Roles map to the
# component classes `board--<role>` of BoardPanel, so the theme colours them.
Run = tuple[str, str]

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:\s*\1){2,}\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_QUOTE = re.compile(r"^(\s*)>\s?(.*)$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$")
_CHECKBOX = re.compile(r"^\[([ xX])\]\s+(.*)$")
# Code spans first, so `**not bold**` inside backticks stays literal.
_INLINE = re.compile(r"(`+)(.+?)\1|\*\*(.+?)\*\*|__(.+?)__")


@dataclass(frozen=True, slots=True)
class BoardLine:
    """One source line of the board, ready to wrap and draw."""

    runs: tuple[Run, ...]
    hang: int = 0  # continuation rows start this many cells in (under the item's text)
    rule: bool = False  # a horizontal rule, drawn across the whole width

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.runs)


def inline_runs(text: str, role: str = "") -> list[Run]:
    """`code` and **bold** spans of `text`; the rest carries `role`."""
    runs: list[Run] = []
    position = 0
    for match in _INLINE.finditer(text):
        if match.start() > position:
            runs.append((text[position : match.start()], role))
        if match.group(2) is not None:
            runs.append((match.group(2), "code"))
        else:
            runs.append((match.group(3) or match.group(4), "bold"))
        position = match.end()
    if position < len(text):
        runs.append((text[position:], role))
    return runs


def _board_line(runs: list[Run], hang: int = 0) -> BoardLine:
    return BoardLine(tuple(run for run in runs if run[0]), hang=hang)


def style_line(line: str) -> BoardLine:
    """One line outside a fenced block (tabs expanded, control characters made visible)."""
    if heading := _HEADING.match(line):
        level = min(len(heading.group(1)), 3)
        return BoardLine(((heading.group(2), f"h{level}"),))
    if _RULE.match(line):
        return BoardLine((), rule=True)
    if quote := _QUOTE.match(line):
        indent, rest = quote.groups()
        runs = [(indent, ""), ("▌ ", "quote"), *inline_runs(rest, "quote")]
        return _board_line(runs, len(indent) + 2)
    if item := _ITEM.match(line):
        indent, marker, rest = item.groups()
        bullet = "•" if marker in "-*+" else marker
        runs = [(indent, ""), (bullet, "bullet"), (" ", "")]
        hang = len(indent) + len(bullet) + 1
        if box := _CHECKBOX.match(rest):
            done = box.group(1) != " "
            runs.append(("[✓]" if done else "[ ]", "check-done" if done else "check-open"))
            runs.append((" ", ""))
            runs.extend(inline_runs(box.group(2), "done" if done else ""))
            hang += 4
        else:
            runs.extend(inline_runs(rest))
        return _board_line(runs, hang)
    stripped = line.lstrip(" ")
    indent = len(line) - len(stripped)
    return _board_line(inline_runs(line), indent)


def parse_board(text: str) -> list[BoardLine]:
    """The board's lines, styled; an empty board gives the empty-state line."""
    if not text.strip():
        return [BoardLine(((EMPTY_BOARD, "empty"),))]
    lines: list[BoardLine] = []
    in_fence = False
    for raw in clean(text).expandtabs(TAB_WIDTH).splitlines():
        if _FENCE.match(raw):
            in_fence = not in_fence
            lines.append(BoardLine(((raw, "fence"),)))
        elif in_fence:
            lines.append(BoardLine(((raw, "codeblock"),)))
        else:
            lines.append(style_line(raw))
    return lines


_WORD = re.compile(r"\s*\S+\s*|\s+")


def hanging_indent(hang: int, width: int) -> int:
    """The indent of continuation rows: none where it would eat half the row."""
    return hang if hang <= width // 2 else 0


def wrap_offsets(text: str, width: int, hang: int = 0) -> list[int]:
    """Where each row of `text` starts when word-wrapped to `width` cells.

    Continuation rows are indented by `hanging_indent(hang, width)` cells. Words wider
    than a row are split between characters; spaces at a row's end may run past the
    width (they are cropped when drawn).
    """
    if width <= 0 or cell_len(text) <= width:
        return [0]
    continuation = width - hanging_indent(hang, width)
    starts = [0]
    available = width
    column = 0
    for match in _WORD.finditer(text):
        offset, rest = match.start(), match.group()
        visible = cell_len(rest.rstrip())
        # A word that fits a fresh row goes there; a longer one is split from here anyway.
        if (
            column
            and column + visible > available
            and (visible <= continuation or column >= available)
        ):
            starts.append(offset)
            available, column = continuation, 0
        while column + cell_len(rest.rstrip()) > available:
            room = available - column
            piece = chop_cells(rest, room)[0]
            if not piece or cell_len(piece) > room:
                # A wide character that does not fit: a fresh row, unless this is one
                # (a row narrower than the character can only overflow).
                piece = "" if column else rest[0]
            offset += len(piece)
            rest = rest[len(piece) :]
            starts.append(offset)
            available, column = continuation, 0
        column += cell_len(rest)
    return starts


def find_lines(context: list[str], lines: list[str], near: int) -> int:
    """Where `context` (consecutive lines) now starts in `lines`, the match nearest to
    line `near` winning; `near` itself (kept in range) if the lines are gone."""
    size = len(context)
    for distance in range(max(near, len(lines) - near) + 1):
        for index in (near - distance, near + distance):
            if 0 <= index < len(lines) and lines[index : index + size] == context:
                return index
    return max(min(near, len(lines) - 1), 0)


def slice_runs(runs: tuple[Run, ...], start: int, end: int) -> list[Run]:
    """The runs covering characters start..end of the line."""
    sliced: list[Run] = []
    position = 0
    for text, role in runs:
        run_end = position + len(text)
        if run_end > start and position < end:
            sliced.append((text[max(start - position, 0) : end - position], role))
        position = run_end
        if position >= end:
            break
    return sliced


class BoardPanel(ScrollView, can_focus=True):
    """board.md as light markdown. Keys: up/down, pageup/pagedown, home/end scroll.

    Fed by the app with `show(text)`; it never reads files itself.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "board--h1",
        "board--h2",
        "board--h3",
        "board--bullet",
        "board--code",
        "board--codeblock",
        "board--fence",
        "board--bold",
        "board--quote",
        "board--check-open",
        "board--check-done",
        "board--done",
        "board--rule",
        "board--empty",
    }

    DEFAULT_CSS = """
    BoardPanel {
        scrollbar-gutter: stable;
        overflow-x: hidden;
        padding: 0 1;
    }
    BoardPanel > .board--h1 { color: $accent; text-style: bold underline; }
    BoardPanel > .board--h2 { color: $accent; text-style: bold; }
    BoardPanel > .board--h3 { color: $secondary; text-style: bold; }
    BoardPanel > .board--bullet { color: $accent; }
    BoardPanel > .board--code { color: $warning; background: $boost; }
    BoardPanel > .board--codeblock { color: $warning; }
    BoardPanel > .board--fence { color: $text-muted; }
    BoardPanel > .board--bold { text-style: bold; }
    BoardPanel > .board--quote { color: $text-muted; text-style: italic; }
    BoardPanel > .board--check-open { color: $warning; text-style: bold; }
    BoardPanel > .board--check-done { color: $success; }
    BoardPanel > .board--done { color: $text-muted; }
    BoardPanel > .board--rule { color: $secondary; }
    BoardPanel > .board--empty { color: $text-muted; text-style: italic; }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None) -> None:
        super().__init__(name=name, id=id)
        self._text = ""
        self._lines: list[BoardLine] = parse_board("")
        # (line index, start, end) of every row at the current width.
        self._rows: list[tuple[int, int, int]] = []
        self._first_row: list[int] = []
        self._width = 0
        self._strips: LRUCache[tuple[int, int], Strip] = LRUCache(1024)
        self._styles: dict[str, Style] = {}

    def focus_target(self) -> Widget:
        """The board takes the keys itself (arrows and page keys scroll it)."""
        return self

    @property
    def text(self) -> str:
        return self._text

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def show(self, text: str) -> None:
        """Replace the board. The reader stays on the line they were reading, also when
        lines above it changed: the manager rewrites the whole file for every edit, so
        jumping to the top (or keeping only the row number) would lose them."""
        if text == self._text:
            return
        line, start = self._anchor()
        context = [board_line.text for board_line in self._lines[line : line + ANCHOR_LINES]]
        self._text = text
        self._lines = parse_board(text)
        line = find_lines(context, [board_line.text for board_line in self._lines], near=line)
        if self.is_mounted:  # else the first resize lays it out
            self._layout((line, start))

    def _wrap_width(self) -> int:
        return self.scrollable_content_region.width

    def _anchor(self) -> tuple[int, int]:
        """The source line and character at the top of the view."""
        top = round(self.scroll_y)
        if top >= len(self._rows):
            return (0, 0)
        line, start, _ = self._rows[top]
        return (line, start)

    def _layout(self, anchor: tuple[int, int]) -> None:
        width = self._wrap_width()
        self._width = width
        self._strips.clear()
        rows: list[tuple[int, int, int]] = []
        first_row: list[int] = []
        for index, line in enumerate(self._lines):
            first_row.append(len(rows))
            text = line.text
            starts = wrap_offsets(text, width, line.hang)
            ends = [*starts[1:], len(text)]
            rows.extend((index, start, end) for start, end in zip(starts, ends, strict=True))
        self._rows = rows
        self._first_row = first_row
        self.virtual_size = Size(width, len(rows))
        self.scroll_to(y=self._row_of(anchor), animate=False, immediate=True)
        self.refresh()

    def _row_of(self, anchor: tuple[int, int]) -> int:
        line, start = anchor
        if line >= len(self._first_row):
            return len(self._rows)
        row = self._first_row[line]
        while row + 1 < len(self._rows) and self._rows[row + 1][0] == line:
            if self._rows[row + 1][1] > start:
                break
            row += 1
        return row

    def on_resize(self, event: events.Resize) -> None:
        if self._wrap_width() != self._width:
            self._layout(self._anchor())

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()

    def _style(self, role: str) -> Style:
        style = self._styles.get(role)
        if style is None:
            style = self.get_component_rich_style(f"board--{role}") if role else self.rich_style
            self._styles[role] = style
        return style

    def render_line(self, y: int) -> Strip:
        row = round(self.scroll_y) + y
        width = self.size.width
        key = (row, width)
        strip = self._strips.get(key)
        if strip is None:
            # The widget's own style, cached: computing rich_style per line was a third
            # of the cost of painting a page.
            plain = self._style("")
            if row >= len(self._rows):
                return Strip.blank(width, plain)
            strip = self._render_row(row).crop_extend(0, width, plain)
            self._strips[key] = strip
        return strip

    def _render_row(self, row: int) -> Strip:
        index, start, end = self._rows[row]
        line = self._lines[index]
        if line.rule:
            return Strip([Segment("─" * self._width, self._style("rule"))])
        segments = []
        if start and (hang := hanging_indent(line.hang, self._width)):
            segments.append(Segment(" " * hang, self._style("")))
        runs = slice_runs(line.runs, start, end)
        segments.extend(Segment(text, self._style(role)) for text, role in runs if text)
        return Strip(segments)
