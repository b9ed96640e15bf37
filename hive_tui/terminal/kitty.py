"""Keys for a program that asked for the kitty keyboard protocol (CSI > flags u).

The pane's terminal answers a program's CSI ? u with the flags it pushed (libghostty-vt
keeps them), so a program that asks gets what it asked for; one that does not gets the
legacy keys of keys.py, as in tmux. The encoding is libghostty-vt's own key encoder: the
same library that answered the query encodes the keys, every flag included.

Textual gives a key name and, for legacy terminals, the typed character; the encoder
wants the physical key, the modifiers, the text and the unshifted codepoint. Keys are
named for the US layout (the protocol's key codes are the unshifted characters there);
a character with no key of its own (é, ß) goes as its text.
"""

from __future__ import annotations

import string

from hive_core.terminal.ghostty_abi import ffi, lib
from hive_tui.terminal.keys import base_character

# libghostty-vt's GhosttyMods bits (include/ghostty/vt/key/event.h).
_MODS = {"shift": 1 << 0, "ctrl": 1 << 1, "alt": 1 << 2, "meta": 1 << 2, "super": 1 << 3}
_NAMED = {
    "enter": lib.GHOSTTY_KEY_ENTER,
    "tab": lib.GHOSTTY_KEY_TAB,
    "backspace": lib.GHOSTTY_KEY_BACKSPACE,
    "escape": lib.GHOSTTY_KEY_ESCAPE,
    "space": lib.GHOSTTY_KEY_SPACE,
    "up": lib.GHOSTTY_KEY_ARROW_UP,
    "down": lib.GHOSTTY_KEY_ARROW_DOWN,
    "left": lib.GHOSTTY_KEY_ARROW_LEFT,
    "right": lib.GHOSTTY_KEY_ARROW_RIGHT,
    "home": lib.GHOSTTY_KEY_HOME,
    "end": lib.GHOSTTY_KEY_END,
    "pageup": lib.GHOSTTY_KEY_PAGE_UP,
    "pagedown": lib.GHOSTTY_KEY_PAGE_DOWN,
    "insert": lib.GHOSTTY_KEY_INSERT,
    "delete": lib.GHOSTTY_KEY_DELETE,
    **{f"f{n}": getattr(lib, f"GHOSTTY_KEY_F{n}") for n in range(1, 25)},
}
# Text keys of the US layout: the unshifted character, its key, its shifted character.
_US = [
    *((c, getattr(lib, f"GHOSTTY_KEY_{c.upper()}"), c.upper()) for c in string.ascii_lowercase),
    *(
        (d, getattr(lib, f"GHOSTTY_KEY_DIGIT_{d}"), s)
        for d, s in zip("0123456789", ")!@#$%^&*(", strict=True)
    ),
    ("`", lib.GHOSTTY_KEY_BACKQUOTE, "~"),
    ("-", lib.GHOSTTY_KEY_MINUS, "_"),
    ("=", lib.GHOSTTY_KEY_EQUAL, "+"),
    ("[", lib.GHOSTTY_KEY_BRACKET_LEFT, "{"),
    ("]", lib.GHOSTTY_KEY_BRACKET_RIGHT, "}"),
    ("\\", lib.GHOSTTY_KEY_BACKSLASH, "|"),
    (";", lib.GHOSTTY_KEY_SEMICOLON, ":"),
    ("'", lib.GHOSTTY_KEY_QUOTE, '"'),
    (",", lib.GHOSTTY_KEY_COMMA, "<"),
    (".", lib.GHOSTTY_KEY_PERIOD, ">"),
    ("/", lib.GHOSTTY_KEY_SLASH, "?"),
]
# Either character of a key -> (the key, its unshifted character, its shifted one).
_TEXT_KEYS = {
    char: (key, plain, shifted) for plain, key, shifted in _US for char in (plain, shifted)
}
_OUT = 128


class KittyEncoder:
    """One pane's encoder; `encode` takes the program's flags and cursor mode each time
    (they change as it pushes and pops them)."""

    def __init__(self) -> None:
        handle = ffi.new("GhosttyKeyEncoder*")
        if lib.ghostty_key_encoder_new(ffi.NULL, handle) != lib.GHOSTTY_SUCCESS:
            raise MemoryError("libghostty-vt: key_encoder_new failed")
        self._encoder = handle[0]
        event = ffi.new("GhosttyKeyEvent*")
        if lib.ghostty_key_event_new(ffi.NULL, event) != lib.GHOSTTY_SUCCESS:
            lib.ghostty_key_encoder_free(self._encoder)
            raise MemoryError("libghostty-vt: key_event_new failed")
        self._event = event[0]
        self._out = ffi.new(f"char[{_OUT}]")
        self._len = ffi.new("size_t*")
        self._flags = ffi.new("uint8_t*")
        self._bool = ffi.new("bool*")
        self._bool[0] = True
        lib.ghostty_key_encoder_setopt(
            self._encoder, lib.GHOSTTY_KEY_ENCODER_OPT_ALT_ESC_PREFIX, self._bool
        )

    def __del__(self) -> None:
        if getattr(self, "_event", None) is not None:
            lib.ghostty_key_event_free(self._event)
            lib.ghostty_key_encoder_free(self._encoder)
            self._event = None

    def encode(
        self, key: str, character: str | None, flags: int, *, app_cursor: bool = False
    ) -> bytes | None:
        """The bytes for the Textual key `key` under the kitty flags `flags` (non-zero),
        or None for a key this cannot name."""
        *modifiers, base = key.split("+")
        if any(m not in _MODS for m in modifiers):
            return None
        mods = 0
        for name in modifiers:
            mods |= _MODS[name]
        typing = not mods & (_MODS["ctrl"] | _MODS["alt"])
        text, unshifted, consumed = "", 0, 0
        physical: int | None = _NAMED.get(base)
        if base == "space":
            text, unshifted = (" " if typing else ""), 0x20
        elif physical is None:
            char = base_character(base)
            if char is None or len(char) != 1:
                return None
            physical, plain, shifted = _TEXT_KEYS.get(
                char, (lib.GHOSTTY_KEY_UNIDENTIFIED, char.lower(), char.upper())
            )
            if char != plain or mods & _MODS["shift"]:  # "A", "!": typed with shift
                mods |= _MODS["shift"]
                consumed = _MODS["shift"]
                char = shifted
            unshifted = ord(plain)
            if typing:
                text = character if character and character.isprintable() else char
        if physical is None:
            return None
        return self._encode(physical, mods, consumed, text, unshifted, flags, app_cursor)

    def _encode(
        self,
        physical: int,
        mods: int,
        consumed: int,
        text: str,
        unshifted: int,
        flags: int,
        app_cursor: bool,
    ) -> bytes | None:
        event = self._event
        lib.ghostty_key_event_set_action(event, lib.GHOSTTY_KEY_ACTION_PRESS)
        lib.ghostty_key_event_set_key(event, physical)
        lib.ghostty_key_event_set_mods(event, mods)
        lib.ghostty_key_event_set_consumed_mods(event, consumed)
        lib.ghostty_key_event_set_composing(event, False)
        data = text.encode()
        lib.ghostty_key_event_set_utf8(event, data if data else ffi.NULL, len(data))
        lib.ghostty_key_event_set_unshifted_codepoint(event, unshifted)
        self._flags[0] = flags
        lib.ghostty_key_encoder_setopt(
            self._encoder, lib.GHOSTTY_KEY_ENCODER_OPT_KITTY_FLAGS, self._flags
        )
        self._bool[0] = app_cursor
        lib.ghostty_key_encoder_setopt(
            self._encoder, lib.GHOSTTY_KEY_ENCODER_OPT_CURSOR_KEY_APPLICATION, self._bool
        )
        self._bool[0] = True
        result = lib.ghostty_key_encoder_encode(self._encoder, event, self._out, _OUT, self._len)
        if result != lib.GHOSTTY_SUCCESS:
            return None
        return ffi.buffer(self._out, self._len[0])[:]
