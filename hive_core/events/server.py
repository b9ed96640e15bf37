"""The hook socket: one JSON frame in from cth-hook, one reply out.

A Unix stream socket in `run/` (folder 0700, socket 0600). A frame must carry the secret
minted for that agent's current start; one that does not gets no reply at all (the shim
then fails open), and the attempt is reported so the office can log it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

from hive_core.schema import HOOK_FRAME_MAX, HookFrame, HookReply

Handler = Callable[[str, dict[str, Any]], Awaitable[HookReply]]
SecretOf = Callable[[str], str | None]
Rejected = Callable[[str, str], None]  # (claimed agent id, why)

_decode_frame = msgspec.json.Decoder(HookFrame).decode
_encode = msgspec.json.Encoder().encode
# A client that connects and says nothing is dropped after this long.
READ_TIMEOUT_S = 5.0


class HookServer:
    def __init__(
        self, path: Path, *, secret_of: SecretOf, handle: Handler, rejected: Rejected
    ) -> None:
        self.path = path
        self._secret_of = secret_of
        self._handle = handle
        self._rejected = rejected
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        folder = self.path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.chmod(0o700)
        self.path.unlink(missing_ok=True)
        # Created 0600 from the start: no window in which another user could connect.
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._serve, path=str(self.path), limit=HOOK_FRAME_MAX
            )
        finally:
            os.umask(old_umask)
        self.path.chmod(0o600)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            reply = await self._answer(line)
            if reply is not None:
                writer.write(_encode(reply) + b"\n")
                await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, line: bytes) -> HookReply | None:
        try:
            frame = _decode_frame(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            self._rejected("?", "a malformed frame")
            return None
        expected = self._secret_of(frame.agent)
        if not expected or not hmac.compare_digest(expected.encode(), frame.secret.encode()):
            self._rejected(frame.agent[:64], "a wrong or stale secret")
            return None
        return await self._handle(frame.agent, frame.event)
