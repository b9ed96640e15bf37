"""The VT emulator behind a terminal pane: bytes in, screen rows out as plain data.

    emu = GhosttyEmulator(rows=24, cols=80)
    emu.feed(b"\\x1b[1;38;5;208mhi")      # whatever the child wrote to its pty
    emu.take_dirty()                      # {0}, or ALL after a scroll, clear or resize
    emu.line(0)                           # [Run("hi", Attrs(fg=208, bold=True), 2), Run("   ...", DEFAULT, 78)]
    emu.take_replies()                    # answers to the child's queries, for the pty

`Emulator` is the seam: the pane only uses that Protocol, so another engine can replace
libghostty-vt. Nothing here knows Textual or Rich.

Why libghostty-vt (through pyghostty, a cffi binding): bench/bench_pane.py measured it
against pyte and pyavt and it is the only one that gets every case the pane needs right
(see pyproject.toml). Each cffi call costs about a microsecond, so rows are read as one
block of packed 64-bit cells per call and decoded here; styles and grapheme clusters are
fetched only where a run changes or a cell holds more than one code point.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, NamedTuple, Protocol

from hive_core.terminal.ghostty_abi import ffi, lib

Color = int | tuple[int, int, int] | None
"""None (the terminal's default), a 0-255 palette index, or 24-bit (r, g, b)."""


class Underline(enum.IntEnum):
    """SGR 4:n, as libghostty-vt numbers them."""

    NONE = 0
    SINGLE = 1
    DOUBLE = 2
    CURLY = 3
    DOTTED = 4
    DASHED = 5


class Attrs(NamedTuple):
    fg: Color = None
    bg: Color = None
    bold: bool = False
    italic: bool = False
    underline: Underline = Underline.NONE
    reverse: bool = False
    dim: bool = False
    strikethrough: bool = False
    blink: bool = False
    overline: bool = False
    conceal: bool = False


DEFAULT = Attrs()


class Run(NamedTuple):
    """`cells` cells of one look. `text` holds one character per character cell (a wide
    character's second cell is not repeated), all of one width: `cells // len(text)`.
    A cell holding more than one code point (a grapheme cluster) is a run of its own,
    marked `cluster`. A renderer can so lay a row out from the emulator's own cells,
    whatever its idea of a string's width."""

    text: str
    attrs: Attrs
    cells: int
    cluster: bool = False


class Cursor(NamedTuple):
    row: int
    col: int
    visible: bool
    shape: int = 0
    """What the child asked for with DECSCUSR: 1-6 (block, underline, bar; odd numbers
    blink), 0 for the terminal's own default."""


class MouseTracking(enum.Enum):
    OFF = "off"
    X10 = "x10"  # 9: button presses only, without modifiers
    PRESS = "press"  # 1000: presses and releases
    DRAG = "drag"  # 1002: also motion while a button is held
    ANY = "any"  # 1003: all motion


class Modes(NamedTuple):
    alt_screen: bool = False
    bracketed_paste: bool = False
    mouse_tracking: MouseTracking = MouseTracking.OFF
    mouse_sgr: bool = False
    app_cursor_keys: bool = False
    app_keypad: bool = False
    # The kitty keyboard protocol's flags the child pushed (CSI > flags u); 0: legacy keys.
    kitty_flags: int = 0


ALL: Literal["all"] = "all"
Dirty = set[int] | Literal["all"]


class Emulator(Protocol):
    def feed(self, data: bytes) -> None: ...
    def resize(self, rows: int, cols: int) -> None: ...
    @property
    def size(self) -> tuple[int, int]:
        """(rows, cols)."""
        ...

    def take_dirty(self) -> Dirty:
        """Screen rows changed since the last call, or ALL."""
        ...

    def line(self, row: int) -> list[Run]:
        """Screen row `row` (0 = top), covering exactly `cols` cells."""
        ...

    @property
    def cursor(self) -> Cursor: ...
    @property
    def modes(self) -> Modes: ...
    @property
    def history_size(self) -> int: ...
    def history_line(self, index: int) -> list[Run]:
        """Scrollback row `index`: 0 is the oldest, history_size - 1 the one just above
        the screen."""
        ...

    def soft_wrapped(self, row: int, *, history: bool = False) -> bool:
        """Screen row `row` (scrollback row, if `history`) goes on in the next row: the
        child wrote past its end, it did not start a new line (copy mode joins them)."""
        ...

    def history_text(self) -> list[str]:
        """Every scrollback row as plain text, trailing blanks dropped, oldest first: what
        copy mode searches, read in one call."""
        ...

    def screen_text(self) -> list[str]:
        """The screen as plain text lines, soft-wrapped rows joined."""
        ...

    @property
    def title(self) -> str: ...
    def snapshot(self) -> bytes:
        """The whole state, for `restore` (an office sends it to an attaching client)."""
        ...

    def restore(self, snapshot: bytes) -> None: ...
    def take_replies(self) -> bytes:
        """What the terminal answered to the child's queries (device attributes, cursor
        reports, ...) since the last call: write it to the pty."""
        ...


# A libghostty-vt cell is a packed u64; these are its fields as pyghostty 0.1.3 ships
# it. `_check_cell_layout` proves them against the library's own getters on first use.
_TAG_MASK = 0x3
_CP_SHIFT, _CP_MASK = 2, 0x1FFFFF
_STYLE_SHIFT, _STYLE_MASK = 26, 0xFFFF
_WIDE_SHIFT, _WIDE_MASK = 42, 0x3
_TAG_GRAPHEME = lib.GHOSTTY_CELL_CONTENT_CODEPOINT_GRAPHEME
_TAG_BG_PALETTE = lib.GHOSTTY_CELL_CONTENT_BG_COLOR_PALETTE
_WIDE = lib.GHOSTTY_CELL_WIDE_WIDE
_WIDE_TAIL = lib.GHOSTTY_CELL_WIDE_SPACER_TAIL
_WIDE_HEAD = lib.GHOSTTY_CELL_WIDE_SPACER_HEAD
# Run kinds: runs are split where the kind changes, and a cluster is always alone.
_NARROW, _WIDE_CHAR, _CLUSTER = 0, 1, 2
_GRAPHEME_MAX = 32

_MODE_ALT = (1049, 1047, 47)
_MODE_BRACKETED_PASTE = 2004
_MODE_SGR_MOUSE = 1006
_MODE_APP_CURSOR = 1
_MODE_APP_KEYPAD = 66
_MOUSE_MODES = ((1003, MouseTracking.ANY), (1002, MouseTracking.DRAG), (1000, MouseTracking.PRESS))
_MOUSE_X10 = 9
# The emulator's default cursor is one DECSCUSR cannot ask for (a hollow block), so a
# cursor that has it is the terminal's default: DECSCUSR 0, or nothing asked.
_DEFAULT_CURSOR = lib.GHOSTTY_RENDER_STATE_CURSOR_VISUAL_STYLE_BLOCK_HOLLOW
_DECSCUSR = {
    (lib.GHOSTTY_RENDER_STATE_CURSOR_VISUAL_STYLE_BLOCK, True): 1,
    (lib.GHOSTTY_RENDER_STATE_CURSOR_VISUAL_STYLE_BLOCK, False): 2,
    (lib.GHOSTTY_RENDER_STATE_CURSOR_VISUAL_STYLE_UNDERLINE, True): 3,
    (lib.GHOSTTY_RENDER_STATE_CURSOR_VISUAL_STYLE_UNDERLINE, False): 4,
    (lib.GHOSTTY_RENDER_STATE_CURSOR_VISUAL_STYLE_BAR, True): 5,
    (lib.GHOSTTY_RENDER_STATE_CURSOR_VISUAL_STYLE_BAR, False): 6,
}

_layout_checked = False


def _check(result: int, what: str) -> None:
    if result != lib.GHOSTTY_SUCCESS:
        raise RuntimeError(f"libghostty-vt: {what} failed ({result})")


# One pane's history in memory: 10,000 rows at 80 columns, ~5,700 at 160.
SCROLLBACK_BYTES = 8 << 20


class GhosttyEmulator:
    """libghostty-vt behind the `Emulator` interface."""

    def __init__(self, rows: int = 24, cols: int = 80, scrollback: int = 10_000) -> None:
        handle = ffi.new("GhosttyTerminal*")
        _check(lib.ghostty_terminal_new(ffi.NULL, handle, cols, rows), "terminal_new")
        self._t = handle[0]
        self._scrollback = scrollback
        self._replies: list[bytes] = []
        # Kept referenced: cffi frees a callback whose Python object is collected.
        self._reply_cb = ffi.callback(
            "GhosttyTerminalWritePtyFn",
            lambda _t, _u, data, n: self._replies.append(ffi.buffer(data, n)[:]),
        )
        self._configure()

        self._rs = self._new_render_state()
        rows_it = ffi.new("GhosttyRenderStateRowIterator*")
        _check(lib.ghostty_render_state_row_iterator_new(ffi.NULL, rows_it), "row_iterator_new")
        self._rows_it = rows_it
        cells = ffi.new("GhosttyRenderStateRowCells*")
        _check(lib.ghostty_render_state_row_cells_new(ffi.NULL, cells), "row_cells_new")
        self._cells = cells
        self._view = ffi.new("GhosttyCellsView*")
        self._style = ffi.new("GhosttyStyle*")
        self._style.size = ffi.sizeof("GhosttyStyle")
        self._grapheme = ffi.new(f"uint32_t[{_GRAPHEME_MAX}]")
        self._n = ffi.new("size_t*")
        self._u8 = ffi.new("uint8_t*")
        self._u16 = ffi.new("uint16_t*")
        self._u32 = ffi.new("uint32_t*")
        self._bool = ffi.new("bool*")
        self._dirty_flag = ffi.new("GhosttyRenderStateDirty*")
        self._cursor_style = ffi.new("GhosttyRenderStateCursorVisualStyle*")
        self._false = ffi.new("bool*", False)
        self._clean = ffi.new("GhosttyRenderStateDirty*", lib.GHOSTTY_RENDER_STATE_DIRTY_FALSE)
        self._mode = ffi.new("GhosttyTerminalModeConfig*")
        self._ref = ffi.new("GhosttyGridRef*")
        self._ref.size = ffi.sizeof("GhosttyGridRef")
        self._point = ffi.new("GhosttyPointS*")
        self._point.tag = lib.GHOSTTY_POINT_TAG_HISTORY
        self._cell = ffi.new("GhosttyCell*")
        self._rgb = ffi.new("GhosttyColorRgb*")
        self._title = ffi.new("GhosttyString*")
        # The C function takes a tagged union by value, which cffi's ABI mode cannot
        # pass; pyghostty declares a layout-identical struct for it.
        self._grid_ref = ffi.cast(
            "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyGridRef*)",
            ffi.addressof(lib, "ghostty_terminal_grid_ref"),
        )
        # The render state is a snapshot: refreshed lazily after a feed, not per chunk.
        self._stale = True
        self._next_row = 0
        self._resized = True
        global _layout_checked
        if not _layout_checked:
            _check_cell_layout()
            _layout_checked = True

    @staticmethod
    def _new_render_state() -> Any:
        state = ffi.new("GhosttyRenderState*")
        _check(lib.ghostty_render_state_new(ffi.NULL, state), "render_state_new")
        return state[0]

    def __del__(self) -> None:
        if getattr(self, "_t", None) is not None:
            lib.ghostty_render_state_row_cells_free(self._cells[0])
            lib.ghostty_render_state_row_iterator_free(self._rows_it[0])
            lib.ghostty_render_state_free(self._rs)
            lib.ghostty_terminal_free(self._t)
            self._t = None

    def _configure(self) -> None:
        """What this program sets on a terminal (a snapshot does not carry it)."""
        self._set(
            lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_LINES, ffi.new("size_t*", self._scrollback)
        )
        # The library also caps history by bytes, at 10 kB by default: ~450 rows at 160
        # columns whatever the line limit says. About 1.3 kB a row at 160 columns.
        self._set(
            lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, ffi.new("size_t*", SCROLLBACK_BYTES)
        )
        self._set(
            lib.GHOSTTY_TERMINAL_OPT_DEFAULT_CURSOR_STYLE,
            ffi.new("GhosttyTerminalCursorStyle*", lib.GHOSTTY_TERMINAL_CURSOR_STYLE_BLOCK_HOLLOW),
        )
        self._set(lib.GHOSTTY_TERMINAL_OPT_WRITE_PTY, self._reply_cb)

    def _set(self, option: int, value: Any) -> None:
        _check(lib.ghostty_terminal_set(self._t, option, value), f"terminal_set {option}")

    def _get(self, key: int, out: Any) -> Any:
        _check(lib.ghostty_terminal_get(self._t, key, out), f"terminal_get {key}")
        return out[0]

    def _mode_on(self, number: int) -> bool:
        self._mode.mode = number
        _check(
            lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_MODE, self._mode), "mode"
        )
        return bool(self._mode.value)

    # --- input -----------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        lib.ghostty_terminal_vt_write(self._t, data, len(data))
        self._stale = True

    def resize(self, rows: int, cols: int) -> None:
        if (rows, cols) == self.size:
            return
        _check(lib.ghostty_terminal_resize(self._t, cols, rows, 8, 16), "resize")
        self._stale = True
        self._resized = True

    def take_replies(self) -> bytes:
        replies, self._replies = b"".join(self._replies), []
        return replies

    # --- the whole state, for a client attaching to the office -----------------------

    def snapshot(self) -> bytes:
        """Everything this terminal holds, in libghostty-vt's own snapshot encoding:
        both screens (the primary one with its history also while the alternate one is
        shown), the cursor and its shape, the modes, the scrolling region, tab stops,
        charsets, the palette and the title. `restore` gives it back exactly."""
        ptr = ffi.new("uint8_t**")
        _check(lib.ghostty_snapshot_encode_alloc(self._t, ffi.NULL, ptr, self._n), "snapshot")
        try:
            return ffi.buffer(ptr[0], self._n[0])[:]
        finally:
            lib.ghostty_free(ffi.NULL, ptr[0], self._n[0])

    def restore(self, snapshot: bytes) -> None:
        """Become the terminal `snapshot` describes (its size included); what this one
        held is dropped and every row is dirty. Raises ValueError for bytes that are not
        a snapshot this library version can read."""
        decoder = ffi.new("GhosttySnapshotDecoder*")
        if lib.ghostty_snapshot_decoder_new_buf(ffi.NULL, decoder, snapshot, len(snapshot)):
            raise ValueError("not a terminal snapshot")
        handle = ffi.new("GhosttyTerminal*")
        try:
            result = lib.ghostty_snapshot_decoder_decode(decoder[0], handle)
        finally:
            lib.ghostty_snapshot_decoder_free(decoder[0])
        if result != lib.GHOSTTY_SUCCESS:
            raise ValueError(f"a terminal snapshot libghostty-vt cannot read ({result})")
        lib.ghostty_terminal_free(self._t)
        self._t = handle[0]
        # A render state updates incrementally: it rebuilds every row only when the size,
        # the screen or the viewport's first page differs from what it last read, and the
        # page is compared by address. A decoded terminal of the same size whose first
        # page was allocated where the freed one's was looked unchanged, and the pane kept
        # drawing the old screen (a recorder's READY, lost in 1 of ~4 full test runs).
        # A fresh render state has nothing to compare: its first update reads every row.
        lib.ghostty_render_state_free(self._rs)
        self._rs = self._new_render_state()
        self._configure()
        self._replies.clear()
        self._stale = True
        self._resized = True

    # --- state -----------------------------------------------------------------------

    @property
    def size(self) -> tuple[int, int]:
        rows = self._get(lib.GHOSTTY_TERMINAL_DATA_ROWS, self._u16)
        return rows, self._get(lib.GHOSTTY_TERMINAL_DATA_COLS, self._u16)

    @property
    def cursor(self) -> Cursor:
        col = self._get(lib.GHOSTTY_TERMINAL_DATA_CURSOR_X, self._u16)
        row = self._get(lib.GHOSTTY_TERMINAL_DATA_CURSOR_Y, self._u16)
        visible = bool(self._get(lib.GHOSTTY_TERMINAL_DATA_CURSOR_VISIBLE, self._bool))
        self._sync()
        _check(
            lib.ghostty_render_state_get(
                self._rs, lib.GHOSTTY_RENDER_STATE_DATA_CURSOR_VISUAL_STYLE, self._cursor_style
            ),
            "cursor style",
        )
        style = self._cursor_style[0]
        if style == _DEFAULT_CURSOR:
            return Cursor(row, col, visible, 0)
        _check(
            lib.ghostty_render_state_get(
                self._rs, lib.GHOSTTY_RENDER_STATE_DATA_CURSOR_BLINKING, self._bool
            ),
            "cursor blinking",
        )
        return Cursor(row, col, visible, _DECSCUSR.get((style, bool(self._bool[0])), 0))

    @property
    def modes(self) -> Modes:
        tracking = MouseTracking.X10 if self._mode_on(_MOUSE_X10) else MouseTracking.OFF
        for number, kind in _MOUSE_MODES:
            if self._mode_on(number):
                tracking = kind
                break
        return Modes(
            alt_screen=any(self._mode_on(m) for m in _MODE_ALT),
            bracketed_paste=self._mode_on(_MODE_BRACKETED_PASTE),
            mouse_tracking=tracking,
            mouse_sgr=self._mode_on(_MODE_SGR_MOUSE),
            app_cursor_keys=self._mode_on(_MODE_APP_CURSOR),
            app_keypad=self._mode_on(_MODE_APP_KEYPAD),
            kitty_flags=int(self._get(lib.GHOSTTY_TERMINAL_DATA_KITTY_KEYBOARD_FLAGS, self._u8)),
        )

    @property
    def title(self) -> str:
        title = self._get(lib.GHOSTTY_TERMINAL_DATA_TITLE, self._title)
        return ffi.buffer(title.ptr, title.len)[:].decode(errors="replace") if title.len else ""

    @property
    def history_size(self) -> int:
        return int(self._get(lib.GHOSTTY_TERMINAL_DATA_SCROLLBACK_ROWS, self._n))

    # --- rows ------------------------------------------------------------------------

    def _sync(self) -> None:
        if self._stale:
            _check(lib.ghostty_render_state_update(self._rs, self._t), "render_state_update")
            self._stale = False
            self._next_row = -1  # the iterator must be fetched again

    def take_dirty(self) -> Dirty:
        self._sync()
        _check(
            lib.ghostty_render_state_get(
                self._rs, lib.GHOSTTY_RENDER_STATE_DATA_DIRTY, self._dirty_flag
            ),
            "dirty",
        )
        flag = self._dirty_flag[0]
        rows: set[int] = set()
        if flag != lib.GHOSTTY_RENDER_STATE_DIRTY_FALSE:
            it = self._rows_it[0]
            self._fetch_rows()
            y = 0
            while lib.ghostty_render_state_row_iterator_next(it):
                lib.ghostty_render_state_row_get(
                    it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_DIRTY, self._bool
                )
                if self._bool[0]:
                    rows.add(y)
                    lib.ghostty_render_state_row_set(
                        it, lib.GHOSTTY_RENDER_STATE_ROW_OPTION_DIRTY, self._false
                    )
                y += 1
            self._next_row = -1
            lib.ghostty_render_state_set(
                self._rs, lib.GHOSTTY_RENDER_STATE_OPTION_DIRTY, self._clean
            )
        everything = self._resized or flag == lib.GHOSTTY_RENDER_STATE_DIRTY_FULL
        self._resized = False
        return ALL if everything else rows

    def _fetch_rows(self) -> None:
        _check(
            lib.ghostty_render_state_get(
                self._rs, lib.GHOSTTY_RENDER_STATE_DATA_ROW_ITERATOR, self._rows_it
            ),
            "row_iterator",
        )
        self._next_row = 0

    def line(self, row: int) -> list[Run]:
        if row < 0:
            raise IndexError(row)
        self._sync()
        # Rows are read top to bottom in a repaint; the iterator only goes forward.
        if self._next_row < 0 or self._next_row > row:
            self._fetch_rows()
        it = self._rows_it[0]
        while self._next_row <= row:
            if not lib.ghostty_render_state_row_iterator_next(it):
                raise IndexError(row)
            self._next_row += 1
        _check(
            lib.ghostty_render_state_row_get(
                it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS_RAW, self._view
            ),
            "cells_raw",
        )
        raw = ffi.unpack(self._view.ptr, self._view.len)
        _check(
            lib.ghostty_render_state_row_get(
                it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS, self._cells
            ),
            "cells",
        )
        cells = self._cells[0]

        def style_at(x: int) -> Any:
            lib.ghostty_render_state_row_cells_select(cells, x)
            lib.ghostty_render_state_row_cells_get(
                cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_STYLE, self._style
            )
            return self._style

        def grapheme_at(x: int) -> str:
            lib.ghostty_render_state_row_cells_select(cells, x)
            n = self._u32
            lib.ghostty_render_state_row_cells_get(
                cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_LEN, n
            )
            if n[0] > _GRAPHEME_MAX:
                return ""
            lib.ghostty_render_state_row_cells_get(
                cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_BUF, self._grapheme
            )
            return "".join(map(chr, ffi.unpack(self._grapheme, n[0])))

        return self._runs(raw, style_at, grapheme_at)

    def history_line(self, index: int) -> list[Run]:
        # Scrollback is read cell by cell through grid refs: slower than the render state,
        # but it is only read while a person pages through it, and then cached by the pane.
        point = self._point
        point.value.y = index

        def ref_at(x: int) -> Any:
            point.value.x = x
            _check(self._grid_ref(self._t, point[0], self._ref), f"grid_ref history {x},{index}")
            return self._ref

        raw: list[int] = []
        for x in range(self.size[1]):
            lib.ghostty_grid_ref_cell(ref_at(x), self._cell)
            raw.append(self._cell[0])

        def style_at(x: int) -> Any:
            _check(lib.ghostty_grid_ref_style(ref_at(x), self._style), "grid_ref_style")
            return self._style

        def grapheme_at(x: int) -> str:
            _check(
                lib.ghostty_grid_ref_graphemes(ref_at(x), self._grapheme, _GRAPHEME_MAX, self._n),
                "grid_ref_graphemes",
            )
            return "".join(map(chr, ffi.unpack(self._grapheme, self._n[0])))

        return self._runs(raw, style_at, grapheme_at)

    def soft_wrapped(self, row: int, *, history: bool = False) -> bool:
        # Read when copy mode freezes a row, not per frame: a fresh point and row are fine.
        point = ffi.new("GhosttyPointS*")
        point.tag = lib.GHOSTTY_POINT_TAG_HISTORY if history else lib.GHOSTTY_POINT_TAG_ACTIVE
        point.value.y = row
        _check(self._grid_ref(self._t, point[0], self._ref), f"grid_ref row {row}")
        out = ffi.new("GhosttyRow*")
        _check(lib.ghostty_grid_ref_row(self._ref, out), "grid_ref_row")
        _check(lib.ghostty_row_get(out[0], lib.GHOSTTY_ROW_DATA_WRAP, self._bool), "row wrap")
        return bool(self._bool[0])

    def history_text(self) -> list[str]:
        # The library's own formatter: ~1 ms per thousand rows, where `history_line` reads
        # a row cell by cell (~0.3 ms a row).
        rows = self.history_size
        if rows == 0:
            return []
        text = self._plain(lib.GHOSTTY_POINT_TAG_HISTORY, rows, unwrap=False).split("\n")
        return text + [""] * (rows - len(text))  # trimmed: blank rows at the end are gone

    def screen_text(self) -> list[str]:
        """The screen's text as lines, top to bottom: a row that soft-wraps is joined to
        the next (one line as the child wrote it), trailing blanks dropped."""
        return self._plain(lib.GHOSTTY_POINT_TAG_ACTIVE, self.size[0], unwrap=True).split("\n")

    def _plain(self, tag: int, rows: int, *, unwrap: bool) -> str:
        """Rows 0 to `rows` - 1 of the area `tag` names, as plain text."""
        cols = self.size[1]
        point = ffi.new("GhosttyPointS*")
        point.tag = tag
        selection = ffi.new("GhosttySelection*")
        selection.size = ffi.sizeof("GhosttySelection")
        for end, (x, y) in (("start", (0, 0)), ("end", (cols - 1, rows - 1))):
            point.value.x, point.value.y = x, y
            _check(self._grid_ref(self._t, point[0], self._ref), f"grid_ref {tag} {x},{y}")
            setattr(selection, end, self._ref[0])
        options = ffi.new("GhosttyTerminalSelectionFormatOptions*")
        options.size = ffi.sizeof("GhosttyTerminalSelectionFormatOptions")
        options.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        options.unwrap = unwrap
        options.trim = True
        options.selection = selection
        n = ffi.new("size_t*")
        lib.ghostty_terminal_selection_format_buf(self._t, options[0], ffi.NULL, 0, n)
        buf = ffi.new("uint8_t[]", max(1, n[0]))
        _check(
            lib.ghostty_terminal_selection_format_buf(self._t, options[0], buf, len(buf), n),
            "selection_format",
        )
        return ffi.buffer(buf, n[0])[:].decode(errors="replace")

    def _runs(self, raw: list[int], style_at: Any, grapheme_at: Any) -> list[Run]:
        runs: list[Run] = []
        text: list[str] = []
        attrs = DEFAULT
        kind = _NARROW
        start = 0
        styles: dict[int, Attrs] = {0: DEFAULT}
        current_key = -1
        for x, cell in enumerate(raw):
            wide = (cell >> _WIDE_SHIFT) & _WIDE_MASK
            if wide == _WIDE_TAIL:
                continue
            tag = cell & _TAG_MASK
            cell_kind = _WIDE_CHAR if wide == _WIDE else _NARROW
            if tag <= _TAG_GRAPHEME:
                style_id = (cell >> _STYLE_SHIFT) & _STYLE_MASK
                key = style_id
                if key not in styles:
                    styles[key] = _attrs(style_at(x))
                cell_attrs = styles[key]
                cp = (cell >> _CP_SHIFT) & _CP_MASK
                if wide == _WIDE_HEAD or cp == 0:
                    char = " "
                elif tag == _TAG_GRAPHEME:
                    char = grapheme_at(x) or " "
                    if len(char) > 1:
                        cell_kind = _CLUSTER
                else:
                    char = chr(cp)
            else:
                # A blank cell that only carries a background (erased with a colour set).
                key = -2 - x
                cell_attrs = DEFAULT._replace(bg=self._cell_bg(cell, tag))
                char = " "
            if (
                cell_kind != kind
                or kind == _CLUSTER
                or (key != current_key and cell_attrs != attrs)
            ):
                if text:
                    # A run's cells reach up to this cell, wide characters' tails included.
                    runs.append(Run("".join(text), attrs, x - start, kind == _CLUSTER))
                    text = []
                start = x
                attrs = cell_attrs
                kind = cell_kind
            current_key = key
            text.append(char)
        if text:
            runs.append(Run("".join(text), attrs, len(raw) - start, kind == _CLUSTER))
        return runs

    def _cell_bg(self, cell: int, tag: int) -> Color:
        if tag == _TAG_BG_PALETTE:
            lib.ghostty_cell_get(cell, lib.GHOSTTY_CELL_DATA_COLOR_PALETTE, self._u8)
            return int(self._u8[0])
        lib.ghostty_cell_get(cell, lib.GHOSTTY_CELL_DATA_COLOR_RGB, self._rgb)
        return (self._rgb.r, self._rgb.g, self._rgb.b)


def _color(c: Any) -> Color:
    if c.tag == lib.GHOSTTY_STYLE_COLOR_PALETTE:
        return int(c.value.palette)
    if c.tag == lib.GHOSTTY_STYLE_COLOR_RGB:
        rgb = c.value.rgb
        return (rgb.r, rgb.g, rgb.b)
    return None


def _attrs(style: Any) -> Attrs:
    underline = style.underline
    return Attrs(
        fg=_color(style.fg_color),
        bg=_color(style.bg_color),
        bold=bool(style.bold),
        italic=bool(style.italic),
        underline=Underline(underline) if underline in _UNDERLINES else Underline.SINGLE,
        reverse=bool(style.inverse),
        dim=bool(style.faint),
        strikethrough=bool(style.strikethrough),
        blink=bool(style.blink),
        overline=bool(style.overline),
        conceal=bool(style.invisible),
    )


_UNDERLINES = frozenset(Underline)


def _check_cell_layout() -> None:
    """Fail loudly, not with garbled panes, if a new libghostty-vt packs cells differently."""
    handle = ffi.new("GhosttyTerminal*")
    _check(lib.ghostty_terminal_new(ffi.NULL, handle, 8, 1), "terminal_new")
    try:
        lib.ghostty_terminal_vt_write(handle[0], "a\x1b[1m中".encode(), 5)
        point = ffi.new("GhosttyPointS*")
        point.tag = lib.GHOSTTY_POINT_TAG_ACTIVE
        ref = ffi.new("GhosttyGridRef*")
        ref.size = ffi.sizeof("GhosttyGridRef")
        grid_ref = ffi.cast(
            "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyGridRef*)",
            ffi.addressof(lib, "ghostty_terminal_grid_ref"),
        )
        cell = ffi.new("GhosttyCell*")
        out = ffi.new("uint32_t*")
        for x in range(3):
            point.value.x = x
            _check(grid_ref(handle[0], point[0], ref), "grid_ref")
            _check(lib.ghostty_grid_ref_cell(ref, cell), "grid_ref_cell")
            raw = cell[0]
            for key, decoded in (
                (lib.GHOSTTY_CELL_DATA_CODEPOINT, (raw >> _CP_SHIFT) & _CP_MASK),
                (lib.GHOSTTY_CELL_DATA_STYLE_ID, (raw >> _STYLE_SHIFT) & _STYLE_MASK),
                (lib.GHOSTTY_CELL_DATA_WIDE, (raw >> _WIDE_SHIFT) & _WIDE_MASK),
                (lib.GHOSTTY_CELL_DATA_CONTENT_TAG, raw & _TAG_MASK),
            ):
                out[0] = 0
                _check(lib.ghostty_cell_get(raw, key, out), "cell_get")
                if out[0] != decoded:
                    raise RuntimeError(
                        "libghostty-vt packs cells differently from what hive_tui decodes; "
                        "pin the pyghostty version in pyproject.toml"
                    )
    finally:
        lib.ghostty_terminal_free(handle[0])
