"""What `ps` shows every user: the argv of this user's processes on this machine (which
is also "the host" of the private sshd, so both ends of a remote desk are here)."""

from __future__ import annotations

import os
from pathlib import Path


def argv_holding(value: str) -> list[str]:
    """Each process of this user whose argv holds `value`, as "pid: argv"."""
    wanted, uid = value.encode(), os.getuid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            argv = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if wanted in argv:
            words = argv.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {words}")
    return found
