"""How many connections one of the office's sockets holds at once.

Every process of the office's user can connect to its sockets (hook, control, client),
and each connection is a file descriptor of the office until it is closed. An agent
that opens thousands and says nothing would, unbounded, take every descriptor the
office has: routing, commits and the other sockets would fail with EMFILE. So each
socket holds at most CONNECTIONS_MAX. Past it, the connection that has waited longest
without saying anything (no request line, no Hello) is closed to make room: a real
caller speaks at once, so it is the flood that loses its connections, not `hive send`
or a hook. A connection that has spoken and is being served (a verb running, an
attached app) is never closed for room; when all of them are, the new one is refused.

What was closed is told once when it starts and once when it ends (with the count), not
once a connection: a flood must not become a log storm.
"""

from __future__ import annotations

import resource
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

# Per socket. Far above what a floor of agents uses at once (a hook or a verb each), and
# above what the office accepts in one turn of its loop (asyncio takes up to its listen
# backlog, 100, at a time): a caller that speaks at once has said its request before a
# burst can push it out. Far below the descriptors the office has (FD_SOFT_WANTED), with
# every socket at its cap.
CONNECTIONS_MAX = 256
# The soft descriptor limit the office asks for when it starts listening, if the hard
# limit allows: the common default soft limit (1024) holds the caps of the office's own
# sockets, but not with remote desks (two sockets each) and the office's other files
# (ptys, logs, git, sqlite) besides. Not the hard limit itself: the office's children
# inherit it, and a program using select() breaks on descriptors past 1024 it might open.
FD_SOFT_WANTED = 8192

# Connections the kernel queues for a socket before the office accepts them (asyncio's
# default is 100). A queued connection costs the office nothing, and a burst of a flood
# that fills the queue makes a caller's connect fail at once (EAGAIN).
BACKLOG = 1024

C = TypeVar("C", bound=Hashable)


class ConnectionCap(Generic[C]):
    """The open connections of one socket, oldest first; see the module docstring.
    `evict(conn)` closes a connection the cap takes back; `told(line)` logs."""

    def __init__(
        self,
        name: str,
        evict: Callable[[C], object],
        told: Callable[[str], None],
        limit: int = CONNECTIONS_MAX,
    ) -> None:
        self.name = name
        self.limit = limit
        self._evict = evict
        self._told = told
        # Connected, not yet spoken: dicts keep insertion order, the oldest first.
        self._silent: dict[C, None] = {}
        self._serving: set[C] = set()
        self._closed = 0  # taken back or refused during this flood

    @property
    def open(self) -> int:
        return len(self._silent) + len(self._serving)

    def admit(self, conn: C) -> bool:
        """Take a new connection; False if it must be closed at once (every connection
        held is being served)."""
        if self.open >= self.limit:
            if not self._closed:
                self._told(
                    f"{self.name}: more than {self.limit} connections at once; the ones "
                    "that say nothing are closed, oldest first, until it stops"
                )
            self._closed += 1
            if not self._silent:
                return False
            oldest = next(iter(self._silent))
            del self._silent[oldest]
            self._evict(oldest)
        self._silent[conn] = None
        return True

    def spoke(self, conn: C) -> bool:
        """The connection said what it wants: it is being served, never taken back.
        False if the cap took it back already (what it read is the end the close made)."""
        if conn not in self._silent:
            return False
        del self._silent[conn]
        self._serving.add(conn)
        return True

    def left(self, conn: C) -> None:
        self._silent.pop(conn, None)
        self._serving.discard(conn)
        if self._closed and self.open <= self.limit // 2:
            self._told(f"{self.name}: {self._closed} connections over the cap were closed")
            self._closed = 0


def raise_fd_limit(wanted: int = FD_SOFT_WANTED) -> int:
    """Raise this process's soft descriptor limit to `wanted` (at most the hard limit);
    never lowers it. The soft limit in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft
        return target
    return soft
