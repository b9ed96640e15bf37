"""The control socket: the person's commands to a running office without a screen.

`hive-office type AGENT TEXT` types into an agent's terminal as the person would (the
app's panes do the same through the same Office methods), `pause`/`resume` hold an
agent at its next hook. A Unix socket in run/ (folder 0700, socket 0600): only the
person's own user can reach it, the same trust as their keyboard.

One request a connection, one line each way. A request longer than REQUEST_MAX, not
JSON, or nested past msgspec's guard gets a reply `{"ok": false, "error": "refused:
..."}` saying why, and the server goes on with the next connection.
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
# The largest request line (`type` text is most of it): well past any paste a person
# makes, and what the office holds at most per connection.
REQUEST_MAX = 1 << 20
READ_TIMEOUT_S = 5.0


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
                self._serve, path=str(self.path), limit=REQUEST_MAX
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
            try:
                line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            except ValueError:
                # StreamReader's limit: what was read of the line is already dropped.
                reply = refused(f"the request is longer than {REQUEST_MAX} bytes")
            else:
                reply = await self._answer(line)
            writer.write(_encode(reply) + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, line: bytes) -> ControlReply:
        try:
            req = _decode(line)
        except RecursionError:
            return refused("the request is nested too deeply")
        except msgspec.DecodeError as e:
            return refused(f"not a request ({str(e)[:200]})")
        return await self._handle(req)


def refused(why: str) -> ControlReply:
    return ControlReply(ok=False, error=f"refused: {why}.")


def request(path: Path, req: ControlRequest, timeout: float = 10.0) -> ControlReply:
    """Send one request to a running office. Raises ConnectionError if none listens."""
    frame = _encode(req) + b"\n"
    if len(frame) > REQUEST_MAX:
        return refused(
            f"the request is {len(frame)} bytes, over the office's {REQUEST_MAX}-byte limit; "
            "send the text in smaller parts"
        )
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise ConnectionError(str(e)) from None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            # The office may answer (a refusal) and close before it read everything.
            sock.sendall(frame)
        data = b""
        while not data.endswith(b"\n") and len(data) <= REQUEST_MAX:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    return _decode_reply(data)
