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
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from hive_tui.terminal.emulator import Attrs, Color, Emulator, GhosttyEmulator, MouseTracking, Run
from hive_tui.terminal.keys import encode_key

# 60 Hz: typing echo within a frame, and never more paints than the screen can show.
FRAME_S = 1 / 60
HISTORY_STRIPS = 2048
WHEEL_LINES = 3
BRACKETED_PASTE = (b"\x1b[200~", b"\x1b[201~")
# xterm's button numbers for Textual's 1/2/3 (left/middle/right).
_MOUSE_BUTTON = {1: 0, 2: 1, 3: 2}
_WHEEL_UP, _WHEEL_DOWN, _MOTION, _RELEASE_X10 = 64, 65, 32, 3

_styles: dict[Attrs, Style] = {}


def _rich_color(color: Color) -> RichColor | None:
    if color is None:
        return None
    if isinstance(color, int):
        return RichColor.from_ansi(color)
    return RichColor.from_rgb(*color)


def rich_style(attrs: Attrs) -> Style:
    style = _styles.get(attrs)
    if style is None:
        style = _styles[attrs] = Style(
            color=_rich_color(attrs.fg),
            bgcolor=_rich_color(attrs.bg),
            bold=attrs.bold or None,
            italic=attrs.italic or None,
            underline=attrs.underline or None,
            reverse=attrs.reverse or None,
            dim=attrs.dim or None,
            strike=attrs.strikethrough or None,
        )
    return style


CURSOR_STYLE = Style(reverse=True)


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
    }
    """

    can_focus = True

    notice: reactive[str | None] = reactive(None)
    """Shown centred instead of the screen, e.g. what to install when the CLI is missing."""

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
        self._cursor_row: int | None = None

    # --- output ----------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes the child wrote. Cheap: parsing only; the repaint waits for the frame."""
        self.emulator.feed(data)
        replies = self.emulator.take_replies()
        if replies:
            self.post_message(self.Input(self.agent_id, replies, by_person=False))
        if self._frame is not None:
            self._frame.resume()

    def on_mount(self) -> None:
        self._frame = self.set_interval(FRAME_S, self._paint, pause=True)

    def _paint(self) -> None:
        if self._frame is not None:
            self._frame.pause()
        dirty = self.emulator.take_dirty()
        cursor = self.emulator.cursor
        cursor_row = cursor.row if cursor.visible and self.has_focus else None
        if isinstance(dirty, str) or self.scroll_back:
            # Scrolled back, new output shifts every visible line.
            self._strips.clear()
            self.refresh()
        else:
            rows = set(dirty)
            if cursor_row != self._cursor_row:
                rows.update(r for r in (cursor_row, self._cursor_row) if r is not None)
            elif cursor_row is not None:
                rows.add(cursor_row)  # the cursor may have moved along its row
            for row in dirty:
                self._strips.pop(row, None)
            width = self.size.width
            if rows:
                self.refresh(*(Region(0, row, width, 1) for row in sorted(rows)))
        self._cursor_row = cursor_row

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self.notice is not None:
            return self._notice_line(y, width)
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
        if row == self._cursor_row and self.scroll_back == 0:
            strip = self._with_cursor(strip)
        return strip.adjust_cell_length(width)

    def _strip(self, runs: list[Run]) -> Strip:
        self.strips_built += 1
        cols = self.emulator.size[1]
        return Strip([Segment(text, rich_style(attrs)) for text, attrs in runs]).adjust_cell_length(
            cols
        )

    def _with_cursor(self, strip: Strip) -> Strip:
        col = self.emulator.cursor.col
        if col >= strip.cell_length:
            return strip
        before, cell, after = strip.divide([col, col + 1, strip.cell_length])
        return Strip.join([before, cell.apply_style(CURSOR_STYLE), after])

    def _notice_line(self, y: int, width: int) -> Strip:
        lines = (self.notice or "").splitlines()
        top = (self.size.height - len(lines)) // 2
        if not 0 <= y - top < len(lines):
            return Strip.blank(width)
        return Strip([Segment(lines[y - top])]).text_align(width, "center")

    def watch_notice(self) -> None:
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        rows, cols = event.size.height, event.size.width
        if rows <= 0 or cols <= 0 or (rows, cols) == self.emulator.size:
            return
        self.emulator.resize(rows, cols)
        self._strips.clear()
        self._history.clear()
        self.refresh()
        self.post_message(self.Resized(self.agent_id, rows, cols))

    def watch_has_focus(self, has_focus: bool) -> None:
        super().watch_has_focus(has_focus)
        # The cursor is drawn only in the focused pane.
        self._paint()

    @property
    def title(self) -> str:
        """What the child set with OSC 0/2 ("" if nothing)."""
        return self.emulator.title

    # --- scrollback ------------------------------------------------------------------

    def scroll_history(self, lines: int) -> None:
        """Move the view `lines` up (positive) or down into history; 0 is the live screen."""
        limit = 0 if self.emulator.modes.alt_screen else self.emulator.history_size
        position = max(0, min(limit, self.scroll_back + lines))
        if position != self.scroll_back:
            self.scroll_back = position
            self.refresh()

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
        page = self.size.height - 1
        if event.key in ("shift+pageup", "shift+pagedown") and not self.emulator.modes.alt_screen:
            self.scroll_history(page if event.key == "shift+pageup" else -page)
            event.stop()
            event.prevent_default()
            return
        data = encode_key(
            event.key, event.character, app_cursor=self.emulator.modes.app_cursor_keys
        )
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
        """Send `event` to the child if it asked for this kind of report."""
        modes = self.emulator.modes
        tracking = modes.mouse_tracking
        if tracking is MouseTracking.OFF or self.scroll_back:
            return False
        motion = button & _MOTION
        if motion and (
            tracking is MouseTracking.PRESS
            or (tracking is MouseTracking.DRAG and event.button == 0)
        ):
            return True  # the child did not ask for this motion; swallowing it is right
        code = (
            button
            | (4 if event.shift else 0)
            | (8 if event.meta else 0)
            | (16 if event.ctrl else 0)
        )
        x, y = int(event.x) + 1, int(event.y) + 1
        if modes.mouse_sgr:
            data = f"\x1b[<{code};{x};{y}{'m' if release else 'M'}".encode()
        else:
            if release:
                code = (code & ~0b11) | _RELEASE_X10
            # X10 encoding cannot say more than 223; such clicks are dropped, as in xterm.
            if x > 223 or y > 223:
                return True
            data = b"\x1b[M" + bytes((32 + code, 32 + x, 32 + y))
        self._send(data)
        return True

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.button in _MOUSE_BUTTON and self._report_mouse(event, _MOUSE_BUTTON[event.button]):
            event.stop()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if event.button in _MOUSE_BUTTON and self._report_mouse(
            event, _MOUSE_BUTTON[event.button], release=True
        ):
            event.stop()

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
