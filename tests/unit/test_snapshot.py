"""A pane's snapshot (what the office sends an attaching client) restores its terminal
exactly: every cell of the screen and the history with its attributes, the cursor and
its shape, the modes; and it goes on behaving the same under the bytes that follow."""

from __future__ import annotations

import pytest

from hive_core.terminal.emulator import ALL, GhosttyEmulator, MouseTracking

ROWS, COLS = 6, 24

HISTORY = b"".join(b"line %d \x1b[1;3%dmbold\x1b[0m\r\n" % (i, i % 8) for i in range(40))

CASES = {
    "plain": b"hello\r\nworld",
    "history": HISTORY + b"$ ",
    "colours": (
        b"\x1b[38;5;208;48;5;17mA\x1b[38;2;1;2;3;48;2;250;128;0mB\x1b[0m"
        b"\x1b[4:3;9;53mC\x1b[0;7;2mD\x1b[0m\x1b[44m  \x1b[0m"
    ),
    "wide": "中文 ❤️ e\u0301 👩‍💻 end\r\n中".encode() * 3,
    "wrapped": b"x" * (COLS * 3 + 5),
    "alt screen": HISTORY + b"\x1b[?1049h\x1b[2J\x1b[3;5Hin vim\x1b[1;1H~",
    "mouse and keys": (b"\x1b[?1002h\x1b[?1006h\x1b[?2004h\x1b[?1h\x1b=\x1b[3 q\x1b[?25lprompt> "),
    "scroll region": HISTORY + b"\x1b[2;4r\x1b[4;1Hone\nTwo\nthree\x1b[6;2Hfoot",
    "title and tabs": b"\x1b]2;my title\x07\x1b[3g\x1b[5G\x1bH\r\ta\tb",
    "pending wrap": b"y" * COLS,
    "saved cursor": b"\x1b[3;5H\x1b7\x1b[1;1Hx",
    "line drawing": b"\x1b(0lqk\x1b[31m",
    "origin and insert": b"\x1b[2;5r\x1b[?6h\x1b[4h\x1b[1;1Habc\x1b[1;1HZ",
}


def emulator(data: bytes) -> GhosttyEmulator:
    e = GhosttyEmulator(ROWS, COLS)
    e.feed(data)
    return e


def state(e: GhosttyEmulator) -> object:
    return (
        e.size,
        [e.history_line(i) for i in range(e.history_size)],
        [e.soft_wrapped(i, history=True) for i in range(e.history_size)],
        [e.line(row) for row in range(e.size[0])],
        [e.soft_wrapped(row) for row in range(e.size[0])],
        e.cursor,
        e.modes,
        e.title,
    )


@pytest.mark.parametrize("data", CASES.values(), ids=CASES.keys())
def test_a_snapshot_restores_every_cell_the_cursor_and_the_modes(data: bytes) -> None:
    original = emulator(data)
    copy = GhosttyEmulator(3, 10)  # any size: the snapshot brings its own
    copy.restore(original.snapshot())
    assert state(copy) == state(original)
    assert copy.take_dirty() == ALL  # the client repaints all of it
    # The same bytes after it do the same to both: scrolling region, modes, charsets.
    more = b"after\x1b8lqk\r\n\x1b[1;31mred\x1b[0m\nnext\tt \x1b[?1049l\x1b[?1000lback"
    original.feed(more)
    copy.feed(more)
    assert state(copy) == state(original)


def test_the_primary_screen_and_its_history_survive_an_alternate_screen() -> None:
    original = emulator(CASES["alt screen"])
    copy = GhosttyEmulator(ROWS, COLS)
    copy.restore(original.snapshot())
    assert copy.modes.alt_screen and copy.history_size == 0
    copy.feed(b"\x1b[?1049l")  # vim quits: what was there before it comes back
    assert copy.history_size > 30
    assert copy.history_text()[0].startswith("line 0")
    assert "line 39" in "".join(run.text for run in copy.line(ROWS - 2))


def test_modes_come_back() -> None:
    copy = GhosttyEmulator()
    copy.restore(emulator(CASES["mouse and keys"]).snapshot())
    modes = copy.modes
    assert modes.mouse_tracking is MouseTracking.DRAG and modes.mouse_sgr
    assert modes.bracketed_paste and modes.app_cursor_keys and modes.app_keypad
    assert not copy.cursor.visible and copy.cursor.shape == 3


def test_a_restored_terminal_answers_queries_through_its_own_replies() -> None:
    copy = GhosttyEmulator()
    copy.restore(emulator(b"hi").snapshot())
    copy.feed(b"\x1b[6n")
    assert copy.take_replies() == b"\x1b[1;3R"


def test_bytes_that_are_not_a_snapshot_are_refused_and_change_nothing() -> None:
    e = emulator(b"kept")
    with pytest.raises(ValueError, match="snapshot"):
        e.restore(b"\x1b[2Jnot a snapshot")
    assert "".join(run.text for run in e.line(0)).rstrip() == "kept"
    e.restore(emulator(b"new").snapshot())  # the allowed path
    assert "".join(run.text for run in e.line(0)).rstrip() == "new"
