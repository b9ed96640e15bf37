"""The VT emulator adapter: what a pane needs from it, one escape sequence at a time."""

from __future__ import annotations

import pytest

from hive_tui.terminal.emulator import ALL, DEFAULT, Attrs, GhosttyEmulator, MouseTracking, Run


def emu(data: bytes = b"", rows: int = 5, cols: int = 20) -> GhosttyEmulator:
    e = GhosttyEmulator(rows, cols)
    e.feed(data)
    return e


def text(runs: list[Run]) -> str:
    return "".join(run.text for run in runs)


def cells(runs: list[Run]) -> list[tuple[str, Attrs]]:
    return [(ch, run.attrs) for run in runs for ch in run.text]


def test_256_colour_and_truecolor_sgr() -> None:
    e = emu(b"\x1b[38;5;208;48;5;17mA\x1b[38;2;1;2;3;48;2;250;128;0mB\x1b[0mC")
    (a, a_attrs), (b, b_attrs), (c, c_attrs) = cells(e.line(0))[:3]
    assert (a, a_attrs.fg, a_attrs.bg) == ("A", 208, 17)
    assert (b, b_attrs.fg, b_attrs.bg) == ("B", (1, 2, 3), (250, 128, 0))
    assert (c, c_attrs) == ("C", DEFAULT)


def test_text_attributes() -> None:
    e = emu(b"\x1b[1mb\x1b[0;3mi\x1b[0;4mu\x1b[0;7mr\x1b[0;2md\x1b[0;9ms")
    attrs = [a for _, a in cells(e.line(0))[:6]]
    assert attrs == [
        Attrs(bold=True),
        Attrs(italic=True),
        Attrs(underline=True),
        Attrs(reverse=True),
        Attrs(dim=True),
        Attrs(strikethrough=True),
    ]


def test_every_row_covers_exactly_the_columns() -> None:
    e = emu("中文🚀x\r\ne\u0301\r\n\x1b[48;5;3m\x1b[K".encode(), cols=9)
    for row in range(5):
        runs = e.line(row)
        # A wide character counts twice: its second cell is not repeated.
        width = sum(2 if ch in "中文🚀" else 1 for ch in text(runs) if ch != "\u0301")
        assert width == 9, runs


def test_wide_characters_and_emoji() -> None:
    e = emu("中文🚀x".encode())
    assert text(e.line(0)).startswith("中文🚀x")
    assert e.cursor.col == 7


def test_combining_characters_stay_in_their_cell() -> None:
    e = emu("e\u0301x".encode())
    assert text(e.line(0)).startswith("e\u0301x")
    assert e.cursor.col == 2


def test_zero_width_joiner_keeps_the_text_after_it() -> None:
    e = emu("👩\u200d💻 done".encode())
    line = text(e.line(0))
    assert "👩\u200d" in line and "💻" in line and "done" in line


def test_alternate_screen_switch_and_restore() -> None:
    e = emu(b"main screen\x1b[?1049h\x1b[Hfull screen app")
    assert e.modes.alt_screen
    assert text(e.line(0)).startswith("full screen app")
    e.feed(b"\x1b[?1049l")
    assert not e.modes.alt_screen
    assert text(e.line(0)).startswith("main screen")


def test_scroll_region_scrolls_only_inside_it() -> None:
    e = emu(b"top\r\n2\r\n3\r\n4\r\nbottom\x1b[2;4r\x1b[4;1H\nnew")
    rows = [text(e.line(r)).rstrip() for r in range(5)]
    assert rows == ["top", "3", "4", "new", "bottom"]


def test_dcs_sequences_are_swallowed() -> None:
    e = emu(b"a\x1bP1$r0m\x1b\\b\x1bPq#0;2;0;0;0#0~~@@\x1b\\c")
    assert text(e.line(0)).rstrip() == "abc"


def test_mode_flags() -> None:
    e = emu()
    assert e.modes.mouse_tracking is MouseTracking.OFF
    assert not (e.modes.bracketed_paste or e.modes.app_cursor_keys or e.modes.mouse_sgr)
    e.feed(b"\x1b[?2004h\x1b[?1h\x1b=")
    assert e.modes.bracketed_paste and e.modes.app_cursor_keys and e.modes.app_keypad
    for number, kind in (
        (9, MouseTracking.PRESS),
        (1000, MouseTracking.PRESS),
        (1002, MouseTracking.DRAG),
        (1003, MouseTracking.ANY),
    ):
        e.feed(b"\x1b[?%dh" % number)
        assert e.modes.mouse_tracking is kind
        e.feed(b"\x1b[?%dl" % number)
    e.feed(b"\x1b[?1006h")
    assert e.modes.mouse_sgr
    e.feed(b"\x1b[?2004l\x1b[?1l\x1b>")
    assert not (e.modes.bracketed_paste or e.modes.app_cursor_keys or e.modes.app_keypad)


def test_cursor_position_and_visibility() -> None:
    e = emu(b"\x1b[3;5H")
    assert e.cursor == (2, 4, True)
    e.feed(b"\x1b[?25l")
    assert not e.cursor.visible
    e.feed(b"\x1b[?25h")
    assert e.cursor.visible


def test_resize_changes_the_size_and_marks_everything_dirty() -> None:
    e = emu(b"hello")
    e.take_dirty()
    e.resize(10, 40)
    assert e.size == (10, 40)
    assert e.take_dirty() == ALL
    assert len(text(e.line(9))) == 40
    assert text(e.line(0)).startswith("hello")


def test_dirty_rows_are_only_the_changed_ones() -> None:
    e = emu(b"one\r\ntwo\r\nthree\x1b[2;1H")
    e.take_dirty()
    assert e.take_dirty() == set()
    e.feed(b"TWO")
    assert e.take_dirty() == {1}


def test_scrollback_keeps_lines_scrolled_off() -> None:
    e = emu(b"".join(b"line %d\r\n" % n for n in range(10)), rows=3)
    assert e.history_size == 8
    assert text(e.history_line(0)).rstrip() == "line 0"
    assert text(e.history_line(7)).rstrip() == "line 7"
    assert text(e.line(0)).rstrip() == "line 8"
    assert len(text(e.history_line(0))) == 20


def test_scrollback_keeps_colours() -> None:
    e = emu(b"\x1b[38;5;99mviolet\x1b[0m\r\n\r\n\r\n", rows=2)
    runs = e.history_line(0)
    assert runs[0] == Run("violet", Attrs(fg=99))


def test_title_from_osc_0_and_2() -> None:
    e = emu(b"\x1b]0;\xe2\x9c\xb3 Claude Code\x07")
    assert e.title == "✳ Claude Code"
    e.feed(b"\x1b]2;other\x1b\\")
    assert e.title == "other"


def test_replies_to_queries_go_back_to_the_child() -> None:
    e = emu(b"\x1b[3;4H\x1b[6n")
    assert e.take_replies() == b"\x1b[3;4R"
    assert e.take_replies() == b""


@pytest.mark.parametrize("row", [-1, 5])
def test_rows_outside_the_screen_are_an_error(row: int) -> None:
    with pytest.raises(IndexError):
        emu().line(row)
