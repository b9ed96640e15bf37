"""What an agent leaves behind: the office adopts it, so it is never the person.

The office makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER, Linux). Each
agent's CLI is one too (pty_session.py), so what leaves an agent's session (`setsid`, a
double fork, a daemon) is re-parented to the CLI while it lives, and to the office once
it is gone, never to init. Whatever an agent started therefore always has the office
as an ancestor, and the control socket (control.py) refuses a process below the office
that is in no live agent's session: a stray, which acts for nobody.

Strays need two things from the office:

- reaping: an adopted process that exits is a zombie of the office until waited for.
  The office's own children are waited for by whoever started them (subprocess, the
  asyncio child watcher, PtySession), and a status taken from under them is lost (a
  failed git would read as success). So only a child that cannot be one of those is
  reaped: one in a session other than the office's (every child the office starts in
  its own session stays there) that is neither an agent's CLI nor another child the
  office starts in a session of its own (the guard; relayed verbs and the worktree
  runner's git and ssh: `own`, where any such child must be named), and that was
  already such a child one sweep earlier (a CLI just forked is named a moment after
  the fork). It is reaped by its pid alone (never waitpid(-1)).
- an end: what an agent started outside its CLI's session (below the CLI at a sweep,
  or adopted carrying an agent's HIVE_AGENT_ID) has its session told to the guard
  (pty_session.py), which kills it when the office exits, even by SIGKILL, like an
  agent's own session; a session with no live member left is forgotten again. At a
  clean stop the office kills them itself once its agents are stopped (`end`).
  Only what is known to be an agent's is ended: a program that hosts the office in its
  own process (a test) may have daemons of its own below it.

Not covered: a process an agent has another service start (cron, `systemd-run --user`,
`at`, a tmux server the person already runs) is not below the office at all; see
control.py for what the office makes of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import glob
import os
import signal
import time
from collections.abc import Callable, Collection, Mapping
from typing import NamedTuple

from hive_core.desks import pty_session, session_guard

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_LIBC = ctypes.CDLL(None, use_errno=True)
# How often strays are looked for: a zombie costs only a pid meanwhile.
SWEEP_S = 2.0


def subreaper() -> bool:
    """Whether this process adopts its descendants' orphans now."""
    was = ctypes.c_int(0)
    if _LIBC.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_GET_CHILD_SUBREAPER): {os.strerror(err)}")
    return bool(was.value)


def set_subreaper(on: bool) -> bool:
    """Make this process adopt its descendants' orphans (or stop); whether it did
    before. OSError if refused."""
    was = subreaper()
    if _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")
    return was


def children() -> set[int]:
    """This process's children, from every thread's list in /proc (an adopted orphan
    is listed under whichever thread the kernel gave it to)."""
    found: set[int] = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        with contextlib.suppress(OSError), open(path, "rb") as f:
            found.update(int(word) for word in f.read().split())
    return found


class Proc(NamedTuple):
    ppid: int
    sid: int
    zombie: bool


def processes() -> dict[int, Proc]:
    """Every process in /proc: its parent, session and whether it is a zombie."""
    table: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # exited since listdir
            continue
        state, ppid, _pgrp, sid = stat[stat.rindex(b")") + 2 :].split()[:4]
        table[int(name)] = Proc(int(ppid), int(sid), state in (b"Z", b"X"))
    return table


def below(table: Mapping[int, Proc], root: int) -> set[int]:
    """The descendants of `root` in `table`."""
    kids: dict[int, list[int]] = {}
    for pid, proc in table.items():
        kids.setdefault(proc.ppid, []).append(pid)
    found: set[int] = set()
    todo = list(kids.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(kids.get(pid, ()))
    return found


def strays_among(
    kids: Collection[int], table: Mapping[int, Proc], own_sid: int, own: Collection[int]
) -> set[int]:
    """The children that are no one's but the office's as a subreaper: in a session
    other than the office's, and not one the office started in a session of its own."""
    return {
        pid
        for pid in kids
        if pid not in own and (proc := table.get(pid)) is not None and proc.sid != own_sid
    }


def agents_born(table: Mapping[int, Proc], roots: Collection[int]) -> set[int]:
    """`roots` still in `table` and everything below them."""
    found = {pid for pid in roots if pid in table}
    for pid in list(found):
        found |= below(table, pid)
    return found


def has_agent_env(pid: int) -> bool:
    """Whether process `pid` carries an agent's identity (the office gives one to every
    process of a desk; one that dropped it is known only if a sweep saw it earlier)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return False
    return environ.startswith(b"HIVE_AGENT_ID=") or b"\0HIVE_AGENT_ID=" in environ


def _own_sessions() -> set[int]:
    """The children this process started in a session of their own and waits for
    itself: each agent's CLI not yet reaped, and the guard."""
    guard = pty_session.guard_pid()
    return set(pty_session.cli_sessions()) | ({guard} if guard is not None else set())


class Strays:
    """The office's adopted orphans: reaped when they exit, ended with the office."""

    def __init__(self, own: Callable[[], Collection[int]] = frozenset) -> None:
        """`own`: the pids of children the office starts in a session of their own
        besides the agents' CLIs (pty_session's) and the guard (relayed verbs)."""
        self._own = own
        self._seen: set[int] = set()
        # Processes an agent started, as far as the sweeps saw, and their sessions the
        # guard was told of.
        self._born: set[int] = set()
        self._watched: set[int] = set()

    def sweep(self) -> set[int]:
        """One look: reap the adopted children that exited, tell the guard the sessions
        of what agents started outside their CLIs' sessions (so they end with the
        office), forget those left empty. The strays among the children."""
        own_sid = os.getsid(0)
        table = processes()
        strays = self._reap(table, own_sid)
        clis = pty_session.cli_sessions()
        adopted = {pid for pid in strays if has_agent_env(pid)}
        self._born = agents_born(table, self._born | adopted | clis) - clis
        live = (
            {proc.sid for pid in self._born if not (proc := table[pid]).zombie}
            - _own_sessions()
            - {own_sid}
        )
        for sid in live - self._watched:
            pty_session.guard_session(sid, True)
        for sid in self._watched - live:
            pty_session.guard_session(sid, False)
        self._watched = live
        return strays

    def _reap(self, table: Mapping[int, Proc], own_sid: int) -> set[int]:
        """Reap the strays among the children that were strays at the last look too;
        the strays now."""
        strays = strays_among(children(), table, own_sid, set(self._own()) | _own_sessions())
        for pid in strays & self._seen:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        self._seen = strays
        return strays

    def end(self) -> None:
        """At the office's stop, once its agents are stopped: kill what agents started
        that is still below the office, reaping it, until none is left or KILL_WAIT has
        passed (the guard still ends their sessions if this process dies first)."""
        deadline = time.monotonic() + session_guard.KILL_WAIT
        while time.monotonic() < deadline:
            self.sweep()
            table = processes()
            left = [pid for pid in self._born if pid in table and not table[pid].zombie]
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if not left:
                self._reap(processes(), os.getsid(0))
                return
            time.sleep(session_guard.POLL_INTERVAL)

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep every SWEEP_S until `stop`, on a thread (it reads /proc)."""
        while not stop.is_set():
            await asyncio.to_thread(self.sweep)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SWEEP_S)
