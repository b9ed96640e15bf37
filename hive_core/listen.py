"""The office's private Unix sockets: how each is made, who is on the other end, and
whether the file is still the one the office listens on.

Every server of the office (control, hook, client, a remote desk's own two) listens the
same way: in a 0700 folder, on a socket file that is 0600 from its first moment (made
under umask 0177, so no other user has a window to connect), with BACKLOG queued
connections and the descriptor limit raised first. Who connects is what the kernel says
(SO_PEERCRED); what the office then makes of it is control.attribute's rule.

`keep_sockets` (control.py) puts back a socket whose file vanished: `identity` is what a
server bound, to tell.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from hive_core.conncap import BACKLOG, raise_fd_limit

# A client that connects and says nothing is dropped after this long (the control and
# hook sockets; the client socket has its own Hello deadline).
READ_TIMEOUT_S = 5.0

_PEERCRED = struct.Struct("3i")  # pid, uid, gid


class Peer(NamedTuple):
    pid: int
    uid: int


def peer(sock: socket.socket | None) -> Peer | None:
    """The process on the other end of a Unix connection, as the kernel says; None if it
    cannot be told."""
    if sock is None:
        return None
    try:
        pid, uid, _gid = _PEERCRED.unpack(
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
        )
    except OSError:
        return None
    return Peer(pid, uid)


def identity(path: Path) -> tuple[int, int] | None:
    """The (device, inode) of the socket file at `path`, None if there is none: what a
    server bound, to notice later that the file was removed or replaced."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


StreamHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _private_folder(path: Path) -> None:
    # run/ exists; run/desks may not (or may have been removed with its sockets).
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    path.unlink(missing_ok=True)


async def listen_streams(
    path: Path, serve: StreamHandler, *, limit: int
) -> tuple[asyncio.Server, tuple[int, int] | None]:
    """A stream server on `path` (lines up to `limit` bytes), and the file's identity."""
    raise_fd_limit()
    _private_folder(path)
    old_umask = os.umask(0o177)
    try:
        server = await asyncio.start_unix_server(
            serve, path=str(path), limit=limit, backlog=BACKLOG
        )
    finally:
        os.umask(old_umask)
    return server, identity(path)


async def listen_protocol(
    path: Path, factory: Callable[[], asyncio.Protocol]
) -> tuple[asyncio.Server, tuple[int, int] | None]:
    """A server of `factory`'s protocols on `path`, and the file's identity."""
    raise_fd_limit()
    _private_folder(path)
    old_umask = os.umask(0o177)
    try:
        server = await asyncio.get_running_loop().create_unix_server(
            factory, path=str(path), backlog=BACKLOG
        )
    finally:
        os.umask(old_umask)
    return server, identity(path)


class Listening:
    """One office socket while it listens: the server `open_server` makes on `path`, the
    file it bound, and listening again when that file is gone or replaced (an agent's
    `rm run/control.sock` must not leave callers with "no office": control.keep_sockets).
    The control, hook and client servers each hold one."""

    def __init__(
        self,
        path: Path,
        open_server: Callable[[], Awaitable[tuple[asyncio.Server, tuple[int, int] | None]]],
    ) -> None:
        self.path = path
        self._open = open_server
        self._server: asyncio.Server | None = None
        self._bound: tuple[int, int] | None = None

    async def start(self) -> None:
        self._server, self._bound = await self._open()

    async def close(self) -> None:
        """Stop listening; the connections being served are left to their owner."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def stop(self) -> None:
        await self.close()
        self.path.unlink(missing_ok=True)

    async def ensure(self) -> bool:
        """Listen again if the socket file is gone or replaced; True if it had to."""
        if self._server is None or identity(self.path) == self._bound:
            return False
        # Not waiting for it to close: that waits for every connection it is serving.
        self._server.close()
        self._server = None
        await self.start()
        return True
