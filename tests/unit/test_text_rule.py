"""The one rule for what in someone else's text a terminal must not obey (hive_core/text.py),
and the views that print agents' text through it: C0 and C1 controls and the bidi
embeddings, overrides and isolates are shown as escapes (or dropped where the text is
stored for another agent), while tab, newline, the bidi marks and real right-to-left
text come through as they are."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from hive_core import render
from hive_core.remote.plan import tail_reason
from hive_core.routing.rules import clean_line, clean_text
from hive_core.schema import LogEvent, Message
from hive_core.status import limit_texts
from hive_core.text import shown, stripped

BIDI_CONTROLS = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
UNSAFE = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), *BIDI_CONTROLS]


def test_every_unsafe_character_is_shown_as_an_escape_and_nothing_else_changes() -> None:
    for code in UNSAFE:
        escaped = shown(f"a{chr(code)}b")
        assert escaped == (f"a\\x{code:02x}b" if code < 0x100 else f"a\\u{code:04x}b")
    # Tab and newline are text in a body; on one line they are escaped too.
    assert shown("a\tb\nc") == "a\tb\nc"
    assert shown("a\tb\nc", lines=False) == "a\\x09b\\x0ac"
    # The bidi marks and real right-to-left text are left alone (text.py says why).
    hebrew = "\u05e9\u05dc\u05d5\u05dd \u200f(1)\u200e \u0645\u0631\u062d\u0628\u0627\u061c"
    assert shown(hebrew) == hebrew


@given(st.text())
def test_what_is_shown_holds_no_control_and_no_bidi_override(text: str) -> None:
    for out in (shown(text), stripped(text)):
        assert not any(
            (unicodedata.category(c) == "Cc" and c not in "\t\n") or ord(c) in BIDI_CONTROLS
            for c in out
        )
    assert shown(text).count("\n") == text.count("\n")


def test_a_terminals_own_output_loses_whole_sequences_but_keeps_its_words() -> None:
    out = "\x1b[1;31mConnection to h closed\x1b]0;title\x07 by\x9b remote\u202e host.\x1b(B"
    assert stripped(out, sequences=True) == "Connection to h closed by remote host."
    assert stripped(out, lines=False, sequences=True, by=" ").split() == [
        "Connection", "to", "h", "closed", "by", "remote", "host."
    ]  # fmt: skip


def test_hive_read_shows_c1_controls_and_bidi_overrides_as_escapes() -> None:
    msg = Message(
        id="20261205T120000000000Z-ab",
        conversation="c1",
        in_reply_to=None,
        sender="jim",
        to="pam",
        act="inform",
        subject="invoice \u202egpj.exe",
        body="line one\n\x9b2J\tcleared?\n\u2066isolated\u2069 \x85end",
        created_at="2026-12-05T12:00:00Z",
    )
    text = render.message(msg, "unread")
    assert "subject:     invoice \\u202egpj.exe" in text
    assert "line one\n\\x9b2J\tcleared?\n\\u2066isolated\\u2069 \\x85end" in text
    assert not any(ord(c) in UNSAFE and c not in "\t\n" for c in text)
    # The inbox's one-line view and the log's lines: the same rule.
    listed = render.inbox([msg])
    assert "invoice \\u202egpj.exe" in listed and "\u202e" not in listed
    logged = render.log_event(
        LogEvent(ts="2026-12-05T12:00:00Z", kind="route", sender="jim\u202e", to="pam")
    )
    assert "jim\\u202e -> pam" in logged


def test_routed_text_ssh_words_and_limit_text_use_the_same_rule() -> None:
    # Stored for another agent: dropped, lines kept in a body, none in a subject.
    assert clean_text("a\u202eb\n\x9bc\td") == "ab\nc\td"
    assert clean_line("a\u2067b\nc\x85d") == "ab c d"
    # ssh's line at the end of a remote desk's output, escape codes and all.
    tail = b"$ \x1b[0mConnection to box closed by remote host.\x1b[K\r\n"
    assert tail_reason(tail) == "Connection to box closed by remote host."
    # A pane's screen line: the emulator took the escape codes, the characters are left.
    assert limit_texts(["API Error: 429 \u202eslow\x9b down"]) == ["API Error: 429 slow down"]


def test_a_memory_hits_file_name_is_shown_not_obeyed() -> None:
    from hive_core.cli.memory_cmd import _render
    from hive_core.memory.entry import Entry
    from hive_core.memory.store import Hit

    entry = Entry(
        source="note",
        external_id="n1",
        owner="jim",
        scope="own",
        text="the CI runner has no GPU",
        path="agents/jim/notes/\x1b]52;c;cm0gLXJm\x07\u202etxt.md",
        created_at="2026-12-05T12:00:00Z",
        updated_at="2026-12-05T12:00:00Z",
    )
    shown_hits = _render([Hit(id="note:n1", score=1.0, entry=entry)])
    assert "agents/jim/notes/\\x1b]52;c;cm0gLXJm\\x07\\u202etxt.md" in shown_hits
    assert "the CI runner has no GPU" in shown_hits
