"""Key encoding: Textual key events -> the exact bytes a program in a tmux pane reads;
and reading them: what the app's parser makes of a terminal's bytes is sent on as they
were (tests/e2e/test_keys_parity.py holds the same against tmux itself)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual import events

from hive_tui.terminal.input import KeyParser
from hive_tui.terminal.keys import encode_key


@pytest.mark.parametrize(
    ("key", "character", "expected"),
    [
        ("a", "a", b"a"),
        ("A", "A", b"A"),
        ("shift+a", None, b"A"),
        ("space", " ", b" "),
        ("full_stop", ".", b"."),
        ("é", "é", "é".encode()),
        ("ß", "ß", "ß".encode()),
        ("grinning_face", "😀", "😀".encode()),
        ("left_square_bracket", None, b"["),
        ("at", None, b"@"),
    ],
)
def test_printable_characters_are_sent_as_utf8(key: str, character: str | None, expected: bytes):
    assert encode_key(key, character) == expected


@pytest.mark.parametrize(
    ("key", "character", "expected"),
    [
        ("enter", "\r", b"\r"),
        ("enter", None, b"\r"),
        ("ctrl+enter", None, b"\r"),
        ("alt+enter", None, b"\x1b\r"),
        # The one deliberate departure from xterm: a newline in Claude Code's prompt.
        ("shift+enter", None, b"\x1b\r"),
        ("tab", "\t", b"\t"),
        ("shift+tab", None, b"\x1b[Z"),
        ("alt+tab", None, b"\x1b\t"),
        ("backspace", "\x7f", b"\x7f"),
        # ctrl+h from a legacy terminal: Textual calls it backspace, the child gets ^H.
        ("backspace", "\x08", b"\x08"),
        ("alt+backspace", "\x08", b"\x1b\x08"),
        ("ctrl+backspace", None, b"\x08"),
        ("alt+backspace", None, b"\x1b\x7f"),
        ("escape", "\x1b", b"\x1b"),
        ("shift+escape", None, b"\x1b"),
        ("alt+escape", None, b"\x1b\x1b"),
    ],
)
def test_named_keys(key: str, character: str | None, expected: bytes):
    assert encode_key(key, character) == expected


@pytest.mark.parametrize("letter", "abcdefghijklmnopqrstuvwxyz")
def test_ctrl_letters_are_c0_controls(letter: str):
    code = ord(letter) - ord("a") + 1
    # Legacy terminals report the control character, the kitty protocol reports none.
    assert encode_key(f"ctrl+{letter}", chr(code)) == bytes([code])
    assert encode_key(f"ctrl+{letter}", None) == bytes([code])
    # xterm (without modifyOtherKeys) cannot tell ctrl+shift+x from ctrl+x.
    assert encode_key(f"ctrl+shift+{letter}", None) == bytes([code])


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("ctrl+c", b"\x03"),
        ("ctrl+r", b"\x12"),
        ("ctrl+b", b"\x02"),
        ("ctrl+@", b"\x00"),
        ("ctrl+at", b"\x00"),
        ("ctrl+space", b"\x00"),
        ("ctrl+2", b"\x00"),
        ("ctrl+left_square_bracket", b"\x1b"),
        ("ctrl+backslash", b"\x1c"),
        ("ctrl+right_square_bracket", b"\x1d"),
        ("ctrl+circumflex_accent", b"\x1e"),
        ("ctrl+6", b"\x1e"),
        ("ctrl+underscore", b"\x1f"),
        ("ctrl+slash", b"\x1f"),
        ("ctrl+question_mark", b"\x7f"),
        ("ctrl+8", b"\x7f"),
        # No C0 code: xterm sends the plain character.
        ("ctrl+1", b"1"),
        ("ctrl+semicolon", b";"),
    ],
)
def test_ctrl_punctuation_and_space(key: str, expected: bytes):
    assert encode_key(key, None) == expected


@pytest.mark.parametrize(
    ("key", "character", "expected"),
    [
        ("alt+x", "x", b"\x1bx"),
        ("alt+x", None, b"\x1bx"),
        ("alt+shift+x", "X", b"\x1bX"),
        ("meta+x", None, b"\x1bx"),
        ("alt+full_stop", None, b"\x1b."),
        ("alt+1", None, b"\x1b1"),
        ("alt+space", None, b"\x1b "),
        ("alt+ctrl+a", None, b"\x1b\x01"),
        ("ctrl+alt+c", None, b"\x1b\x03"),
        ("alt+ctrl+space", None, b"\x1b\x00"),
        ("alt+shift+tab", None, b"\x1b\x1b[Z"),
    ],
)
def test_alt_sends_an_escape_prefix(key: str, character: str | None, expected: bytes):
    assert encode_key(key, character) == expected


@pytest.mark.parametrize(
    ("key", "normal", "application"),
    [
        ("up", b"\x1b[A", b"\x1bOA"),
        ("down", b"\x1b[B", b"\x1bOB"),
        ("right", b"\x1b[C", b"\x1bOC"),
        ("left", b"\x1b[D", b"\x1bOD"),
        # Not cursor keys: DECCKM does not change them (tmux sends home and end as
        # CSI 1 ~ and CSI 4 ~ in both modes).
        ("home", b"\x1b[1~", b"\x1b[1~"),
        ("end", b"\x1b[4~", b"\x1b[4~"),
        ("insert", b"\x1b[2~", b"\x1b[2~"),
        ("delete", b"\x1b[3~", b"\x1b[3~"),
        ("pageup", b"\x1b[5~", b"\x1b[5~"),
        ("pagedown", b"\x1b[6~", b"\x1b[6~"),
    ],
)
def test_cursor_and_editing_keys(key: str, normal: bytes, application: bytes):
    assert encode_key(key, None) == normal
    assert encode_key(key, None, app_cursor=True) == application


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("f1", b"\x1bOP"),
        ("f2", b"\x1bOQ"),
        ("f3", b"\x1bOR"),
        ("f4", b"\x1bOS"),
        ("f5", b"\x1b[15~"),
        ("f6", b"\x1b[17~"),
        ("f7", b"\x1b[18~"),
        ("f8", b"\x1b[19~"),
        ("f9", b"\x1b[20~"),
        ("f10", b"\x1b[21~"),
        ("f11", b"\x1b[23~"),
        ("f12", b"\x1b[24~"),
        ("f13", b"\x1b[1;2P"),
        ("f17", b"\x1b[15;2~"),
        ("ctrl+f1", b"\x1b[1;5P"),
        ("shift+f5", b"\x1b[15;2~"),
        ("ctrl+f12", b"\x1b[24;5~"),
    ],
)
def test_function_keys(key: str, expected: bytes):
    assert encode_key(key, None) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("shift+up", b"\x1b[1;2A"),
        ("alt+right", b"\x1b[1;3C"),
        ("alt+shift+up", b"\x1b[1;4A"),
        ("ctrl+left", b"\x1b[1;5D"),
        ("ctrl+shift+right", b"\x1b[1;6C"),
        ("ctrl+alt+down", b"\x1b[1;7B"),
        ("alt+ctrl+shift+left", b"\x1b[1;8D"),
        ("shift+home", b"\x1b[1;2H"),
        ("ctrl+end", b"\x1b[1;5F"),
        ("shift+delete", b"\x1b[3;2~"),
        ("ctrl+pageup", b"\x1b[5;5~"),
        ("alt+pagedown", b"\x1b[6;3~"),
        ("ctrl+insert", b"\x1b[2;5~"),
    ],
)
def test_modified_cursor_keys_carry_xterm_modifier_codes(key: str, expected: bytes):
    assert encode_key(key, None) == expected
    # Modified cursor keys are CSI even in application-cursor mode.
    assert encode_key(key, None, app_cursor=True) == expected


@pytest.mark.parametrize(
    "key", ["super+a", "hyper+left", "caps_lock", "left_shift", "<scroll-up>", "nonsense"]
)
def test_keys_xterm_cannot_send_have_no_encoding(key: str):
    assert encode_key(key, None) is None


def _parsed_keys(*reads: str) -> list[events.Key]:
    parser = KeyParser()
    parsed = [token for data in reads for token in parser.feed(data)]
    parsed += parser.feed("")
    return [token for token in parsed if isinstance(token, events.Key)]


def _sent(*reads: str) -> bytes:
    return b"".join(encode_key(k.key, k.character) or b"" for k in _parsed_keys(*reads))


@pytest.mark.parametrize(
    "sequence",
    [
        "a", "Z", "é", "😀", " ", "\r", "\t", "\x7f", "\x1b", "\x1b[Z",
        "\x01", "\x03", "\x12", "\x02", "\x00", "\x1c", "\x1d", "\x1e", "\x1f",
        "\x1bx", "\x1bX", "\x1b.", "\x1bb", "\x1bf", "\x1b\r", "\x1b0", "\x1b1", "\x1b-",
        "\x1b=", "\x1b\t", "\x1b\x7f", "\x1b\x08", "\x1b\x01", "\x1b ", "\x1b\x1b", "\x1b;",
        "\x1b[", "\x1bO", "\x1b\x00", "\x1b\x1d", "\x1bé", "\x08", "\n",
        "\x1b[A", "\x1b[D", "\x1b[H", "\x1b[F", "\x1b[1~", "\x1b[4~", "\x1b[2~", "\x1b[3~", "\x1b[5~", "\x1b[6~",
        "\x1bOP", "\x1bOS", "\x1b[15~", "\x1b[24~",
        "\x1b[1;2A", "\x1b[1;3C", "\x1b[1;5D", "\x1b[1;6C", "\x1b[1;5H", "\x1b[5;5~",
        "\x1b[1;5P", "\x1b[15;5~", "\x1b[1;7D", "\x1b[1;8P", "\x1b[24;3~",
        # Kitty keyboard protocol, which Textual asks the terminal for.
        "\x1b[99;5u", "\x1b[120;3u", "\x1b[97;7u", "\x1b[32;5u", "\x1b[93;5u", "\x1b[27u",
    ],
)  # fmt: skip
def test_what_textual_parses_is_sent_on_unchanged(sequence: str):
    """Round trip through the app's input parser: a key typed into the app reaches the
    child as the bytes the terminal sent (kitty sequences as their legacy equivalent,
    xterm's home and end as tmux's)."""
    legacy = {
        "\x1b[H": b"\x1b[1~",
        "\x1b[F": b"\x1b[4~",
        "\x1b[99;5u": b"\x03",
        "\x1b[120;3u": b"\x1bx",
        "\x1b[97;7u": b"\x1b\x01",
        "\x1b[32;5u": b"\x00",
        "\x1b[93;5u": b"\x1d",
        "\x1b[27u": b"\x1b",
    }
    keys = _parsed_keys(sequence)
    assert len(keys) == 1, keys
    sent = encode_key(keys[0].key, keys[0].character)
    assert sent == legacy.get(sequence, sequence.encode())


# Every legacy key the parser reads, as tmux (or xterm) sends it.
LEGACY_KEYS = [
    *(chr(c) for c in range(0x20, 0x7F)), "é", "😀",
    *(chr(c) for c in range(0x00, 0x20) if c != 0x1B), "\x7f",
    *(f"\x1b{chr(c)}" for c in range(0x00, 0x80) if chr(c) not in "[O"),
    "\x1b[A", "\x1b[1;3B", "\x1b[1;7D", "\x1b[1~", "\x1b[1;5F", "\x1b[4~", "\x1b[1;2H",
    "\x1bOP", "\x1b[1;6S", "\x1b[15~", "\x1b[24;8~", "\x1b[Z",
    # shift/ctrl/alt+F3, which Textual reads as a cursor position report.
    "\x1b[1;2R", "\x1b[1;8R",
]  # fmt: skip


@given(st.lists(st.sampled_from(LEGACY_KEYS), min_size=1, max_size=12))
def test_keys_in_one_read_are_sent_on_as_they_came(keys: list[str]):
    """Keys the terminal sends together (a fast typist, tmux send-keys, a paste without
    bracketed paste) reach the child byte for byte, alt+key after alt+key included
    (Textual's parser makes ESC a ESC b into `^`, `a` and ctrl+left)."""
    data = "".join(keys)
    assert _sent(data) == data.encode()


@pytest.mark.parametrize(
    ("reads", "expected"),
    [
        # ESC, ESC [ and ESC O at the end of a read wait for what follows...
        (("\x1b", "b"), b"\x1bb"),
        (("\x1b[", "A"), b"\x1b[A"),
        (("\x1bO", "P"), b"\x1bOP"),
        (("\x1b[1;", "5A"), b"\x1b[1;5A"),
        # ...and alone they are escape, alt+[ and alt+O.
        (("\x1b",), b"\x1b"),
        (("\x1b[",), b"\x1b["),
        (("\x1bO",), b"\x1bO"),
        # ...or when what follows cannot end a sequence (and a sequence Textual does not
        # know does not swallow the keys after it).
        (("\x1bO ~",), b"\x1bO ~"),
        (("\x1b[ ~\x1bb",), b"\x1b[ ~\x1bb"),
        (("\x1b[1;3Z\x1bb",), b"\x1b[1;3Z\x1bb"),
    ],
)
def test_a_sequence_split_across_reads(reads: tuple[str, ...], expected: bytes):
    assert _sent(*reads) == expected


def test_paste_and_mouse_reports_are_textuals():
    parser = KeyParser()
    tokens = [
        *parser.feed("\x1b[200~b [\x1b[201~\x1bb"),
        *parser.feed("\x1b[<0;3;4M\x1bb"),
        *parser.feed(""),
    ]
    assert [type(t).__name__ for t in tokens] == ["Paste", "Key", "MouseDown", "Key"]
    assert isinstance(tokens[0], events.Paste) and tokens[0].text == "b ["
    assert [t.key for t in tokens if isinstance(t, events.Key)] == ["alt+b", "alt+b"]
