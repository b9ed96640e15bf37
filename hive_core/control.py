"""The control socket: the person's commands to a running office without a screen.

`hive-office type AGENT TEXT` types into an agent's terminal as the person would (the
app's panes do the same through the same Office methods), `pause`/`resume` hold an
agent at its next hook. A Unix socket in run/ (folder 0700, socket 0600): only the
person's own user can reach it, the same trust as their keyboard.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

from hive_core.schema import ControlReply, ControlRequest

Handler = Callable[[ControlRequest], Awaitable[ControlReply]]
_decode = msgspec.json.Decoder(ControlRequest).decode
_decode_reply = msgspec.json.Decoder(ControlReply).decode
_encode = msgspec.json.Encoder().encode
FRAME_MAX = 1 << 20


class ControlServer:
    def __init__(self, path: Path, handle: Handler) -> None:
        self.path = path
        self._handle = handle
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self.path.unlink(missing_ok=True)
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=FRAME_MAX
            )
        finally:
            os.umask(old_umask)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            try:
                reply = await self._handle(_decode(line))
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                reply = ControlReply(ok=False, error=f"bad request: {e}")
            writer.write(_encode(reply) + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


def request(path: Path, req: ControlRequest, timeout: float = 10.0) -> ControlReply:
    """Send one request to a running office. Raises ConnectionError if none listens."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise ConnectionError(str(e)) from None
        sock.sendall(_encode(req) + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    return _decode_reply(data)
