"""Copy mode's pure part (hive_tui/terminal/copy_mode.py): moving the cursor, searching
both ways with wrap, selecting across lines, wide characters, and the lines read from
the real emulator."""

from __future__ import annotations

from hive_core.terminal.emulator import GhosttyEmulator
from hive_tui.terminal.copy_mode import (
    CopyState,
    FrozenLines,
    Line,
    Lines,
    Point,
    Row,
    cells_of,
    enter,
    find,
    line_of,
    position,
    press,
    resized,
    scroll,
    selected_text,
)

WIDTH = 20


def no_history(index: int) -> Row:
    raise AssertionError(f"no scrollback to read: {index}")


def plain(rows: list[Line]) -> FrozenLines:
    """Lines that are all screen (no scrollback) and none wrapped."""
    return FrozenLines(0, no_history, [(line, False) for line in rows])


def lines_of(*texts: str, width: int = WIDTH) -> FrozenLines:
    return plain([cells_of(text, width) for text in texts])


def keys(state: CopyState, lines: Lines, *pressed: str) -> CopyState:
    """Presses keys as Textual names them (a printable key is its character)."""
    names = {"/": "slash", "?": "question_mark", "$": "dollar_sign", " ": "space"}
    for key in pressed:
        step = press(state, names.get(key, key), key if len(key) == 1 else None, lines)
        assert step.state is not None, key
        state = step.state
    return state


TEXT = lines_of(
    "alpha beta gamma",  # 0
    "",  # 1
    "  delta-epsilon zeta",  # 2
    "eta theta",  # 3
    "BETA beta",  # 4
)


def test_arrows_and_vi_keys_move_inside_the_lines() -> None:
    state = enter(TEXT, height=3, cursor=Point(0, 0), top=0)
    assert keys(state, TEXT, "l", "l", "right").cursor == Point(0, 3)
    assert keys(state, TEXT, "h", "left", "k", "up").cursor == Point(0, 0)  # stops at the corner
    down = keys(state, TEXT, "j", "down", "j")
    assert down.cursor == Point(3, 0) and down.top == 1  # the view follows the cursor
    assert keys(down, TEXT, "j", "j", "j").cursor == Point(4, 0)
    assert keys(state, TEXT, "$").cursor == Point(0, 15)  # the last character, not the blanks
    assert keys(state, TEXT, "$", "0").cursor == Point(0, 0)
    assert keys(state, TEXT, "j", "j", "^").cursor == Point(2, 2)
    bottom = keys(state, TEXT, "G")
    assert bottom.cursor == Point(4, 0) and bottom.top == 2
    assert keys(bottom, TEXT, "g").cursor == Point(0, 0) and keys(bottom, TEXT, "g").top == 0


def test_pages_move_the_view_and_the_cursor_together() -> None:
    many = lines_of(*(f"line {n}" for n in range(100)))
    state = enter(many, height=10, cursor=Point(99, 0))
    assert state.top == 90 and position(state, many) == "[0/90]"
    up = keys(state, many, "pageup")
    assert (up.top, up.cursor.line, position(up, many)) == (80, 89, "[10/90]")
    assert keys(up, many, "ctrl+u").top == 75
    assert keys(up, many, "pagedown", "pagedown").top == 90  # never below the bottom
    top = keys(state, many, *["ctrl+b"] * 20)
    assert top.top == 0 and top.cursor.line == 0 and position(top, many) == "[90/90]"


def test_the_wheel_scrolls_the_view_and_keeps_the_cursor_in_it() -> None:
    many = lines_of(*(f"line {n}" for n in range(100)))
    state = enter(many, height=10, cursor=Point(95, 3))
    up = scroll(state, many, 3)
    assert (up.top, up.cursor) == (87, Point(95, 3))  # still in view: it stays
    far = scroll(up, many, 20)
    assert (far.top, far.cursor) == (67, Point(76, 3))  # dragged along at the bottom
    assert scroll(far, many, -500).top == 90 and scroll(far, many, 500).top == 0
    assert keys(state, many, "shift+pageup").top == 80


def test_words_forward_and_back_across_lines_and_punctuation() -> None:
    state = enter(TEXT, height=5, cursor=Point(0, 0), top=0)
    stops = []
    for _ in range(7):
        state = keys(state, TEXT, "w")
        stops.append(tuple(state.cursor))
    # beta, gamma, (blank line skipped) delta, "-", epsilon, zeta, eta
    assert stops == [(0, 6), (0, 11), (2, 2), (2, 7), (2, 8), (2, 16), (3, 0)]
    back = []
    for _ in range(4):
        state = keys(state, TEXT, "b")
        back.append(tuple(state.cursor))
    assert back == [(2, 16), (2, 8), (2, 7), (2, 2)]
    assert keys(state, TEXT, "b", "b", "b", "b").cursor == Point(0, 0)


def test_search_forward_and_backward_wraps_around_and_repeats() -> None:
    state = enter(TEXT, height=5, cursor=Point(0, 0), top=0)
    found = keys(state, TEXT, "/", "b", "e", "t", "a", "enter")
    # Lowercase: any case. The first after the cursor, then on down, then wrapping.
    assert found.cursor == Point(0, 6) and found.search == "beta" and found.prompt is None
    assert keys(found, TEXT, "n").cursor == Point(4, 0)  # BETA
    assert keys(found, TEXT, "n", "n").cursor == Point(4, 5)
    wrapped = keys(found, TEXT, "n", "n", "n")
    assert wrapped.cursor == Point(0, 6) and "hit bottom" in wrapped.message
    # N goes the other way, wrapping from the top to the bottom.
    back = keys(found, TEXT, "N")
    assert back.cursor == Point(4, 5) and "hit top" in back.message
    # ? searches backward; n then keeps going backward.
    up = keys(enter(TEXT, 5, Point(3, 0), 0), TEXT, "?", "e", "t", "a", "enter")
    assert up.cursor == Point(2, 17)  # zeta
    assert keys(up, TEXT, "n").cursor == Point(0, 7)  # beta
    round_ = keys(up, TEXT, "n", "n")
    assert round_.cursor == Point(4, 6) and "hit top" in round_.message
    assert keys(up, TEXT, "N").cursor == Point(3, 0)
    # A capital letter makes the case matter; nothing found is said and nothing moves.
    assert keys(state, TEXT, "/", "B", "E", "T", "A", "enter").cursor == Point(4, 0)
    missing = keys(state, TEXT, "/", "o", "m", "e", "g", "a", "enter")
    assert missing.cursor == Point(0, 0) and missing.message == "not found: omega"


def test_search_prompt_edits_and_cancels_and_a_lone_match_finds_itself() -> None:
    state = enter(TEXT, height=5, cursor=Point(3, 4), top=0)
    typed = keys(state, TEXT, "/", "t", "x", "backspace", "h")
    assert typed.prompt == "th"
    assert keys(typed, TEXT, "escape").prompt is None
    assert keys(typed, TEXT, "escape").cursor == Point(3, 4)  # esc leaves the prompt only
    # The only match is under the cursor: a full turn comes back to it.
    assert find(TEXT, "theta", Point(3, 4), True) == (Point(3, 4), True)
    assert find(TEXT, "theta", Point(3, 4), False) == (Point(3, 4), True)
    assert find(TEXT, "", Point(0, 0), True) is None


def test_selection_across_lines_copies_and_leaves() -> None:
    state = enter(TEXT, height=5, cursor=Point(0, 6), top=0)
    no_selection = press(state, "enter", None, TEXT)
    assert no_selection.state is not None and no_selection.copied is None  # nothing selected
    selecting = keys(state, TEXT, " ", "j", "j", "w")
    step = press(selecting, "enter", None, TEXT)
    # Both ends included, trailing blanks dropped, lines joined by newlines.
    assert step.state is None
    assert step.copied == "beta gamma\n\n  delta-"
    # Selected backward (cursor before the anchor) gives the same span the other way.
    backward = keys(enter(TEXT, 5, Point(2, 7), 0), TEXT, "v", "k", "k", "b")
    assert press(backward, "y", "y", TEXT).copied == "beta gamma\n\n  delta-"
    # q and esc leave without copying.
    for key, char in (("q", "q"), ("escape", None)):
        assert press(selecting, key, char, TEXT) == (None, None)


def test_wide_characters_are_selected_and_moved_over_whole() -> None:
    emu = GhosttyEmulator(rows=3, cols=12)
    emu.feed("ab中文cd\r\n😀 ok".encode())
    lines = plain([line_of(emu.line(row)) for row in range(3)])
    assert lines[0][:8] == ("a", "b", "中", "", "文", "", "c", "d")
    assert all(len(lines[row]) == 12 for row in range(3))
    state = enter(lines, height=3, cursor=Point(0, 0), top=0)
    assert [keys(state, lines, *["l"] * n).cursor.col for n in range(1, 6)] == [1, 2, 4, 6, 7]
    # A cursor on the right half of a wide character selects all of it.
    half = CopyState(cursor=Point(0, 3), top=0, height=3, anchor=Point(0, 5))
    assert selected_text(half, lines) == "中文"
    assert keys(half, lines, "h").cursor == Point(0, 1)
    found = find(lines, "文c", Point(0, 0), True)
    assert found == (Point(0, 4), False)
    emoji = keys(enter(lines, 3, Point(1, 0), 0), lines, "v", "w")
    assert press(emoji, "y", "y", lines).copied == "😀 o"


def test_frozen_lines_read_the_scrollback_once_and_keep_the_screen() -> None:
    emu = GhosttyEmulator(rows=4, cols=20)
    emu.feed(b"".join(b"row %d\r\n" % n for n in range(10)))
    reads: list[int] = []

    def read(index: int) -> Row:
        reads.append(index)
        return line_of(emu.history_line(index)), emu.soft_wrapped(index, history=True)

    history = emu.history_size
    frozen = FrozenLines(history, read, [(line_of(emu.line(r)), False) for r in range(4)])
    assert history == 7 and len(frozen) == 11
    assert "".join(frozen[0]).rstrip() == "row 0" and "".join(frozen[9]).rstrip() == "row 9"
    assert "".join(frozen[0]).rstrip() == "row 0" and reads == [0]
    emu.feed(b"later\r\n" * 5)  # output meanwhile: parsed, not seen
    assert "".join(frozen[9]).rstrip() == "row 9" and len(frozen) == 11
    assert find(frozen, "row 3", Point(10, 0), True) == (Point(3, 0), True)
    assert reads == [0, 1, 2, 3]  # without the text, every row on the way is read


def test_a_search_reads_the_cells_of_only_the_rows_that_hold_the_pattern() -> None:
    emu = GhosttyEmulator(rows=4, cols=12)
    emu.feed(b"".join(b"row %d\r\n" % n for n in range(30)) + "中 wide row ok\r\n".encode())
    emu.feed(b"end 1\r\nend 2\r\nend 3\r\nend 4\r\n")
    reads: list[int] = []

    def read(index: int) -> Row:
        reads.append(index)
        return line_of(emu.history_line(index)), emu.soft_wrapped(index, history=True)

    history = emu.history_size
    text = emu.history_text()
    assert (
        len(text) == history and text[3] == "row 3" and text[-3:] == ["中 wide row", "ok", "end 1"]
    )
    screen = [(line_of(emu.line(r)), emu.soft_wrapped(r)) for r in range(4)]
    frozen = FrozenLines(history, read, screen, text)
    at = Point(len(frozen) - 1, 0)
    assert find(frozen, "ROW 1", at, False) is None and reads == []  # the case matters
    assert find(frozen, "row 1", at, False) == (Point(19, 0), False) and reads == [19]
    # Found after the wide character (a column of cells, not of characters), and a
    # pattern whose trailing blank only the cells hold.
    assert find(frozen, "wide row", at, False) == (Point(history - 3, 3), False)
    assert find(frozen, "row 9 ", at, False) == (Point(9, 0), False)
    assert reads == [19, history - 3, 9]
    # Text that does not match the scrollback row for row is not used.
    assert FrozenLines(history, read, screen, text[1:]).quick_text(0) is None
    assert frozen.quick_text(0) == "row 0" and frozen.quick_text(9) is None  # read: cells


def test_a_resize_keeps_the_cursor_and_view_from_the_bottom() -> None:
    old = lines_of(*(f"l{n}" for n in range(50)))
    state = keys(enter(old, 10, Point(49, 0)), old, "pageup", "v", "k")
    assert (state.cursor.line, state.top, state.anchor) == (38, 30, Point(39, 0))
    new = lines_of(*(f"l{n}" for n in range(60)), width=5)  # reflowed: more, narrower
    after = resized(state, old, new, 20)
    assert (after.cursor.line, after.anchor, after.height) == (48, Point(49, 0), 20)
    assert after.top == 30 and position(after, new) == "[10/40]"
    assert selected_text(after, new) == "l48\nl"  # the anchor's cell, not its line


def test_a_wrapped_line_is_copied_as_one_and_new_lines_stay() -> None:
    emu = GhosttyEmulator(rows=6, cols=10)
    emu.feed(b"0123456789abcdefghij-end  \r\nnext line\r\n")
    rows: list[Row] = [(line_of(emu.line(r)), emu.soft_wrapped(r)) for r in range(6)]
    assert [wraps for _, wraps in rows[:4]] == [True, True, False, False]
    lines = FrozenLines(0, no_history, rows)
    state = keys(enter(lines, 6, Point(0, 2), 0), lines, "v", "j", "j", "j", "$")
    assert press(state, "y", "y", lines).copied == "23456789abcdefghij-end\nnext line"
