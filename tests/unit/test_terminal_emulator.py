"""The VT emulator adapter: what a pane needs from it, one escape sequence at a time."""

from __future__ import annotations

import pytest

from hive_core.terminal.emulator import (
    ALL,
    DEFAULT,
    Attrs,
    GhosttyEmulator,
    MouseTracking,
    Run,
    Underline,
)


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
    e = emu(
        b"\x1b[1mb\x1b[0;3mi\x1b[0;4mu\x1b[0;7mr\x1b[0;2md\x1b[0;9ms"
        b"\x1b[0;21mU\x1b[0;4:3mc\x1b[0;4:4m.\x1b[0;4:5m-\x1b[0;5mk\x1b[0;53mo\x1b[0;8mh\x1b[0mn",
        cols=30,
    )
    attrs = [a for _, a in cells(e.line(0))[:14]]
    assert attrs == [
        Attrs(bold=True),
        Attrs(italic=True),
        Attrs(underline=Underline.SINGLE),
        Attrs(reverse=True),
        Attrs(dim=True),
        Attrs(strikethrough=True),
        Attrs(underline=Underline.DOUBLE),
        Attrs(underline=Underline.CURLY),
        Attrs(underline=Underline.DOTTED),
        Attrs(underline=Underline.DASHED),
        Attrs(blink=True),
        Attrs(overline=True),
        Attrs(conceal=True),
        DEFAULT,
    ]


def test_the_16_colours_are_palette_indices_and_the_default_is_none() -> None:
    e = emu(b"\x1b[31;42mr\x1b[35mm\x1b[91;104mR\x1b[95mM\x1b[39;49md")
    assert [(a.fg, a.bg) for _, a in cells(e.line(0))[:5]] == [
        (1, 2),
        (5, 2),
        (9, 12),
        (13, 12),
        (None, None),
    ]


def test_every_row_covers_exactly_the_columns() -> None:
    e = emu("中文🚀x\r\ne\u0301\r\n\x1b[48;5;3m\x1b[K\r\n❤\ufe0f👍🏽🇯🇵".encode(), cols=9)
    for row in range(5):
        runs = e.line(row)
        assert sum(run.cells for run in runs) == 9, runs
        for run in runs:
            # One width for every character of a run; a cluster is one cell of its own.
            assert run.cells in (1, 2) if run.cluster else run.cells % len(run.text) == 0, run


def test_a_vs16_emoji_is_one_cell_as_in_tmux() -> None:
    """A heart with VS16 is one cell (wcwidth, as tmux 3.3 and the child's libc count
    it), kept whole as a cluster; an emoji with a skin tone is two wide cells."""
    e = emu("a❤\ufe0fb👍🏽c".encode())
    assert e.cursor.col == 8
    runs = e.line(0)
    assert runs[:5] == [
        Run("a", DEFAULT, 1),
        Run("❤\ufe0f", DEFAULT, 1, cluster=True),
        Run("b", DEFAULT, 1),
        Run("👍🏽", DEFAULT, 4),
        Run("c" + " " * 12, DEFAULT, 13),
    ]


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
        (9, MouseTracking.X10),
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
    assert e.cursor == (2, 4, True, 0)
    e.feed(b"\x1b[?25l")
    assert not e.cursor.visible
    e.feed(b"\x1b[?25h")
    assert e.cursor.visible


def test_cursor_shape_is_what_decscusr_asked() -> None:
    e = emu()
    assert e.cursor.shape == 0  # nothing asked: the terminal's own
    for shape in (1, 2, 3, 4, 5, 6, 0):
        e.feed(b"\x1b[%d q" % shape)
        assert e.cursor.shape == shape


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


def test_scrollback_holds_thousands_of_wide_rows() -> None:
    """The line limit, not the library's 10 kB default byte cap, decides at 80 columns;
    a full 160-column screen still keeps thousands of rows."""
    for cols, least in ((80, 9_000), (160, 5_000)):
        e = GhosttyEmulator(47, cols, scrollback=10_000)
        e.feed(b"".join(b"row %d\r\n" % n for n in range(12_000)))
        assert e.history_size >= least
        assert text(e.history_line(e.history_size - 1)).rstrip() == f"row {12_000 - 47}"


def test_scrollback_keeps_colours() -> None:
    e = emu(b"\x1b[38;5;99mviolet\x1b[0m\r\n\r\n\r\n", rows=2)
    runs = e.history_line(0)
    assert runs[0] == Run("violet", Attrs(fg=99), 6)


def test_reflow_on_resize_keeps_the_scrollback() -> None:
    long = b"".join(b"%02d" % n + b"x" * 28 + b"\r\n" for n in range(40))
    e = emu(long, rows=5, cols=40)
    before = [text(e.history_line(i)).rstrip() for i in range(e.history_size)]
    assert before[0].startswith("00") and len(before) == 36
    e.resize(5, 20)  # each line now wraps onto two rows
    narrow = [text(e.history_line(i)).rstrip() for i in range(e.history_size)]
    assert "".join(narrow).startswith("".join(before[:10]))
    e.resize(5, 40)
    after = [text(e.history_line(i)).rstrip() for i in range(e.history_size)]
    assert after[: len(before)] == before


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
