"""Textual key events -> the bytes a program in a tmux pane reads for that key.

Pure: a key name and character in, bytes out; no Textual widget or app involved.

Textual names a key `mod+mod+base` (modifiers in any order: "ctrl+shift+left",
"alt+ctrl+a"). `character` is what the terminal typed, when Textual knows it: "a",
"é", "😀", "\\x01" for legacy ctrl+a, but None for most keys reported through the
kitty keyboard protocol (which Textual turns on where the terminal has it), so the base
name is the source of truth and `character` is used only for plain text and for the
control character a legacy terminal sent (ctrl+h arrives as "backspace" with "\\x08").

The encodings are tmux's (input-keys.c, `extended-keys off`, the default): xterm's
modified keys (CSI 1;<mod> X, CSI <n>;<mod> ~), alt/meta as an ESC prefix, and home
and end as CSI 1 ~ and CSI 4 ~. tests/e2e/test_keys_parity.py holds them against a
plain tmux pane byte for byte. One deliberate exception: shift+enter sends ESC CR, the
"meta+enter" that Claude Code (and readline-style editors) take as a newline, which is
also what Claude Code's own terminal setup maps shift+enter to. tmux sends a bare CR,
which submits the prompt (only terminals with the kitty protocol tell shift+enter apart).
"""

from __future__ import annotations

from textual.keys import REPLACED_KEYS, key_to_character

ESC = "\x1b"
CSI = ESC + "["
SS3 = ESC + "O"

# xterm's modifier parameter is 1 + the sum of these bits (CSI 1;<mod> X).
# Meta is folded into alt: terminals send meta as an ESC prefix as well.
_MODIFIER_BITS = {"shift": 1, "alt": 2, "meta": 2, "ctrl": 4}

# Keys sent as CSI <final> (SS3 <final> in application-cursor mode) unmodified and
# CSI 1;<mod> <final> with modifiers.
_CURSOR_FINAL = {"up": "A", "down": "B", "right": "C", "left": "D"}
# Home and end: CSI 1;<mod> <final> with modifiers, tmux's CSI 1 ~ / CSI 4 ~ without
# (in either cursor mode).
_HOME_END = {"home": ("H", 1), "end": ("F", 4)}
# F1-F4 are SS3 P..S unmodified, CSI 1;<mod> P..S with modifiers.
_PF_FINAL = {"f1": "P", "f2": "Q", "f3": "R", "f4": "S"}
# Keys xterm sends as CSI <n> ~ (CSI <n>;<mod> ~ with modifiers).
_TILDE_CODE = {
    "insert": 2,
    "delete": 3,
    "pageup": 5,
    "pagedown": 6,
    "f5": 15,
    "f6": 17,
    "f7": 18,
    "f8": 19,
    "f9": 20,
    "f10": 21,
    "f11": 23,
    "f12": 24,
}
# The VT220 control codes for ctrl+digit, which xterm keeps (ctrl+2 is NUL, ctrl+6 is ^^).
_CTRL_DIGIT = {"2": 0x00, "3": 0x1B, "4": 0x1C, "5": 0x1D, "6": 0x1E, "7": 0x1F, "8": 0x7F}


def _parse(key: str) -> tuple[int, str] | None:
    """(xterm modifier bits, base key name), or None for a modifier xterm cannot send."""
    *modifiers, base = key.split("+")
    bits = 0
    for modifier in modifiers:
        bit = _MODIFIER_BITS.get(modifier)
        if bit is None:  # super, hyper: no xterm encoding, and the OS usually owns them
            return None
        bits |= bit
    return bits, base


def base_character(base: str) -> str | None:
    """The character a key name stands for: "a" -> "a", "full_stop" -> ".", "at" -> "@"."""
    if len(base) == 1:
        return base
    return key_to_character(REPLACED_KEYS.get(base, base))


def _ctrl(character: str) -> str:
    """The C0 control for ctrl+<character>, or the character itself where xterm has none."""
    if character == " ":
        return "\x00"
    if character == "?":
        return "\x7f"
    if character == "/":
        return "\x1f"
    if character in _CTRL_DIGIT:
        return chr(_CTRL_DIGIT[character])
    upper = character.upper()
    if len(upper) == 1 and "@" <= upper <= "_":
        return chr(ord(upper) & 0x1F)
    return character


def _special(base: str, bits: int, app_cursor: bool) -> str | None:
    """Cursor, editing and function keys, or None if `base` is none of them."""
    if base.startswith("f") and base[1:].isdigit() and 13 <= int(base[1:]) <= 24:
        # xterm's F13-F24 are shift+F1-F12 (terminfo kf13=\E[1;2P).
        base, bits = f"f{int(base[1:]) - 12}", bits | 1
    mod = 1 + bits
    if base in _CURSOR_FINAL:
        final = _CURSOR_FINAL[base]
        if mod > 1:
            return f"{CSI}1;{mod}{final}"
        return (SS3 if app_cursor else CSI) + final
    if base in _HOME_END:
        final, code = _HOME_END[base]
        return f"{CSI}1;{mod}{final}" if mod > 1 else f"{CSI}{code}~"
    if base in _PF_FINAL:
        final = _PF_FINAL[base]
        return f"{CSI}1;{mod}{final}" if mod > 1 else SS3 + final
    if base in _TILDE_CODE:
        code = _TILDE_CODE[base]
        return f"{CSI}{code};{mod}~" if mod > 1 else f"{CSI}{code}~"
    return None


def _named(base: str, shift: bool, ctrl: bool) -> str | None:
    """Enter, tab, backspace, escape and space (the alt prefix is added by the caller)."""
    if base == "enter":
        return "\r"
    if base == "tab":
        return CSI + "Z" if shift else "\t"
    if base == "backspace":
        return "\x08" if ctrl else "\x7f"
    if base == "escape":
        return ESC
    if base == "space":
        return "\x00" if ctrl else " "
    return None


def _is_control(character: str) -> bool:
    return ord(character) < 0x20 or character == "\x7f"


def encode_key(key: str, character: str | None, *, app_cursor: bool = False) -> bytes | None:
    """The bytes tmux would send its pane's program for the Textual key `key`, or None
    if it sends none.

    `app_cursor` is the child's DECCKM mode (ESC [ ? 1 h): unmodified arrows are then
    sent as SS3 sequences.
    """
    parsed = _parse(key)
    if parsed is None:
        return None
    bits, base = parsed
    shift, alt, ctrl = bool(bits & 1), bool(bits & 2), bool(bits & 4)

    special = _special(base, bits, app_cursor)
    if special is not None:
        return special.encode()

    if base == "enter" and shift and not ctrl:
        alt = True  # shift+enter: a newline in the prompt, see the module docstring
    if character is not None and len(character) == 1 and _is_control(character):
        # The control character the terminal sent (with alt: after the ESC prefix). Its
        # name can stand for two: ctrl+h and backspace are both "backspace".
        text: str | None = character
    else:
        text = _named(base, shift, ctrl)
    if text is None:
        if not (alt or ctrl) and character and character.isprintable():
            # The typed text itself: right for any keyboard layout, non-ASCII and emoji.
            text = character
        else:
            text = base_character(base)
            if text is None:
                return None
            if shift:
                text = text.upper()
            if ctrl:
                text = _ctrl(text)
    if alt:
        text = ESC + text
    return text.encode()
