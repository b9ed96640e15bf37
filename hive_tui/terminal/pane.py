"""TerminalPane: one agent's pty screen as a Textual widget that behaves like a tmux pane.

    pane = TerminalPane("jim", rows=24, cols=80)
    pane.reserved = {"alt+1"}              # the app's keys pass through
    pane.prefix = PrefixKey("ctrl+right_square_bracket")  # shared: the key after it is the app's
    pane.feed(chunk)                       # bytes read from the agent's pty
    on_terminal_pane_input(msg)            # msg.data: bytes to write to the pty
    on_terminal_pane_resized(msg)          # msg.rows, msg.cols: resize the pty

Rendering uses the Line API: one Strip per screen row, cached until the emulator says
that row changed. Output is coalesced: however many chunks arrive, the pane asks Textual
to repaint once per frame, and only the rows that changed.

What a tmux pane does, this does too: the child's terminal is the pane's interior (the
border is not the child's); colours 0-15 stay palette indices and the default colours
stay the terminal's, so the person's theme applies (the app must let ANSI colours
through: `App(ansi_color=True)`); a row is laid out from the emulator's cells, never from
Rich's idea of a string's width; the focused pane shows the real terminal cursor where
the child's is, in the shape the child asked for (DECSCUSR).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.color import Color as RichColor
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Offset, Region
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from hive_core.terminal.emulator import (
    Attrs,
    Color,
    Cursor,
    Emulator,
    GhosttyEmulator,
    MouseTracking,
    Run,
    Underline,
)
from hive_tui import FRAME_S
from hive_tui.terminal import clipboard, copy_mode
from hive_tui.terminal.keys import encode_key
from hive_tui.terminal.kitty import KittyEncoder

HISTORY_STRIPS = 2048
WHEEL_LINES = 3
BRACKETED_PASTE = (b"\x1b[200~", b"\x1b[201~")
# xterm's button numbers for Textual's 1/2/3 (left/middle/right).
_MOUSE_BUTTON = {1: 0, 2: 1, 3: 2}
_WHEEL_UP, _WHEEL_DOWN, _MOTION, _RELEASE_X10 = 64, 65, 32, 3
# The legacy encoding's coordinates are one byte each, offset by 32.
_X10_LIMIT = 255 - 32
# The real cursor: shown or hidden, and the DECSCUSR shape (0 is the terminal's default).
_SHOW_CURSOR, _HIDE_CURSOR = "\x1b[?25h", "\x1b[?25l"
# The failed-start hint: marked off from the CLI's own last screen above it.
HINT_STYLE = Style(reverse=True)
# Only measures text for wrapping (cell widths); it never writes.
_MEASURE = Console(width=1, legacy_windows=False, force_terminal=False, file=None)
_CURSOR_UNKNOWN = -1  # the terminal was restarted: whatever it shows must be written again
# What tmux draws around a window smaller than its client (screen-redraw.c): the edges,
# the corner and the fill of the room beyond.
_EDGE_RIGHT, _EDGE_BOTTOM, _CORNER, _FILL = "│", "─", "┘", "·"

_styles: dict[Attrs, Style] = {}


def _rich_color(color: Color) -> RichColor | None:
    if color is None:
        return None
    if isinstance(color, int):
        return RichColor.from_ansi(color)
    return RichColor.from_rgb(*color)


def rich_style(attrs: Attrs) -> Style:
    """Every attribute Rich can write; Rich has no curly, dotted or dashed underline, so
    those are a plain one."""
    style = _styles.get(attrs)
    if style is None:
        double = attrs.underline == Underline.DOUBLE
        style = _styles[attrs] = Style(
            color=_rich_color(attrs.fg),
            bgcolor=_rich_color(attrs.bg),
            bold=attrs.bold or None,
            italic=attrs.italic or None,
            underline=(attrs.underline != Underline.NONE and not double) or None,
            underline2=double or None,
            reverse=attrs.reverse or None,
            dim=attrs.dim or None,
            strike=attrs.strikethrough or None,
            blink=attrs.blink or None,
            overline=attrs.overline or None,
            conceal=attrs.conceal or None,
        )
    return style


def wrapped(text: str, width: int) -> list[str]:
    """`text`'s lines broken at spaces to fit `width` cells."""
    return [
        line.plain.rstrip()
        for paragraph in text.splitlines()
        for line in Text(paragraph).wrap(_MEASURE, max(1, width))
    ]


def run_segments(run: Run, style: Style) -> list[Segment]:
    """Segments that Rich measures as exactly the run's cells. Rich measures a string by
    its own grapheme rules (a heart with VS16 is 2 wide to Rich, 1 cell to the emulator,
    as to tmux), so where they disagree each cell is written on its own."""
    text, cells = run.text, run.cells
    if cell_len(text) == cells:
        return [Segment(text, style)]
    if run.cluster:
        return _fit(text, cells, style)
    width = cells // len(text)
    segments: list[Segment] = []
    agreed: list[str] = []  # characters Rich measures as the emulator does, one by one

    def flush() -> None:
        if not agreed:
            return
        chunk = "".join(agreed)
        if cell_len(chunk) == len(chunk) * width:
            segments.append(Segment(chunk, style))
        else:  # Rich joins some of them into one grapheme (an emoji and its modifier)
            segments.extend(Segment(char, style) for char in agreed)
        agreed.clear()

    for char in text:
        if cell_len(char) == width:
            agreed.append(char)
        else:
            flush()
            segments.extend(_fit(char, width, style))
    flush()
    return segments


def _fit(char: str, width: int, style: Style) -> list[Segment]:
    """One cell's text as segments that Rich measures `width` wide."""
    if cell_len(char) == width:
        return [Segment(char, style)]
    base, marks = char[0], char[1:]
    base_width = cell_len(base)
    if base_width == width and cell_len(marks) == 0:
        # Measured apart, the marks (a variation selector, a joiner) add nothing; the
        # terminal still gets the whole cluster.
        return [Segment(base, style), Segment(marks, style)] if marks else [Segment(base, style)]
    if 0 < base_width < width:
        return [Segment(base + " " * (width - base_width), style)]
    # What Rich would measure as nothing or as too wide cannot be written in the cell's
    # room without moving the rest of the row: the cell stays blank.
    return [Segment(" " * width, style)]


@dataclass
class PrefixKey:
    """The app's prefix key and whether it was just pressed."""

    key: str
    armed: bool = False


class TerminalPane(Widget):
    DEFAULT_CSS = """
    TerminalPane {
        width: 1fr;
        height: 1fr;
        /* Only when the app lets ANSI colours through: Textual's RGB conversion cannot
           dim text over a default background. */
        &:ansi {
            background: ansi_default;
            color: ansi_default;
        }
    }
    """

    can_focus = True

    notice: reactive[str | None] = reactive(None)
    """Shown centred instead of the screen, e.g. what to install when the CLI is missing."""

    hint: reactive[str | None] = reactive(None)
    """Shown at the foot of the pane, over the last screen of a child that is gone (which
    says why, in the CLI's words): what to do, e.g. after a failed start. Its lines may
    reach the pane after the exit: whether the child is gone is the app's to say."""

    class Input(Message):
        """Bytes for the agent's pty: typed keys, a paste, mouse reports, query replies.
        `by_person` is False for the terminal's own answers to the child's queries."""

        def __init__(self, agent_id: str, data: bytes, *, by_person: bool = True) -> None:
            super().__init__()
            self.agent_id = agent_id
            self.data = data
            self.by_person = by_person

    class Resized(Message):
        """The pane's size changed: the pty should get the same size."""

        def __init__(self, agent_id: str, rows: int, cols: int) -> None:
            super().__init__()
            self.agent_id = agent_id
            self.rows = rows
            self.cols = cols

    def __init__(
        self,
        agent_id: str,
        rows: int = 24,
        cols: int = 80,
        *,
        emulator: Emulator | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.agent_id = agent_id
        self.emulator: Emulator = emulator or GhosttyEmulator(rows, cols)
        self.reserved: set[str] = set()
        # The app's prefix key, shared by every pane; None: no prefix.
        self.prefix: PrefixKey | None = None
        # Lines scrolled back into history; 0 is the live screen.
        self.scroll_back = 0
        # Strips built since mount: a measure of how well the row cache works.
        self.strips_built = 0
        self._strips: dict[int, Strip] = {}
        self._history: LRUCache[int, Strip] = LRUCache(HISTORY_STRIPS)
        self._frame: Timer | None = None
        # Where the real cursor was placed at the last paint (screen cells), if shown.
        self._cursor_at: Offset | None = None
        self._exited = False
        # The pane has drawn this child's screen (output or a snapshot): once it exits,
        # that screen is the one kept.
        self._drawn = False
        # Buttons pressed in the interior and reported to the child, not yet released.
        self._held: set[int] = set()
        # What the pty was last told (the pane's interior), which the emulator leaves
        # while the child is gone.
        self._pty_size: tuple[int, int] | None = None
        # What the real cursor was last told: None hidden, else the DECSCUSR shape.
        self._real_cursor: int | None = None
        # Made when the child first asks for the kitty keyboard protocol.
        self._kitty: KittyEncoder | None = None

    # --- output ----------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes the child wrote. Cheap: parsing only; the repaint waits for the frame."""
        if self._exited:
            self.exited = False  # only a new child writes after the last one exited
        self._drawn = True
        self.emulator.feed(data)
        replies = self.emulator.take_replies()
        if replies:
            self.post_message(self.Input(self.agent_id, replies, by_person=False))
        if self._frame is not None:
            self._frame.resume()

    def restore(self, snapshot: bytes) -> None:
        """The office's copy of this terminal (`Emulator.snapshot`, at the pty's size):
        it replaces what the pane had, at that size. The office sends one whenever the
        pty's size is not the one this pane asked for (hive_core/clients/client_socket.py): a
        pane larger than its pty (another client shows it smaller) marks the rest.

        An exited child's last screen, once drawn here, stays as it was: the office's
        copy of it at another size (sent for a layout change) is reflowed, which nothing
        would redraw. A pane that attached after the exit takes the office's copy."""
        if self._exited and self._drawn:
            return
        self._drawn = True
        self.emulator.restore(snapshot)
        self._strips.clear()
        self._history.clear()
        self.scroll_back = min(self.scroll_back, self.emulator.history_size)
        self.refresh()
        if self._frame is not None:
            self._frame.resume()

    def on_mount(self) -> None:
        self._frame = self.set_interval(FRAME_S, self._paint, pause=True)
        # A screen over this one (a form) or a suspended app: the real cursor is not ours.
        self.app.screen_change_signal.subscribe(self, lambda _screen: self._paint())
        self.app.app_resume_signal.subscribe(self, self._terminal_restarted)

    def _terminal_restarted(self, _app: object) -> None:
        self._real_cursor = _CURSOR_UNKNOWN
        self._paint()

    @property
    def exited(self) -> bool:
        """The child is gone. Its last screen then stays as it was whatever size the pane
        takes (nothing would redraw a reflowed one); a new child's output ends that."""
        return self._exited

    @exited.setter
    def exited(self, exited: bool) -> None:
        if exited == self._exited:
            return
        self._exited = exited
        if not exited and self._pty_size is not None:
            self._fit_emulator(*self._pty_size)
        if self.is_mounted:
            self._paint()

    def _paint(self) -> None:
        if self._frame is not None:
            self._frame.pause()
        dirty = self.emulator.take_dirty()
        cursor = self.emulator.cursor
        at = self._place_cursor(cursor)
        if isinstance(dirty, str) or self.scroll_back:
            # Scrolled back, new output shifts every visible line.
            self._strips.clear()
            self.refresh()
        else:
            rows = set(dirty)
            for row in dirty:
                self._strips.pop(row, None)
            if at is not None and at != self._cursor_at and not rows:
                # Textual moves the real cursor only after it writes an update: a cursor
                # that moved without output still needs one.
                rows.add(cursor.row)
            width = self.size.width
            if rows:
                self.refresh(*(Region(0, row, width, 1) for row in sorted(rows)))
        self._cursor_at = at

    def _place_cursor(self, cursor: Cursor) -> Offset | None:
        """Show the real terminal cursor at the child's cursor (returned, in screen cells),
        in the child's shape, while this pane has the focus and shows the live screen;
        hide it otherwise. Textual keeps the cursor hidden and only moves it (to
        `App.cursor_position`) after each update, so showing it and its shape are
        written here, once per change."""
        region = self.content_region
        show = (
            self.has_focus
            and self.app.screen is self.screen
            and cursor.visible
            and not self.scroll_back
            and self._copy is None
            and self.notice is None
            and not self._exited
            and cursor.row < region.height
            and cursor.col < region.width
        )
        self._set_real_cursor(cursor.shape if show else None)
        if not show:
            return None
        at = self.app.cursor_position = Offset(region.x + cursor.col, region.y + cursor.row)
        return at

    def _set_real_cursor(self, shape: int | None) -> None:
        if shape == self._real_cursor:
            return
        self._real_cursor = shape
        # Textual has no API for the cursor's visibility or shape; its driver is the one
        # writer to the terminal, in order with the frames.
        driver = self.app._driver
        if driver is not None:
            shown = _HIDE_CURSOR if shape is None else _SHOW_CURSOR
            driver.write(f"{shown}\x1b[{shape or 0} q")

    def on_unmount(self) -> None:
        self._set_real_cursor(None)

    def _shrunk(self) -> tuple[int, int] | None:
        """The pty's (rows, cols) while the pane is larger than it, because another client
        of the office shows it smaller; None otherwise (an exited child's last screen
        keeps its size and is not marked)."""
        if self._exited or self.notice is not None:
            return None
        rows, cols = self.emulator.size
        if rows >= self.size.height and cols >= self.size.width:
            return None
        return rows, cols

    def render_line(self, y: int) -> Strip:
        """The row; in a pane larger than its pty, the room beyond the pty's edge is
        marked as tmux marks a window smaller than its client: a line along the edge and
        the rest filled with dots."""
        shrunk = self._shrunk()
        if shrunk is None:
            return self._line(y)
        rows, cols = shrunk
        width = self.size.width
        if y > rows:
            return Strip([Segment(_FILL * width)])
        if y == rows:
            edge = _EDGE_BOTTOM * min(cols, width) + (_CORNER if cols < width else "")
            return Strip([Segment(edge + _FILL * (width - len(edge)))])
        line = self._line(y)
        if cols >= width:
            return line
        beyond = Strip([Segment(_EDGE_RIGHT + _FILL * (width - cols - 1))])
        return Strip.join([line.crop(0, cols), beyond])

    def _line(self, y: int) -> Strip:
        width = self.size.width
        if self.notice is not None:
            return self._notice_line(y, width)
        if self.hint is not None:
            hint = self._hint_lines(width)
            top = self.size.height - len(hint)
            if y >= top:
                return hint[y - top]
        if self._copy is not None:
            return self._copy_line(y, width)
        history = self.emulator.history_size
        index = history - self.scroll_back + y
        if index < history:
            strip = self._history.get(index)
            if strip is None:
                strip = self._history[index] = self._strip(self.emulator.history_line(index))
            return strip.adjust_cell_length(width)
        row = index - history
        if row >= self.emulator.size[0]:
            return Strip.blank(width)
        strip = self._strips.get(row)
        if strip is None:
            strip = self._strips[row] = self._strip(self.emulator.line(row))
        return strip.adjust_cell_length(width)

    def _strip(self, runs: list[Run]) -> Strip:
        self.strips_built += 1
        cols = self.emulator.size[1]
        return Strip(
            [segment for run in runs for segment in run_segments(run, rich_style(run.attrs))]
        ).adjust_cell_length(cols)

    def _notice_line(self, y: int, width: int) -> Strip:
        lines = wrapped(self.notice or "", width)
        top = (self.size.height - len(lines)) // 2
        if not 0 <= y - top < len(lines):
            return Strip.blank(width)
        return Strip([Segment(lines[y - top])]).text_align(width, "center")

    def _hint_lines(self, width: int) -> list[Strip]:
        """The hint wrapped inside the pane (a line of it past the border would run into
        the side panel), at most the pane's height."""
        lines = wrapped(self.hint or "", max(1, width - 2))[-max(1, self.size.height) :]
        return [
            Strip([Segment(f" {line}", HINT_STYLE)]).adjust_cell_length(width, HINT_STYLE)
            for line in lines
        ]

    def watch_hint(self) -> None:
        self.refresh()

    def watch_notice(self) -> None:
        self.refresh()
        if self.is_mounted:
            self._paint()  # no cursor over a notice

    def on_resize(self, event: events.Resize) -> None:
        # The event has the outer size; the child's terminal is what is inside the border.
        gutter = self.styles.gutter
        self.fit(event.size.height - gutter.height, event.size.width - gutter.width)

    def fit(self, rows: int, cols: int) -> None:
        """Give the child `rows` x `cols` (the pane's interior), if that is new. Also
        called by the app after a layout change: Textual can move a pane to a new size
        without a Resize event (a scroll reflow that lands with the layout's), and a pty
        that kept the old size would be drawn cut or padded."""
        if rows > 0 and cols > 0:
            self._take_size(rows, cols)
            # Where one pane of several is shown at a time (the app's default and zoom
            # layouts), the hidden ones take its size: showing another needs no resize,
            # and its child no redraw.
            for sibling in self.parent.children if self.parent is not None else ():
                if isinstance(sibling, TerminalPane) and not sibling.display:
                    sibling._take_size(rows, cols)
        self._paint()  # the real cursor moves with the pane

    def _take_size(self, rows: int, cols: int) -> None:
        if (rows, cols) == self._pty_size:
            return
        self._pty_size = (rows, cols)
        if not self._exited:
            self._fit_emulator(rows, cols)
        else:
            self._copy_refit(rows)  # the same lines, in a view of another height
        self.refresh()
        self.post_message(self.Resized(self.agent_id, rows, cols))

    def _fit_emulator(self, rows: int, cols: int) -> None:
        if rows <= 0 or cols <= 0 or (rows, cols) == self.emulator.size:
            return
        self.emulator.resize(rows, cols)
        self._strips.clear()
        self._history.clear()
        # Reflow changes how many rows the history holds: a view into it stays inside.
        self.scroll_back = min(self.scroll_back, self.emulator.history_size)
        self._copy_refit(rows)
        self.refresh()

    def watch_has_focus(self, has_focus: bool) -> None:
        super().watch_has_focus(has_focus)
        # The real cursor shows only in the focused pane.
        self._paint()

    @property
    def title(self) -> str:
        """What the child set with OSC 0/2 ("" if nothing)."""
        return self.emulator.title

    # --- scrollback ------------------------------------------------------------------

    def scroll_history(self, lines: int) -> None:
        """Move the view `lines` up (positive) or down into history; 0 is the live screen."""
        if self._copy is not None and self._copy_lines is not None:
            self._copy = copy_mode.scroll(self._copy, self._copy_lines, lines)
            self.refresh()
            return
        limit = 0 if self.emulator.modes.alt_screen else self.emulator.history_size
        position = max(0, min(limit, self.scroll_back + lines))
        if position != self.scroll_back:
            self.scroll_back = position
            self.refresh()
            self._paint()  # the real cursor belongs to the live screen only

    # --- input -----------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        self.post_message(self.Input(self.agent_id, data))

    def on_key(self, event: events.Key) -> None:
        prefix = self.prefix
        if prefix is not None:
            if prefix.armed:
                return  # the key after the prefix is the app's, whatever it is
            if event.key == prefix.key:
                # Armed here, in the same dispatch as the key: a key that follows in the
                # same read must already see it.
                prefix.armed = True
                event.stop()
                event.prevent_default()
                return
        if event.key in self.reserved:
            return
        if self._copy is not None:
            self._copy_key(event)
            return
        page = self.size.height - 1
        if event.key in ("shift+pageup", "shift+pagedown") and not self.emulator.modes.alt_screen:
            self.scroll_history(page if event.key == "shift+pageup" else -page)
            event.stop()
            event.prevent_default()
            return
        modes = self.emulator.modes
        if modes.kitty_flags:  # the child asked for the kitty keyboard protocol
            if self._kitty is None:
                self._kitty = KittyEncoder()
            data = self._kitty.encode(
                event.key, event.character, modes.kitty_flags, app_cursor=modes.app_cursor_keys
            )
        else:
            data = encode_key(event.key, event.character, app_cursor=modes.app_cursor_keys)
        if data is None:
            return
        event.stop()
        event.prevent_default()
        self.scroll_history(-self.scroll_back)
        self._send(data)

    def on_paste(self, event: events.Paste) -> None:
        event.stop()
        # As xterm does: a pasted newline is the Enter key.
        data = event.text.replace("\r\n", "\r").replace("\n", "\r").encode()
        if self.emulator.modes.bracketed_paste:
            data = BRACKETED_PASTE[0] + data + BRACKETED_PASTE[1]
        self.scroll_history(-self.scroll_back)
        self._send(data)

    def _report_mouse(self, event: events.MouseEvent, button: int, release: bool = False) -> bool:
        """Send `event` to the child if it asked for this kind of report, at the cell of
        its screen under the pointer (1-based, as xterm counts). Outside the pane's
        interior, only a drag and its release are the child's: at the nearest cell."""
        modes = self.emulator.modes
        tracking = modes.mouse_tracking
        if tracking is MouseTracking.OFF or self.scroll_back or self._exited or self.in_copy_mode:
            return False
        motion = button & _MOTION
        if motion and (
            tracking in (MouseTracking.X10, MouseTracking.PRESS)
            or (tracking is MouseTracking.DRAG and event.button == 0)
        ):
            return True  # the child did not ask for this motion; swallowing it is right
        if tracking is MouseTracking.X10 and release:
            return True  # X10 reports presses only
        offset = event.get_content_offset(self)
        if offset is None:
            if not self._held:
                return False  # the border is the app's, not the child's
            offset = event.get_content_offset_capture(self)
        rows, cols = self.emulator.size
        x = min(max(offset.x, 0), cols - 1) + 1
        y = min(max(offset.y, 0), rows - 1) + 1
        code = button
        if tracking is not MouseTracking.X10:
            code |= (4 if event.shift else 0) | (8 if event.meta else 0) | (16 if event.ctrl else 0)
        if modes.mouse_sgr:
            data = f"\x1b[<{code};{x};{y}{'m' if release else 'M'}".encode()
        else:
            if release:
                code = (code & ~0b11) | _RELEASE_X10
            if x > _X10_LIMIT or y > _X10_LIMIT:
                return True  # beyond what the encoding can say: dropped, as xterm does
            data = b"\x1b[M" + bytes((32 + code, 32 + x, 32 + y))
        self._send(data)
        return True

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.button in _MOUSE_BUTTON and self._report_mouse(event, _MOUSE_BUTTON[event.button]):
            event.stop()
            # Until the release, the pointer's moves and the release are the child's,
            # wherever the pointer goes (as xterm reports a drag out of its window).
            self._held.add(event.button)
            self.capture_mouse()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if event.button in _MOUSE_BUTTON and self._report_mouse(
            event, _MOUSE_BUTTON[event.button], release=True
        ):
            event.stop()
        self._held.discard(event.button)
        if not self._held:
            self.release_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        button = _MOUSE_BUTTON.get(event.button, 3)
        self._report_mouse(event, button | _MOTION)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if not self._report_mouse(event, _WHEEL_UP):
            self.scroll_history(WHEEL_LINES)
        event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        if not self._report_mouse(event, _WHEEL_DOWN):
            self.scroll_history(-WHEEL_LINES)
        event.stop()

    # --- copy mode (hive_tui/terminal/copy_mode.py) ----------------------------------

    # None: the live pane. In copy mode the view is frozen: output is still parsed, and
    # shown again when copy mode ends.
    _copy: copy_mode.CopyState | None = None
    _copy_lines: copy_mode.FrozenLines | None = None
    # The screen's rows as they were on entering (the scrollback is read as it is drawn).
    _copy_screen: tuple[Strip, ...] = ()

    @property
    def in_copy_mode(self) -> bool:
        return self._copy is not None

    def enter_copy_mode(self) -> None:
        """tmux's copy mode: the cursor starts at the child's (or at the bottom of a view
        scrolled back), the view where it was."""
        if self._copy is not None or self.notice is not None:
            return
        lines = self._freeze()
        shrunk = self._shrunk()
        height = max(1, self.size.height if shrunk is None else min(shrunk[0], self.size.height))
        bottom = max(0, len(lines) - height)
        if self.scroll_back:
            top = max(0, lines.history - self.scroll_back)
            cursor = copy_mode.Point(top + height - 1, 0)
        else:
            top = bottom
            row, col = self.emulator.cursor[:2]
            cursor = copy_mode.Point(lines.history + row, col)
        self._copy = copy_mode.enter(lines, height, cursor, top)
        self._copy_lines = lines
        self.refresh()
        self._paint()  # the real cursor is the child's: hidden while copying

    def leave_copy_mode(self) -> None:
        """Back to the live screen, at the bottom."""
        self._copy = self._copy_lines = None
        self._copy_screen = ()
        self.scroll_back = 0
        self.refresh()
        self._paint()

    def _freeze(self) -> copy_mode.FrozenLines:
        emulator = self.emulator
        rows = emulator.size[0]
        # The alternate screen has no scrollback of its own, as in tmux.
        history = 0 if emulator.modes.alt_screen else emulator.history_size
        screen = [emulator.line(row) for row in range(rows)]
        self._copy_screen = tuple(self._strip(runs) for runs in screen)

        def read(index: int) -> copy_mode.Row:
            # The child may have cleared the scrollback since (CSI 3 J): blank, not an error.
            if index >= self.emulator.history_size:
                return (" ",) * self.emulator.size[1], False
            line = copy_mode.line_of(self.emulator.history_line(index))
            return line, self.emulator.soft_wrapped(index, history=True)

        frozen = [
            (copy_mode.line_of(runs), emulator.soft_wrapped(row)) for row, runs in enumerate(screen)
        ]
        text = emulator.history_text() if history else []
        return copy_mode.FrozenLines(history, read, frozen, text)

    def _copy_refit(self, height: int) -> None:
        """After a resize (a reflow, zoom, grid): the same place over the new lines."""
        if self._copy is None or self._copy_lines is None:
            return
        old = self._copy_lines
        self._copy_lines = self._freeze()
        self._copy = copy_mode.resized(self._copy, old, self._copy_lines, max(1, height))

    def _copy_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        assert self._copy is not None and self._copy_lines is not None
        step = copy_mode.press(self._copy, event.key, event.character, self._copy_lines)
        if step.copied is not None:
            self._deliver(step.copied)
        if step.state is None:
            self.leave_copy_mode()
            return
        self._copy = step.state
        self.refresh()

    def _deliver(self, text: str) -> None:
        """The copy to tmux's paste buffer or to the terminal's clipboard, and a line
        that says which (hive_tui/terminal/clipboard.py)."""
        if not clipboard.in_tmux():
            # OSC 52 through Textual's driver: the terminal sets its clipboard, over SSH too.
            self.app.copy_to_clipboard(text)
            self.app.notify(clipboard.copied(text, clipboard.TERMINAL), title="copy", timeout=5)
            return

        async def to_tmux() -> None:
            why = await clipboard.to_tmux_buffer(text)
            if why is None:
                told = clipboard.copied(text, clipboard.TMUX_BUFFER)
                self.app.notify(told, title="copy", timeout=5)
                return
            self.app.copy_to_clipboard(text)
            told = clipboard.not_copied(text, why)
            self.app.notify(told, title="copy", severity="warning", timeout=8)

        self.run_worker(to_tmux(), group="copy")

    def _copy_line(self, y: int, width: int) -> Strip:
        """A row of the frozen view with the selection, the cursor, the position (top
        right, as tmux shows it) and the search prompt or what it found (bottom)."""
        state, lines = self._copy, self._copy_lines
        assert state is not None and lines is not None
        index = state.top + y
        if index >= len(lines):
            strip = Strip.blank(width)
        elif index >= lines.history:
            strip = self._copy_screen[index - lines.history]
        else:
            cached = self._history.get(index)
            if cached is None and index < self.emulator.history_size:
                cached = self._history[index] = self._strip(self.emulator.history_line(index))
            strip = cached if cached is not None else Strip.blank(width)
        strip = strip.adjust_cell_length(width)
        span = copy_mode.selection(state, lines)
        if span is not None and span[0].line <= index <= span[1].line:
            first = span[0].col if index == span[0].line else 0
            last = span[1].col if index == span[1].line else width - 1
            strip = _restyle(strip, first, last + 1, _SELECTED)
        if index == state.cursor.line and index < len(lines):
            line = lines[index]
            col = copy_mode.snap(line, state.cursor.col) if line else 0
            end = col + 1
            while end < len(line) and line[end] == "":
                end += 1
            strip = _restyle(strip, col, end, _COPY_CURSOR)
        if y == 0:
            mark = copy_mode.position(state, lines)
            strip = _overlay(strip, max(0, width - len(mark)), mark, width)
        if y == self.size.height - 1:
            if state.prompt is not None:
                said = f"search {'down' if state.prompt_forward else 'up'}: {state.prompt}"
            else:
                said = state.message
            if said:
                strip = _overlay(strip, 0, said, width)
        return strip


# tmux's mode-style (yellow, black text) for the selection and what copy mode says; the
# cursor is its cell reversed.
_SELECTED = Style(color="black", bgcolor="yellow")
_COPY_CURSOR = Style(reverse=True)


def _restyle(strip: Strip, start: int, end: int, style: Style) -> Strip:
    """Cells start..end (exclusive) of `strip` with `style` laid over theirs."""
    end = min(end, strip.cell_length)
    if start >= end:
        return strip
    middle = Strip(Segment.apply_style(strip.crop(start, end), post_style=style))
    return Strip.join([strip.crop(0, start), middle, strip.crop(end)])


def _overlay(strip: Strip, at: int, text: str, width: int) -> Strip:
    """`text` written over `strip` from cell `at`, in the mode style."""
    text = text[: max(0, width - at)]
    end = at + cell_len(text)
    return Strip.join(
        [strip.crop(0, at), Strip([Segment(text, _SELECTED)]), strip.crop(end, width)]
    ).adjust_cell_length(width)
