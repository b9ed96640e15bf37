"""Typing text into a child as a person would paste it.

A child that asked for bracketed paste (DECSET 2004: readline, Claude Code, vim) gets
the text between the paste marks, so its newlines do not submit early. One that did
not (dash, a plain `cat`) would show the marks as junk: it gets the bare text, as
`tmux send-keys` gives it. The mode is read from the child's own output (pure here;
the pty session feeds it).
"""

from __future__ import annotations

import re

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"

# DEC private mode set/reset, possibly several modes in one: ESC [ ? 1 ; 2004 h
_DEC_MODE = re.compile(rb"\x1b\[\?([0-9;]*)([hl])")
# Longest tail that may hold the start of a mode sequence cut by a read boundary.
MODE_TAIL = 32


def paste_mode(data: bytes, on: bool) -> bool:
    """Whether bracketed paste is on after the child wrote `data`, given it was `on`."""
    if b"\x1b[?" not in data:
        return on
    for match in _DEC_MODE.finditer(data):
        if b"2004" in match.group(1).split(b";"):
            on = match.group(2) == b"h"
    return on


def pasted(text: str, bracketed: bool) -> bytes:
    """The bytes that type `text` into a child whose paste mode is `bracketed`."""
    body = text.encode()
    return PASTE_START + body + PASTE_END if bracketed else body
