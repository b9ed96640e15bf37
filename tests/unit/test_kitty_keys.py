"""Keys for a program that asked for the kitty keyboard protocol: the encodings its
specification gives (https://sw.kovidgoyal.net/kitty/keyboard-protocol/), at the levels a
program asks for, from Textual's key events as legacy terminals and kitty ones give them."""

from __future__ import annotations

import pytest

from hive_tui.terminal.kitty import KittyEncoder

DISAMBIGUATE, ALL_KEYS, TEXT = 1, 8, 16


@pytest.mark.parametrize(
    ("key", "character", "expected"),
    [
        ("a", "a", b"a"),  # text stays text
        ("A", "A", b"A"),
        ("exclamation_mark", "!", b"!"),
        ("é", "é", "é".encode()),
        ("ctrl+a", "\x01", b"\x1b[97;5u"),  # as a legacy terminal gives it
        ("ctrl+a", None, b"\x1b[97;5u"),  # as a kitty terminal gives it
        ("ctrl+c", "\x03", b"\x1b[99;5u"),
        ("alt+a", "a", b"\x1b[97;3u"),
        ("alt+shift+a", "A", b"\x1b[97;4u"),
        ("alt+ctrl+a", "\x01", b"\x1b[97;7u"),
        ("alt+full_stop", ".", b"\x1b[46;3u"),
        ("escape", "\x1b", b"\x1b[27u"),
        ("enter", "\r", b"\r"),  # enter, tab and backspace keep their legacy bytes
        ("tab", "\t", b"\t"),
        ("backspace", "\x7f", b"\x7f"),
        ("shift+enter", None, b"\x1b[13;2u"),
        ("alt+enter", "\r", b"\x1b[13;3u"),
        ("shift+tab", None, b"\x1b[9;2u"),
        ("ctrl+backspace", None, b"\x1b[127;5u"),
        ("up", None, b"\x1b[A"),
        ("ctrl+up", None, b"\x1b[1;5A"),
        ("f1", None, b"\x1b[P"),
        ("f3", None, b"\x1b[13~"),
        ("shift+f5", None, b"\x1b[15;2~"),
        ("ctrl+space", None, b"\x1b[32;5u"),
    ],
)
def test_disambiguate(key: str, character: str | None, expected: bytes) -> None:
    assert KittyEncoder().encode(key, character, DISAMBIGUATE) == expected


@pytest.mark.parametrize(
    ("key", "character", "flags", "expected"),
    [
        ("a", "a", DISAMBIGUATE | ALL_KEYS, b"\x1b[97u"),
        ("A", "A", DISAMBIGUATE | ALL_KEYS, b"\x1b[97;2u"),
        ("enter", "\r", DISAMBIGUATE | ALL_KEYS, b"\x1b[13u"),
        ("a", "a", DISAMBIGUATE | ALL_KEYS | TEXT, b"\x1b[97;;97u"),
        ("A", "A", DISAMBIGUATE | ALL_KEYS | TEXT, b"\x1b[97;2;65u"),
        ("exclamation_mark", "!", DISAMBIGUATE | ALL_KEYS | TEXT, b"\x1b[49;2;33u"),
    ],
)
def test_every_key_as_an_escape_code(
    key: str, character: str | None, flags: int, expected: bytes
) -> None:
    assert KittyEncoder().encode(key, character, flags) == expected


def test_keys_it_cannot_name() -> None:
    encoder = KittyEncoder()
    assert encoder.encode("hyper+a", None, DISAMBIGUATE) is None
    assert encoder.encode("nonsense", None, DISAMBIGUATE) is None
