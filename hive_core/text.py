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

C1 is decided on purpose, not inherited from a range that happened to stop at 0x1f:
U+0080-U+009F are never text anyone means (in Unicode they are only the 8-bit
controls' code points), and an xterm-style terminal that reads 8-bit controls takes
U+009B as CSI, U+009D as OSC and U+0090 as DCS, i.e. as the start of a sequence with no
ESC in it to look for. So they go wherever an agent's text is printed, as C0 does.

Tab and newline are not unsafe in a body (`lines=True`): they show as what they are. A
one-line form (`lines=False`) has no line breaks at all. `one_line` is the row form of
the same rule: the unsafe characters and every other character a row cannot show as
itself (line separators, format and unassigned characters; `str.isprintable`) become
spaces, because a row is read as one run of visible words.

Every module that prints or stores someone else's text goes through these functions;
tests/unit/test_text_rule.py fails on a control-character pattern anywhere else.
"""

from __future__ import annotations

import re

_BIDI = "\u202a-\u202e\u2066-\u2069"
_UNSAFE_IN_BODY = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
# What ends a line anywhere: C0's breaks, NEL, and Unicode's line and paragraph separators.
_LINE_BREAKS = re.compile("[\r\n\v\f\x85\u2028\u2029]+")
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
    and newline kept when `lines`, else each run of line breaks becomes one space (the
    words either side stay apart). `sequences`: whole escape sequences go first, for a
    terminal's own output whose words are wanted."""
    if sequences:
        text = _SEQUENCE.sub(by, text)
    if lines:
        return _UNSAFE_IN_BODY.sub(by, text)
    return _UNSAFE_IN_LINE.sub(by, _LINE_BREAKS.sub(" ", text))


def one_line(text: str, limit: int | None = None) -> str:
    """`text` as one line of at most `limit` characters (no limit if None): anything
    unprintable (the unsafe characters, newlines, other line separators, format
    characters) becomes a space, runs of space fold into one, and a cut is marked with
    an ellipsis."""
    if not text.isprintable() or "  " in text:
        text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"
