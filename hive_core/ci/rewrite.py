"""The PreToolUse rewrite: an agent's plain `gh run view ID --log[-failed]` becomes
`hive ci-logs view ...`, which reads the office's cache. Pure."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hive_core.ci.runs import split_repo

if TYPE_CHECKING:
    pass


# --- the PreToolUse rewrite (pure) -----------------------------------------------------------

# Only these characters: no quote, no $, no `;&|<>()`, no glob, no newline, no comment.
_PLAIN_COMMAND = re.compile(r"^[A-Za-z0-9 \t./=_-]+$")
_DIGITS = re.compile(r"^[1-9][0-9]{0,19}$")


def rewrite_command(command: str) -> str | None:
    """`hive ci-logs view ...` for a plain `gh run view ID --log[-failed] [--repo R]
    [--attempt N]`, in any order; None for anything else (which then runs untouched)."""
    if not _PLAIN_COMMAND.match(command):
        return None
    words = command.split()
    if words[:3] != ["gh", "run", "view"]:
        return None
    run: str | None = None
    log: str | None = None
    options: dict[str, str] = {}
    rest = words[3:]
    while rest:
        word, rest = rest[0], rest[1:]
        name, eq, value = word.partition("=")
        if word in ("--log", "--log-failed") and log is None:
            log = word
        elif name in ("--repo", "-R", "--attempt", "-a"):
            if not eq:
                if not rest:
                    return None
                value, rest = rest[0], rest[1:]
            option = "--repo" if name in ("--repo", "-R") else "--attempt"
            if option in options:
                return None
            options[option] = value
        elif _DIGITS.match(word) and run is None:
            run = word
        else:
            return None
    if run is None or log is None:
        return None
    if "--repo" in options:
        try:
            split_repo(options["--repo"])
        except ValueError:
            return None
    if "--attempt" in options and not _DIGITS.match(options["--attempt"]):
        return None
    extra = [w for option, value in sorted(options.items()) for w in (option, value)]
    return " ".join(["hive", "ci-logs", "view", run, log, *extra])
