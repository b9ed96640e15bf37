"""The office's one guard process: kills what is left of every agent session when the
office dies, even by SIGKILL (see pty_session.py for where it fits).

    office -> stdin: "+<sid>\\n" watch a session, "-<sid>\\n" forget it (it ended cleanly)
    stdin at EOF: the office is gone; SIGKILL every process group with a live member in
    a watched session, until they are empty or a deadline passes, then exit.

A clean office forgets every session before it exits, so EOF finds nothing to kill.
Run as `<python> -I -S <this file>`: it imports only os, signal, sys and time and nothing
from hive_core, so it costs about one bare interpreter (a few MB) for the whole office
instead of a fully imported Python per agent. The office also imports the /proc scan
from here, so there is one reading of /proc/<pid>/stat.
"""

import os
import signal
import sys
import time

POLL_INTERVAL = 0.02
# After SIGKILL a process normally vanishes at once; this bounds the wait for one stuck
# in uninterruptible sleep, or for a member we may not signal.
KILL_WAIT = 2.0


def session_groups(sids: set[int]) -> dict[int, set[int]]:
    """{sid: process groups with a live (not zombie) member in session sid}, from /proc;
    sessions without a live member are absent."""
    found: dict[int, set[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited since listdir
            continue
        # The command name may hold spaces and parentheses; the fields after the last
        # ')' are fixed: state, ppid, pgrp, session.
        state, _ppid, pgrp, session = stat[stat.rindex(b")") + 2 :].split()[:4]
        sid = int(session)
        if sid in sids and state not in (b"Z", b"X"):
            found.setdefault(sid, set()).add(int(pgrp))
    return found


def signal_sessions(sids: set[int], sig: int) -> set[int]:
    """Send sig to every process group in the given sessions; the sids that had members.

    Groups, not pids, so a process forked between the scan and the kill is hit too.
    """
    found = session_groups(sids)
    for groups in found.values():
        for pgrp in groups:
            try:  # noqa: SIM105 (contextlib would double this guard's start-up imports)
                os.killpg(pgrp, sig)
            except (ProcessLookupError, PermissionError):
                pass
    return set(found)


def main() -> None:
    watched: set[int] = set()
    for line in sys.stdin.buffer:
        # A line cut short by the office's death carries no complete request.
        if len(line) < 3 or not line.endswith(b"\n") or not line[1:-1].isdigit():
            continue
        sid = int(line[1:-1])
        if line[:1] == b"+":
            watched.add(sid)
        elif line[:1] == b"-":
            watched.discard(sid)
    deadline = time.monotonic() + KILL_WAIT
    while watched and time.monotonic() < deadline:
        watched = signal_sessions(watched, signal.SIGKILL)
        if watched:
            time.sleep(POLL_INTERVAL)


if __name__ == "__main__":
    main()
