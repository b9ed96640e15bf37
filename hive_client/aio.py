"""A `hive` verb run by the office for a caller on an asyncio loop (the app).

The same wire as the thin `hive` (client.py, which holds it): the request line, the
office's reply, then frames until EXIT. The verb's stdin is the bytes given, sent once
the verb asks for it; its output is collected, not written anywhere. The office tells
who is calling from the kernel (SO_PEERCRED and the process's ancestry), so a caller
that is no desk's (the person's app) is the person, and no claim is sent. A caller here
names no file on the command line, so a READ is answered as an unreadable file.

Kept apart from client.py: asyncio is not something every `hive` call should import.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
from typing import NamedTuple

from hive_client.client import (
    ANSWER_TIMEOUT_S,
    EXIT,
    FILE_ERROR,
    FRAME_MAX,
    HEADER_SIZE,
    NOT_ANSWERING,
    READ,
    REFUSED,
    REPLY_MAX,
    STDERR,
    STDIN,
    STDOUT,
    WANT,
    frame,
    header,
    request_line,
)

NO_FILES = f"{errno.EACCES}\nthis caller names no file".encode()


class VerbResult(NamedTuple):
    code: int
    out: str
    err: str

    @property
    def said(self) -> str:
        """What the verb said, its errors first, as one text without the `hive: `
        prefix of its refusals."""
        return (self.err.strip() or self.out.strip()).removeprefix("hive: ")


async def call(socket_path: str, argv: list[str], *, stdin: bytes = b"") -> VerbResult:
    """Run `hive ARGV` in the office listening on `socket_path`; its exit code and output.
    An office that cannot be reached is a refusal saying so."""
    request = request_line(argv, cwd=os.getcwd(), tty=[False] * 3, secret="", agent=None)
    if request is None:
        return VerbResult(REFUSED, "", "the command line is not UTF-8 text.")
    try:
        reader, writer = await asyncio.open_unix_connection(socket_path, limit=REPLY_MAX)
    except OSError as e:
        return VerbResult(REFUSED, "", f"the office is not answering ({e}); try again.")
    try:
        writer.write(request)
        await writer.drain()
        try:
            # As the thin `hive` waits. A verb the office has not answered by then is
            # not run once this end has gone (its answer cannot be written), so trying
            # again is safe.
            reply = await asyncio.wait_for(reader.readline(), ANSWER_TIMEOUT_S)
        except TimeoutError:
            return VerbResult(REFUSED, "", NOT_ANSWERING)
        if not reply.startswith(b'{"ok":true'):
            try:
                error = json.loads(reply).get("error") if reply else None
            except (ValueError, AttributeError):
                error = None
            return VerbResult(REFUSED, "", error or "the office refused the command.")
        return await _frames(reader, writer, stdin)
    except (OSError, asyncio.IncompleteReadError, ValueError) as e:
        return VerbResult(
            REFUSED,
            "",
            f"the office closed the connection before the command ended ({e}); check with "
            "`hive log` whether it was done before doing it again.",
        )
    finally:
        writer.close()


async def _frames(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stdin: bytes
) -> VerbResult:
    out, err = bytearray(), bytearray()
    while True:
        kind, size = header(await reader.readexactly(HEADER_SIZE))
        if size > FRAME_MAX:
            raise ValueError("a frame is too long")
        data = await reader.readexactly(size)
        if kind == EXIT and size == 4:
            code = int.from_bytes(data, "big", signed=True)
            return VerbResult(code, out.decode(errors="replace"), err.decode(errors="replace"))
        if kind == STDOUT:
            out += data
        elif kind == STDERR:
            err += data
        elif kind == WANT:
            try:
                for start in range(0, len(stdin), FRAME_MAX):
                    writer.write(frame(STDIN, stdin[start : start + FRAME_MAX]))
                writer.write(frame(STDIN))
                await writer.drain()
            except (BrokenPipeError, ConnectionResetError):
                # The verb ended without reading it all (a body over its limit): what it
                # said and its exit code are still to be read.
                pass
        elif kind == READ:
            writer.write(frame(FILE_ERROR, NO_FILES))
            await writer.drain()
