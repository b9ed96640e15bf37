"""Text made safe to show (pure): the one rule for what in someone else's text a
terminal must not obey, and one rule for every one-line view.

An agent writes subjects, bodies, reasons, names; the person reads them in a terminal.
A character is unsafe there when it changes how the terminal shows what follows
instead of showing itself:

- C0 controls and DEL: ESC starts escape sequences (colour, cursor moves, clearing the
  screen, OSC 52 writing the clipboard), CR overwrites a line, BS rubs out;
- C1 controls (U+0080-U+009F): U+009B is a CSI on its own in a terminal that reads 8-bit
  controls, U+0085 is a line break;
- the bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): one of them
  reorders the rest of the line, so `exe.txt` can be shown for `txt.exe` ("Trojan
  Source", CVE-2021-42574).

The bidi marks (U+200E, U+200F, U+061C) are kept on purpose: each is a single invisible
strong character that only sets the direction of the neutral characters beside it, it
cannot reverse a run of letters, and right-to-left text uses it for numbers and
punctuation; escaping it would garble real Hebrew and Arabic for no safety.

Tab and newline are not unsafe in a body (`lines=True`): they show as what they are.
"""

from __future__ import annotations

import re

_BIDI = "\u202a-\u202e\u2066-\u2069"
_UNSAFE_IN_BODY = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
# Whole escape sequences (CSI, OSC ended by BEL or ST, and the short ESC forms such as
# ESC ( B), for text that is a terminal's own output (a pane's, ssh's): its words stay,
# the codes go.
_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[ -/]*[0-~]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str, *, lines: bool = True) -> str:
    """`text` with every unsafe character written as a visible escape (`\\x1b`,
    `\\x9b`, `\\u202e`); tab and newline kept when `lines`."""
    return (_UNSAFE_IN_BODY if lines else _UNSAFE_IN_LINE).sub(_escape, text)


def stripped(text: str, *, lines: bool = True, sequences: bool = False, by: str = "") -> str:
    """`text` with every unsafe character replaced by `by` (removed by default); tab
    and newline kept when `lines`. `sequences`: whole escape sequences go first, for a
    terminal's own output whose words are wanted."""
    if sequences:
        text = _SEQUENCE.sub(by, text)
    return (_UNSAFE_IN_BODY if lines else _UNSAFE_IN_LINE).sub(by, text)


def one_line(text: str, limit: int) -> str:
    """`text` as one line of at most `limit` characters: anything unprintable (newlines,
    other line separators, control and format characters) becomes a space, runs of space
    fold into one, and a cut is marked with an ellipsis."""
    if not text.isprintable() or "  " in text:
        text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
