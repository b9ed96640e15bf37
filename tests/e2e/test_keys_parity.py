"""Keys, byte for byte: a program run as the focused agent in hive-office reads, for every
key the app does not claim, the bytes it reads in a plain tmux pane.

The harness of tests/tmux_support.py: hive-office in tmux on an office of bash agents,
and a plain tmux pane beside it. tests/fixtures/key_log.py runs in both and logs every
byte it reads; the same `tmux send-keys` key names go to both, each followed by a
separator, and the logs are compared key by key. The expectation is whatever tmux sends:
nothing is recorded. It runs twice: with the program in the normal modes, and in the
modes vim and less set (alternate screen, application cursor and keypad keys).

The app's own keys are not sent (they are not the program's): see CLAIMED. A program
that asks for the kitty keyboard protocol (which tmux 3.3 does not have) gets it, as the
protocol's specification encodes each key.
"""

from __future__ import annotations

import functools
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import short_dir, wait_for
from tests.tmux_support import TmuxOffice, row_text

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux not installed (scripts/setup installs it)"
)

KEY_LOG = Path(__file__).parents[1] / "fixtures" / "key_log.py"
END = "end-of-keys"
# Sent after every key: plain text, which no key's bytes contain.
SEPARATOR = " ~~ "

# The keys hive-office keeps for itself (README, "Keys"), with why.
CLAIMED = {
    "C-]": "the prefix (office.toml prefix_key); the prefix twice sends it on",
    **{
        f"M-{n}": "focus agent N (office.toml alt_digits = false gives it up)" for n in range(1, 10)
    },
    # On the main screen only: there they scroll the pane's history, as the wheel does.
    "S-PgUp": "scrolls the pane's history (main screen only)",
    "S-PgDn": "scrolls the pane's history (main screen only)",
}
# On the alternate screen (vim, less) shift+pageup/pagedown are the program's.
CLAIMED_ON_ALTERNATE_SCREEN = {"C-]", *(f"M-{n}" for n in range(1, 10))}

MODIFIERS = ("", "S-", "C-", "M-", "C-S-", "S-M-", "C-M-", "C-S-M-")
SPECIAL = (
    *(f"F{n}" for n in range(1, 13)),
    "Up", "Down", "Left", "Right", "Home", "End", "PgUp", "PgDn", "IC", "DC",
)  # fmt: skip
# tmux reads `;` at the end of an argument as the end of its command: escaped.
PUNCTUATION = [c if c != ";" else "\\;" for c in "`~!@#$%^&*()-_=+{}|\\:'\",<.>/?"]
# tmux refuses a command line over its message size: this many keys go in one.
BATCH = 40
# ESC [ and ESC O begin sequences: alt+[ and alt+O are told apart by the pause after them
# (tmux's escape-time, the app's escape delay), so they are sent on their own.
SOLO = ("M-[", "M-O", "Escape")


def key_table() -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    keys = [
        *(f"M-{c}" for c in letters),
        *(f"M-{c.upper()}" for c in letters if c != "o"),
        *(f"C-{c}" for c in letters),
        *(f"C-M-{c}" for c in letters),
        *(f"M-{d}" for d in "0123456789"),
        *(f"M-{p}" for p in PUNCTUATION if p != "["),
        "M-]",
        *("Enter", "Tab", "BSpace", "Space", "BTab"),
        *(f"{m}{k}" for m in ("M-", "C-") for k in ("Enter", "Tab", "BSpace", "Space")),
        "C-M-Space",
        "M-BTab", "M-Escape",
        *(f"{m}{c}" for m in ("C-", "C-M-") for c in ("\\", "_", "^", "@", "/")),
        *(f"{m}{k}" for m in MODIFIERS for k in SPECIAL),
    ]  # fmt: skip
    return keys


@pytest.fixture(scope="module")
def office() -> Iterator[TmuxOffice]:
    with short_dir() as root:
        office = TmuxOffice(root, cols=120, rows=40)
        try:
            yield office
        finally:
            office.close()


def _log(office: TmuxOffice, target: str, mode: str) -> Path:
    """Start the key logger in `target`'s pane; its log, once it reads."""
    log = office.root / f"keys-{target}-{mode}.log"
    tag = f"{target}-{mode}"
    office.tmux.type(target, f"clear; {sys.executable} {KEY_LOG} {log} {tag} {mode}")
    screen = office.office_screen if target == "office" else office.ref_screen
    wait_for(
        lambda: any(row_text(r) == f"logging keys ({tag}):" for r in screen()),
        f"the key logger in the {target} pane",
        30,
    )
    return log


def _read(log: Path) -> bytes:
    return log.read_bytes() if log.exists() else b""


def _grew(log: Path, size: int) -> bool:
    return len(_read(log)) > size


def _arrived(log: Path, keys: int) -> bool:
    return _read(log).count(SEPARATOR.encode()) >= keys


def _ended(log: Path) -> bool:
    return _read(log).endswith(END.encode())


def _send(office: TmuxOffice, keys: list[str], logs: dict[str, Path]) -> None:
    """Each key then the separator, BATCH keys to a tmux command; a SOLO key on its own,
    once every key before it has arrived, and waited for before its separator."""
    batch: list[str] = []

    def flush() -> None:
        for target in logs:
            args = [a.replace("TARGET", target) for a in batch]
            if args:
                office.tmux(*args[:-1])  # without the last ";"
        batch.clear()

    for sent, key in enumerate(keys):
        if key in SOLO:
            flush()
            for target, log in logs.items():
                wait_for(functools.partial(_arrived, log, sent), f"the keys in {target}", 10)
                before = len(_read(log))
                office.tmux.keys(target, key)
                wait_for(functools.partial(_grew, log, before), f"{key} in {target}", 10)
        else:
            batch += ["send-keys", "-t", "TARGET", key, ";"]
        batch += ["send-keys", "-t", "TARGET", "-l", SEPARATOR, ";"]
        if len(batch) >= BATCH * 12:
            flush()
    flush()
    for target in logs:
        office.tmux.type(target, END, enter=False)
    for target, log in logs.items():
        wait_for(functools.partial(_ended, log), f"the end in {target}", 30)


@pytest.mark.parametrize("mode", ["normal", "app"])
def test_every_key_reaches_the_program_as_tmux_sends_it(office: TmuxOffice, mode: str) -> None:
    claimed = CLAIMED.keys() if mode == "normal" else CLAIMED_ON_ALTERNATE_SCREEN
    keys = [k for k in [*key_table(), *SOLO] if k not in claimed]
    logs = {target: _log(office, target, mode) for target in ("office", "ref")}
    _send(office, keys, logs)

    def per_key(log: Path) -> list[bytes]:
        data = _read(log).removesuffix(END.encode())
        return data.split(SEPARATOR.encode())[:-1]

    got, want = per_key(logs["office"]), per_key(logs["ref"])
    assert len(want) == len(keys), "tmux did not send every key"
    # tmux itself sends something for nearly every key (not for ctrl+enter, ctrl+tab and
    # ctrl+backspace without its extended-keys): a comparison of nothings proves nothing.
    assert sum(1 for w in want if w) > len(keys) - 20
    differ = [
        f"{key}: office {g!r}, tmux {w!r}"
        for key, g, w in zip(keys, got, want, strict=False)
        if g != w
    ]
    assert len(got) == len(want) and not differ, (
        f"{len(differ)} of {len(keys)} keys differ ({mode} modes):\n" + "\n".join(differ[:40])
    )


# The kitty keyboard protocol's encodings at its first level (disambiguate escape codes),
# from its specification: https://sw.kovidgoyal.net/kitty/keyboard-protocol/
KITTY_LEVEL_1 = {
    "M-a": b"\x1b[97;3u",
    "C-a": b"\x1b[97;5u",
    "C-M-a": b"\x1b[97;7u",
    "M-Enter": b"\x1b[13;3u",
    "M-.": b"\x1b[46;3u",
    "BTab": b"\x1b[9;2u",
    "a": b"a",
    "Enter": b"\r",
    "Tab": b"\t",
    "BSpace": b"\x7f",
    "Up": b"\x1b[A",
    "C-Up": b"\x1b[1;5A",
    "F1": b"\x1b[P",
    "F3": b"\x1b[13~",
    "S-F5": b"\x1b[15;2~",
    "Escape": b"\x1b[27u",
}


def test_a_program_that_asks_for_the_kitty_protocol_gets_it(office: TmuxOffice) -> None:
    log = _log(office, "office", "kitty")
    keys = list(KITTY_LEVEL_1)
    _send(office, keys, {"office": log})
    data = _read(log).removesuffix(END.encode())
    # The terminal said it has the protocol, at the level asked for.
    assert data.startswith(b"\x1b[?1u"), data[:20]
    got = data.removeprefix(b"\x1b[?1u").split(SEPARATOR.encode())[:-1]
    differ = [
        f"{key}: {g!r}, the protocol says {KITTY_LEVEL_1[key]!r}"
        for key, g in zip(keys, got, strict=False)
        if g != KITTY_LEVEL_1[key]
    ]
    assert len(got) == len(keys) and not differ, "\n".join(differ)
