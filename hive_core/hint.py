"""The `hive-office` command line a next-step hint names: one rendering for every hint
(init, doctor, the refusals, the done sentences, the explained status), so each names the
same command for the same office, and a command that works when typed."""

from __future__ import annotations

import shlex
from pathlib import Path

from hive_core.paths import resolve_home


def office_command(home: Path, *words: str) -> str:
    """`hive-office [--home HOME] WORDS...`, shell-quoted: `--home` only when `home` is
    not the one `hive-office` finds without it (here: $HIVE_HOME, else ~/.hive-office).
    No words: the office on screen (started if it does not run)."""
    argv = ["hive-office"]
    if Path(home) != resolve_home(None):
        argv += ["--home", str(home)]
    return shlex.join([*argv, *words])
