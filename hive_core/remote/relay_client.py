"""`hive` on a remote desk's host: every verb is relayed to the office.

The host has no hive files. The desk's environment says HIVE_REMOTE=1 and HIVE_CONTROL
(its end of the control socket ssh forwards to the office's run/desks/<id>.control.sock),
so `hive` sends the verb there instead of running it: one request line (cmd "hive": the
words, the cwd, the claims HIVE_AGENT_ID/HIVE_SECRET, which streams are terminals), one
reply line, and then frames both ways until the office sends the verb's exit code.

A frame is a type byte, a 4-byte big-endian length and that many bytes (at most
FRAME_MAX). Here to the office: STDIN (length 0: end of input). Back: STDOUT, STDERR,
then EXIT (a 4-byte signed code), the last frame. The office runs the verb as the desk
(hive_core/remote/relay.py) and kills it if this end goes away.

It runs on every `hive` call on the host, so it imports only the standard library's
smallest parts and the request's Struct (msgspec), like hive_core/caller.py.
"""

from __future__ import annotations

import _socket
import os
import struct
import sys
import threading
from typing import NoReturn

import msgspec

from hive_core.schema import ControlReply, ControlRequest

# The frame: type, length. One place for the wire's shape and its bound (relay.py uses these).
HEADER = struct.Struct(">BI")
EXIT_CODE = struct.Struct(">i")
STDIN, STDOUT, STDERR, EXIT = 0, 1, 2, 3
# The most data one frame carries: a pipe's worth, so a frame is one read on each side.
FRAME_MAX = 64 * 1024
# How long the office may take to accept the verb (the reply line) before we give up.
ANSWER_TIMEOUT_S = 10.0
# The reply line's bound: a refusal is one sentence.
REPLY_MAX = 64 * 1024
# Exit codes of `hive` (cli/common.py): refused, and what a broken relay counts as.
REFUSED = 1

_decode_reply = msgspec.json.Decoder(ControlReply).decode


def frame(kind: int, data: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(data)) + data


def main(argv: list[str]) -> NoReturn:
    """Relay `hive ARGV` to the office and end with its exit code."""
    path = os.environ["HIVE_CONTROL"]
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    request = ControlRequest(
        cmd="hive",
        agent=os.environ.get("HIVE_AGENT_ID") or None,
        secret=os.environ.get("HIVE_SECRET") or None,
        argv=argv,
        cwd=cwd,
        tty=[_isatty(fd) for fd in (0, 1, 2)],
    )
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(ANSWER_TIMEOUT_S)
        sock.connect(path)
        sock.sendall(msgspec.json.encode(request) + b"\n")
        reply = _decode_reply(_reply_line(sock))
    except (OSError, msgspec.DecodeError) as e:
        _fail(
            f"the office does not answer on HIVE_CONTROL ({path}: {e}); the desk's ssh link "
            "may be down, try again in a moment."
        )
    if not reply.ok:
        _fail(reply.error or "the office refused the command.")
    sock.settimeout(None)
    threading.Thread(target=_send_stdin, args=(sock,), daemon=True).start()
    _exit(_receive(sock))


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _reply_line(sock: _socket.socket) -> bytes:
    """The office's reply line, read byte-exactly: what follows it is the verb's output."""
    data = bytearray()
    while not data.endswith(b"\n"):
        if len(data) > REPLY_MAX:
            raise OSError("the reply is too long")
        chunk = sock.recv(1)
        if not chunk:
            raise OSError("the connection closed")
        data += chunk
    return bytes(data)


def _send_stdin(sock: _socket.socket) -> None:
    """Our stdin to the office, then its end (a frame of length 0)."""
    while True:
        try:
            data = os.read(0, FRAME_MAX)
        except OSError:
            data = b""  # no stdin at all (closed fd): the verb sees an empty one
        try:
            sock.sendall(frame(STDIN, data))
        except OSError:
            return
        if not data:
            return


def _receive(sock: _socket.socket) -> int:
    """Write the verb's output where it belongs until its exit code arrives."""
    outputs = {STDOUT: sys.stdout.buffer, STDERR: sys.stderr.buffer}
    while True:
        header = _exactly(sock, HEADER.size)
        if header is None:
            break
        kind, size = HEADER.unpack(header)
        if size > FRAME_MAX:
            break
        data = _exactly(sock, size) if size else b""
        if data is None:
            break
        if kind == EXIT and size == EXIT_CODE.size:
            return int(EXIT_CODE.unpack(data)[0])
        out = outputs.get(kind)
        if out is not None:
            out.write(data)
            out.flush()
    sys.stderr.write(
        "hive: the office closed the connection before the command ended; the desk's ssh "
        "link may have dropped, check and run it again.\n"
    )
    return REFUSED


def _exactly(sock: _socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        try:
            chunk = sock.recv(size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"hive: {message}\n")
    _exit(REFUSED)


def _exit(code: int) -> NoReturn:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    # Not sys.exit: the stdin thread may sit in a read of a terminal.
    os._exit(code if 0 <= code <= 255 else REFUSED)
