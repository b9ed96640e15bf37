"""Typing into an agent as a paste: bracketed only where the program asked for it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hive_core.desks.paste import MODE_TAIL, PASTE_END, PASTE_START, paste_mode, pasted
from tests.effects.test_pty_session import ENV, Pane, run, spawned

ON, OFF = b"\x1b[?2004h", b"\x1b[?2004l"


@pytest.mark.parametrize(
    ("data", "before", "after"),
    [
        (b"plain text", False, False),
        (b"plain text", True, True),
        (ON, False, True),
        (OFF, True, False),
        (b"$ " + ON + b"ls\r\n" + OFF, False, False),
        (OFF + b"..." + ON, False, True),
        (b"\x1b[?1;2004h", False, True),  # several modes in one sequence
        (b"\x1b[?1049h\x1b[?25l", False, False),  # other modes leave it alone
        (b"\x1b[?20040h", False, False),  # not mode 2004
    ],
)
def test_paste_mode_follows_the_childs_requests(data: bytes, before: bool, after: bool) -> None:
    assert paste_mode(data, before) is after


@given(st.binary(max_size=40), st.binary(max_size=40), st.integers(0, len(ON)))
def test_a_request_cut_by_a_read_boundary_is_still_seen(pre: bytes, post: bytes, cut: int) -> None:
    """What the pty session does: the last MODE_TAIL bytes of one read go before the
    next. A request split anywhere between two reads is seen once both have come."""
    stream = pre.replace(b"\x1b", b"") + ON + post.replace(b"\x1b", b"")
    split = len(pre.replace(b"\x1b", b"")) + cut
    first, second = stream[:split], stream[split:]
    on = paste_mode(first, False)
    on = paste_mode(first[-MODE_TAIL:] + second, on)
    assert on


def test_pasted_brackets_only_when_asked() -> None:
    assert pasted("echo hi\n", True) == PASTE_START + b"echo hi\n" + PASTE_END
    assert pasted("echo hi\n", False) == b"echo hi\n"


@pytest.mark.parametrize(
    ("argv", "bracketed"),
    [
        (["bash", "--norc", "--noprofile", "-i"], True),  # readline asks for it
        (["sh", "-i"], False),  # dash never does
    ],
)
def test_typed_text_runs_in_a_shell_with_or_without_bracketed_paste(
    tmp_path: Path, argv: list[str], bracketed: bool
) -> None:
    """dash shows paste marks as junk: the command would fail. Each shell gets what it
    understands, and the command runs."""

    async def main() -> None:
        env = {**ENV, "PS1": "$ ", "TERM": "xterm-256color"}
        async with spawned(argv, tmp_path, env=env) as s:
            pane = Pane(s)
            await pane.until(b"$ ")
            assert s.bracketed_paste is bracketed
            s.write(pasted("echo $((6*7)) > answer", s.bracketed_paste))
            s.write(b"\r")
            await pane.until(lambda: (tmp_path / "answer").exists())
        assert (tmp_path / "answer").read_text() == "42\n"

    run(main())
