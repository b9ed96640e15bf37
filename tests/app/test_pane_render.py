"""What a bordered TerminalPane draws and reports, as a tmux pane would: palette colours,
every attribute, rows laid out from the emulator's cells, the real cursor, mouse reports
at the clicked cell in every mode, and an exited child's last screen kept."""

from __future__ import annotations

import pytest
from rich.color import Color, ColorType
from rich.segment import Segment
from textual import events
from textual.app import App, ComposeResult
from textual.geometry import Offset
from textual.screen import ModalScreen
from textual.widgets import Input

from hive_tui.terminal.pane import TerminalPane


class BorderedApp(App[None]):
    """A pane with a border, as the app draws it, at a known place: its interior starts
    at screen cell (1, 1)."""

    CSS = "TerminalPane { border: round $panel; }"

    def __init__(self) -> None:
        super().__init__(ansi_color=True)
        self.sent: list[bytes] = []
        self.resized: list[tuple[int, int]] = []
        self.written: list[str] = []

    def compose(self) -> ComposeResult:
        yield TerminalPane("jim")

    def on_terminal_pane_input(self, message: TerminalPane.Input) -> None:
        self.sent.append(message.data)

    def on_terminal_pane_resized(self, message: TerminalPane.Resized) -> None:
        self.resized.append((message.rows, message.cols))

    @property
    def pane(self) -> TerminalPane:
        return self.query_one(TerminalPane)

    @property
    def cursor_written(self) -> list[str]:
        """What was written for the real cursor (Textual writes the pointer's shape too)."""
        return [data for data in self.written if data.startswith("\x1b[?25")]

    def record_terminal(self) -> None:
        """Keep what is written to the terminal besides the frames (the headless driver
        drops everything)."""
        assert self._driver is not None
        self._driver.write = self.written.append  # type: ignore[method-assign,assignment]


class Form(ModalScreen[None]):
    def compose(self) -> ComposeResult:
        yield Input()


def segments(pane: TerminalPane, y: int) -> list[Segment]:
    return [seg for seg in pane.render_line(y) if seg.text]


async def test_the_pty_is_the_interior_and_resizes_with_it() -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        assert app.pane.size == (38, 10)
        assert app.pane.emulator.size == (10, 38)
        assert app.resized == [(10, 38)]
        await pilot.resize_terminal(60, 20)
        await pilot.pause()
        assert app.pane.emulator.size == (18, 58) and app.resized[-1] == (18, 58)


async def test_ansi_colours_stay_palette_indices_and_default_colours_stay_default() -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        app.pane.feed(b"\x1b[31mr\x1b[35mm\x1b[91mR\x1b[95mM\x1b[38;5;208mo\x1b[0md")
        await pilot.pause(0.05)
        colours = [seg.style.color if seg.style else None for seg in segments(app.pane, 0)[:6]]
        assert colours == [Color.from_ansi(n) for n in (1, 5, 9, 13, 208)] + [None]
        assert [c.type for c in colours[:4] if c] == [ColorType.STANDARD] * 4
        # The app lets them through to the terminal unconverted, and the pane's own
        # colours are the terminal's defaults.
        assert app.native_ansi_color
        assert app.pane.styles.background.ansi == -1 and app.pane.styles.color.ansi == -1


@pytest.mark.parametrize(
    ("sgr", "flag"),
    [
        (b"1", "bold"),
        (b"2", "dim"),
        (b"3", "italic"),
        (b"4", "underline"),
        (b"21", "underline2"),
        (b"4:3", "underline"),  # curly: Rich has none, so a plain underline
        (b"5", "blink"),
        (b"7", "reverse"),
        (b"8", "conceal"),
        (b"9", "strike"),
        (b"53", "overline"),
    ],
)
async def test_every_sgr_attribute_rich_can_show(sgr: bytes, flag: str) -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        app.pane.feed(b"\x1b[" + sgr + b"mX\x1b[0mY")
        await pilot.pause(0.05)
        x, y = segments(app.pane, 0)[:2]
        assert x.text == "X" and getattr(x.style, flag) is True
        assert y.text.startswith("Y") and not getattr(y.style, flag)


@pytest.mark.parametrize(
    "emoji",
    ["❤\ufe0f", "👍🏽", "🇯🇵", "👩\u200d💻", "中", "e\u0301", "\u2764\ufe0e"],
)
async def test_a_row_is_laid_out_from_the_emulators_cells(emoji: str) -> None:
    """Whatever Rich thinks the string's width is, the text after the emoji is at the
    column the emulator put it, and the row is exactly the pane's width."""
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        pane = app.pane
        pane.feed(f"a{emoji}b|\x1b[6n".encode())
        await pilot.pause(0.05)
        reply = app.sent[-1].decode()  # where the emulator's cursor is: after the `|`
        column_after_bar = int(reply[reply.index(";") + 1 : -1]) - 1
        strip = pane.render_line(0)
        assert strip.cell_length == pane.size.width
        bar = strip.crop(column_after_bar - 1, column_after_bar)
        assert bar.text == "|"
        assert strip.crop(column_after_bar - 2, column_after_bar - 1).text == "b"


async def test_the_real_cursor_is_at_the_childs_cursor_with_its_shape() -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        app.record_terminal()
        pane = app.pane
        pane.feed(b"ab\x1b[3;5H\x1b[5 q")
        pane.focus()
        await pilot.pause(0.05)
        # The interior starts at (1, 1): the child's row 2, column 4 is screen (5, 3).
        assert app.cursor_position == Offset(5, 3)
        assert app.cursor_written[-1] == "\x1b[?25h\x1b[5 q"
        # No painted block stands in for it.
        assert not any(seg.style and seg.style.reverse for seg in pane.render_line(2))
        pane.feed(b"\x1b[1;2H")
        await pilot.pause(0.05)
        assert app.cursor_position == Offset(2, 1)
        pane.feed(b"\x1b[?25l")
        await pilot.pause(0.05)
        assert app.cursor_written[-1] == "\x1b[?25l\x1b[0 q"
        pane.feed(b"\x1b[?25h\x1b[0 q")
        await pilot.pause(0.05)
        assert app.cursor_written[-1] == "\x1b[?25h\x1b[0 q"
        pane.feed(b"".join(b"line %d\r\n" % n for n in range(20)))
        await pilot.pause(0.05)
        assert app.cursor_written[-1] == "\x1b[?25h\x1b[0 q"
        pane.scroll_history(3)  # history has no cursor
        assert app.cursor_written[-1] == "\x1b[?25l\x1b[0 q"
        pane.scroll_history(-3)
        assert app.cursor_written[-1] == "\x1b[?25h\x1b[0 q"
        app.push_screen(Form())  # a form over the pane has the cursor
        await pilot.pause(0.05)
        assert app.cursor_written[-1] == "\x1b[?25l\x1b[0 q"
        app.pop_screen()
        await pilot.pause(0.05)
        assert app.cursor_written[-1] == "\x1b[?25h\x1b[0 q"
        app.set_focus(None)
        await pilot.pause(0.05)
        assert app.cursor_written[-1] == "\x1b[?25l\x1b[0 q"
        writes = len(app.cursor_written)
        pane.feed(b"more output")
        await pilot.pause(0.05)
        assert len(app.cursor_written) == writes  # written once per change, not per frame


MOUSE_CASES = [
    # (modes the child set, what a left click at interior cell (4, 2) sends)
    (b"\x1b[?9h", [b"\x1b[M\x20\x25\x23"]),  # X10: the press only
    (b"\x1b[?1000h", [b"\x1b[M\x20\x25\x23", b"\x1b[M\x23\x25\x23"]),
    (b"\x1b[?1002h", [b"\x1b[M\x20\x25\x23", b"\x1b[M\x23\x25\x23"]),
    (b"\x1b[?1003h", [b"\x1b[M\x20\x25\x23", b"\x1b[M\x23\x25\x23"]),
    (b"\x1b[?9h\x1b[?1006h", [b"\x1b[<0;5;3M"]),
    (b"\x1b[?1000h\x1b[?1006h", [b"\x1b[<0;5;3M", b"\x1b[<0;5;3m"]),
    (b"\x1b[?1002h\x1b[?1006h", [b"\x1b[<0;5;3M", b"\x1b[<0;5;3m"]),
    (b"\x1b[?1003h\x1b[?1006h", [b"\x1b[<0;5;3M", b"\x1b[<0;5;3m"]),
]


@pytest.mark.parametrize(("modes", "expected"), MOUSE_CASES)
async def test_a_click_reaches_the_child_at_the_clicked_cell(
    modes: bytes, expected: list[bytes]
) -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.click(TerminalPane, offset=(5, 3))  # before the child asks: nothing
        assert app.sent == []
        app.pane.feed(modes)
        # Offsets count from the border's corner: interior cell (4, 2) is 1-based (5, 3).
        await pilot.click(TerminalPane, offset=(5, 3))
        await pilot.pause()
        assert app.sent == expected
        app.sent.clear()
        await pilot.click(TerminalPane, offset=(0, 0))  # the border is not the child's
        await pilot.pause()
        assert app.sent == []


async def test_motion_is_reported_only_in_the_modes_that_ask_for_it() -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        app.pane.feed(b"\x1b[?1000h\x1b[?1006h")
        await pilot.hover(TerminalPane, offset=(3, 2))
        await pilot.pause()
        assert app.sent == []
        app.pane.feed(b"\x1b[?1003h")
        await pilot.hover(TerminalPane, offset=(7, 4))
        await pilot.pause()
        assert app.sent == [b"\x1b[<35;7;4M"]  # motion with no button held


def mouse(app: App[None], kind: type[events.MouseEvent], x: int, y: int, button: int = 0) -> None:
    """A mouse event at the pane's offset (x, y), sent as the driver's are (and as Pilot
    sends them): through the screen, to the widget under the pointer."""
    region = app.query_one(TerminalPane).region
    x, y = region.x + x, region.y + y
    event = kind(None, x, y, 0, 0, button, False, False, False, screen_x=x, screen_y=y)
    app.screen._forward_event(event)


async def test_the_wheel_goes_to_the_child_at_the_pointer() -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        pane = app.pane
        pane.feed(b"\x1b[?1000h\x1b[?1006h")
        mouse(app, events.MouseScrollUp, 3, 2)
        await pilot.pause()
        assert app.sent == [b"\x1b[<64;3;2M"]


async def test_a_drag_is_reported_in_button_mode_and_clamped_to_the_screen() -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        pane = app.pane
        pane.feed(b"\x1b[?1002h\x1b[?1006h")
        mouse(app, events.MouseMove, 8, 3)  # no button held: nothing
        mouse(app, events.MouseDown, 8, 3, button=1)
        mouse(app, events.MouseMove, 9, 3, button=1)
        mouse(app, events.MouseMove, 39, 11, button=1)  # onto the border's corner
        mouse(app, events.MouseUp, 39, 11, button=1)
        await pilot.pause()
        assert app.sent == [
            b"\x1b[<0;8;3M",
            b"\x1b[<32;9;3M",
            b"\x1b[<32;38;10M",  # the nearest cell of the child's screen
            b"\x1b[<0;38;10m",
        ]


async def test_an_exited_childs_screen_is_kept_through_zoom_and_resize() -> None:
    app = BorderedApp()
    async with app.run_test(size=(40, 12)) as pilot:
        pane = app.pane
        pane.focus()
        # A full-screen program's last frame: a box drawn by cursor addressing.
        pane.feed(
            b"\x1b[H\x1b[2J" + b"".join(b"\x1b[%d;1H|row %d|" % (r + 1, r) for r in range(10))
        )
        await pilot.pause(0.05)
        last = [pane.render_line(y).text.rstrip() for y in range(10)]
        pane.exited = True
        for size in ((20, 8), (80, 30), (40, 12)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.05)
            shown = [pane.render_line(y).text.rstrip() for y in range(min(10, pane.size.height))]
            assert shown == [line[: pane.size.width].rstrip() for line in last[: len(shown)]]
            # The pty (for the next child) still follows the pane.
            assert app.resized[-1] == (pane.size.height, pane.size.width)
        await pilot.resize_terminal(60, 20)
        await pilot.pause(0.05)
        pane.feed(b"\x1b[Hnew child")  # a new child's output: the emulator fits again
        await pilot.pause(0.05)
        assert pane.emulator.size == (18, 58) and not pane.exited
        assert pane.render_line(0).text.startswith("new child")


async def test_scrollback_survives_reflow_and_a_view_into_it_stays_inside() -> None:
    app = BorderedApp()
    async with app.run_test(size=(22, 12)) as pilot:
        pane = app.pane
        pane.feed(b"".join(b"%02d " % n + b"abcdefghij" * 3 + b"\r\n" for n in range(30)))
        await pilot.pause(0.05)
        pane.scroll_history(1000)  # to the oldest row: each line wraps onto two
        assert pane.scroll_back == pane.emulator.history_size > 30
        await pilot.resize_terminal(62, 12)  # unwrapped: fewer rows of history
        await pilot.pause(0.05)
        assert pane.scroll_back == pane.emulator.history_size < 30
        lines = [pane.render_line(y).text.rstrip() for y in range(pane.size.height)]
        assert lines == [f"{n:02d} " + "abcdefghij" * 3 for n in range(10)]
