"""Where copy mode's `y` puts the text, and the line that tells the person.

Inside tmux ($TMUX set) the text goes into tmux's paste buffer with `tmux load-buffer -w -`,
as tmux's own copy mode does: the prefix and `]` paste it, and -w hands it on to the
outer terminal's clipboard where tmux can. An OSC 52 from a program reaches tmux only
with `set -g set-clipboard on`; under the default (`external`) tmux drops it without a
word, so inside tmux none is written. Elsewhere the text goes to the terminal as OSC 52,
which most terminals put on the clipboard (some must be told to allow it); whether it
did, the terminal does not say.
"""

from __future__ import annotations

import asyncio
import os

TMUX_BUFFER = "tmux's paste buffer (prefix ] pastes it)"
TERMINAL = "the terminal's clipboard (OSC 52, if your terminal allows it)"


def in_tmux() -> bool:
    return bool(os.environ.get("TMUX"))


def amount(text: str) -> str:
    """ "12 characters on 1 line", "40 characters on 3 lines"."""
    chars = len(text)
    lines = text.count("\n") + 1
    return (
        f"{chars} character{'s' if chars != 1 else ''} on {lines} line{'s' if lines != 1 else ''}"
    )


def copied(text: str, where: str) -> str:
    return f"Copied {amount(text)} to {where}."


def not_copied(text: str, why: str) -> str:
    return f"Could not copy {amount(text)} to tmux's paste buffer: {why}. Sent to {TERMINAL}."


async def to_tmux_buffer(text: str) -> str | None:
    """Put `text` in the paste buffer of the tmux the app runs in; None, or why not."""
    try:
        process = await asyncio.create_subprocess_exec(
            "tmux",
            "load-buffer",
            "-w",
            "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as error:
        return f"tmux could not be run ({error.strerror})"
    _, err = await process.communicate(text.encode())
    if process.returncode:
        return err.decode(errors="replace").strip() or f"tmux exited {process.returncode}"
    return None
