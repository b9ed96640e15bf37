"""A nudge from `hive send` to a running office: "look at this outbox now".

The watcher would find the file anyway; the kick only makes delivery immediate
without the router polling. Losing a kick loses nothing but latency.
"""

from __future__ import annotations

# The C module, not `socket`: every `hive send` runs this, and `socket` adds an enum
# build and `selectors` to the start-up of a command that sends one datagram.
import _socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hive_core import invocation
from hive_core.paths import HivePaths

if TYPE_CHECKING:
    import asyncio


def kick(paths: HivePaths, who: str) -> bool:
    """Tell a running office that `who`'s outbox changed. False if no office listens.
    In a verb the office runs (hive_core/invocation.py) the office tells itself once its
    caller has the answer: the route that follows must not hold the answer up."""
    running = invocation.current()
    if running is not None:
        running.kicks.append(who)
        return True
    try:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
    except OSError:
        return False
    try:
        sock.setblocking(False)
        sock.sendto(who.encode("ascii", "replace"), str(paths.kick_socket))
        return True
    except OSError:
        return False
    finally:
        sock.close()


class KickServer:
    """The office's end: every datagram names an outbox to look at now.

    asyncio is imported where it is used: the sending side above runs in every `hive
    send` and must not pay for it.
    """

    def __init__(self, path: Path, on_kick: Callable[[str], None]) -> None:
        self.path = path
        self._on_kick = on_kick
        self._transport: asyncio.DatagramTransport | None = None
        self._bound: tuple[int, int] | None = None

    async def start(self) -> None:
        import asyncio
        import os
        import socket

        from hive_core.listen import identity

        self.path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(str(self.path))
            os.chmod(self.path, 0o600)
        except OSError:
            sock.close()
            raise
        on_kick = self._on_kick

        class Kicks(asyncio.DatagramProtocol):
            def datagram_received(self, data: bytes, addr: object) -> None:
                on_kick(data[:64].decode("ascii", "replace"))

        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.create_datagram_endpoint(Kicks, sock=sock)
        self._bound = identity(self.path)

    async def stop(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self.path.unlink(missing_ok=True)

    async def ensure(self) -> bool:
        """Listen again if the socket file is gone or replaced (control.keep_sockets)."""
        from hive_core.listen import identity

        if self._transport is None or identity(self.path) == self._bound:
            return False
        await self.stop()
        await self.start()
        return True
