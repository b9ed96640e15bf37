"""The office's side of the thin `hive` (hive_client/client.py): the verb runs here.

The control server takes cmd "hive" on each of its sockets and attributes the caller
as for any request (control.py); this runs the verb on a worker thread, never on the
loop, with the same code a `hive` process runs (cli/hive.run, given to the office as its
`Program`), as that caller:

- its identity: every question the verb asks the office (whoami, the person's check)
  is answered as the connection's caller (control.VerbCall.ask), not over a socket from
  this process, which is the office's own; what the caller's environment claims
  (HIVE_AGENT_ID, HIVE_SECRET) is checked by whoami as a `hive` process's claim is;
- its environment and cwd: the caller's (hive_core/invocation.py), with this office's
  home, the only one it serves;
- its streams: stdout and stderr go to the connection as frames as they are written;
  stdin is asked for (WANT) the first time the verb reads it and read from the
  connection, so a verb that never reads it leaves the caller's stdin alone;
- a file its command line names (`board --write FILE`): read by the caller's process
  (READ), from its cwd and with what it may read, never by the office's.

A remote desk's verb runs here as the desk, as a verb relayed from its host (files named
on its command line are refused, its cwd is the host's: cli/common.py). The verbs the
thin client keeps in the caller's process (hive_client.client.LOCAL) reach the office
only from a desk whose process cannot run them, a remote one (its host has no office
files) or a contained one (it cannot write memory.db or the CI-log cache): they run as
the desk in a process of their own (remote/relay.py). From anyone else they are refused.

Output has no backpressure: a verb's output is what it prints for one command, and the
office holds it until the connection takes it. A caller that goes away does not stop a
verb that has started (a thread cannot be killed); its output is dropped and its stdin
ends. The office, stopping, waits for the verbs it took (`close`) so that a verb it
accepted is done and its caller told, and one it did not is not done at all: the
caller then waits for the next office (client.WAIT_S) and sends it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from hive_client.client import (
    ANSWER_TIMEOUT_S,
    FILE,
    FILE_ERROR,
    FRAME_MAX,
    HEADER_SIZE,
    READ,
    REFUSED,
    STDERR,
    STDIN,
    STDOUT,
    WANT,
    exit_frame,
    frame,
    header,
    read_request,
    runs_in_office,
    split_home,
)
from hive_core import invocation
from hive_core.control import VerbCall
from hive_core.invocation import RELAYED_ENV
from hive_core.kick import kick
from hive_core.paths import HivePaths
from hive_core.remote.relay import Relay
from hive_core.schema import ControlReply, ControlRequest

# Verbs running at once; more wait for a thread. A verb takes milliseconds (the ones
# that live long stay in the caller's process, hive_client.client.LOCAL).
WORKERS = 4
# Stdin (or file) frames held for a verb that has not read them yet (a megabyte): a
# caller pouring them faster than the verb reads them waits.
HELD = 16
POLL_S = 0.1
GONE_WHY = "the caller went away"
GONE = f"{errno.ECONNRESET}\n{GONE_WHY}".encode()  # a FILE_ERROR's data, as the client sends one
# How long the office, stopping, lets the verbs it took finish.
CLOSE_WAIT_S = 10.0


LOCAL_REFUSED = (
    "hive: this verb runs in your own process, not in the office's; "
    "unset HIVE_CONTAINED and run it again.\n"
)
NO_PROGRAM = (
    "hive: this office was started without the command line, so it runs no `hive` verb; "
    "start it with `hive-office serve` or `hive-office`.\n"
)


async def _refuse(writer: asyncio.StreamWriter, text: str) -> None:
    with contextlib.suppress(ConnectionError):
        writer.write(frame(STDERR, text.encode()[:FRAME_MAX]))
        writer.write(exit_frame(REFUSED))
        await writer.drain()


class Program(Protocol):
    """The `hive` command line the office runs verbs with (the module hive_core.cli.hive
    is one): given to the office by what starts it, since the command line is built
    over the office and not the other way round."""

    def run(self, args: list[str]) -> None: ...

    def warm(self) -> None: ...


class Verbs:
    """Runs `hive` verbs for the control servers (their `relay`)."""

    def __init__(
        self,
        home: Path,
        secret_of: Callable[[str], str | None],
        relay: Relay,
        program: Program | None,
    ) -> None:
        self.home = home
        self._secret_of = secret_of
        self._relay = relay
        self._program = program
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="hive-verb")
        self._calls: set[asyncio.Task[Any]] = set()
        if program is not None:
            # The first verb should not wait for the command line's imports.
            self._pool.submit(program.warm)

    async def __call__(
        self, call: VerbCall, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if not runs_in_office(split_home(list(call.req.argv))[1]):
            # A verb that lives in its caller's process (LOCAL), sent by a desk whose
            # process cannot run it: a remote desk's host has no office files, a contained
            # desk cannot write what it writes. It runs as the desk in a process of its own.
            desk = call.desk if call.desk is not None else call.who.owner
            if desk is None or call.who.stray:
                await _refuse(writer, LOCAL_REFUSED)
                return
            await self._relay(desk, call.req, reader, writer, here=call.desk is None)
            return
        if self._program is None:
            await _refuse(writer, NO_PROGRAM)
            return
        task = asyncio.current_task()
        if task is not None:
            self._calls.add(task)
        try:
            await self._run(call, reader, writer, self._program)
        finally:
            if task is not None:
                self._calls.discard(task)

    async def _run(
        self,
        call: VerbCall,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        program: Program,
    ) -> None:
        loop = asyncio.get_running_loop()
        streams = Streams(loop, writer, call.req.tty)
        ask = call.ask

        def asked(req: ControlRequest) -> ControlReply:
            # On the verb's thread: the loop answers, as it answers the control socket.
            return asyncio.run_coroutine_threadsafe(ask(req), loop).result(ANSWER_TIMEOUT_S)

        running = invocation.Invocation(
            self.home, self._env(call), self._cwd(call), asked, streams.read_file, []
        )
        # The office's home first: a --home of the caller's after it wins, and is refused
        # unless it is this one (cli/common.office_paths).
        argv = ["--home", str(self.home), *call.req.argv]
        feeding = asyncio.create_task(streams.feed(reader))
        try:
            # The verb's thread sends its exit code after its output (run_verb).
            await loop.run_in_executor(self._pool, run_verb, program, argv, running, streams)
        finally:
            feeding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeding
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        # The outboxes the verb wrote, now that its caller has the answer.
        for who in dict.fromkeys(running.kicks):
            kick(HivePaths(self.home), who)

    def _env(self, call: VerbCall) -> dict[str, str]:
        env = {"HIVE_HOME": str(self.home)}
        if call.desk is not None:
            # As the desk (decide_desk checked its claim): its host's cwd tells the verb
            # it is relayed, so it names no file of this machine.
            env.update(
                HIVE_AGENT_ID=call.desk,
                HIVE_SECRET=self._secret_of(call.desk) or "",
                **{RELAYED_ENV: call.req.cwd},
            )
            return env
        if call.req.agent is not None:
            env["HIVE_AGENT_ID"] = call.req.agent
        if call.req.secret:
            env["HIVE_SECRET"] = call.req.secret
        return env

    def _cwd(self, call: VerbCall) -> str:
        if call.desk is not None or not call.req.cwd.startswith("/"):
            return str(self.home)  # the host's cwd is not on this machine
        return call.req.cwd

    async def close(self) -> None:
        """Let the verbs taken finish (a bounded wait; one taken meanwhile is waited
        for too), then let the threads go."""
        deadline = asyncio.get_running_loop().time() + CLOSE_WAIT_S
        while self._calls:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            await asyncio.wait(list(self._calls), timeout=left)
        self._pool.shutdown(wait=False)


class Streams:
    """One verb's stdin, stdout and stderr over its connection."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter, tty: Sequence[bool]
    ) -> None:
        self.tty = [i < len(tty) and tty[i] for i in range(3)]
        self._loop = loop
        self._writer = writer
        self._stdin: queue.Queue[bytes] = queue.Queue(HELD)
        self._file: queue.Queue[tuple[int, bytes]] = queue.Queue(HELD)
        # What the verb wrote and the loop has not yet taken: one write on the loop for
        # all of it, so its caller wakes once for output that comes at once.
        self._out = bytearray()
        self._out_lock = threading.Lock()
        self._asked = False
        self._stdin_ended = False
        self._ended = False  # the caller went away

    # --- on the verb's thread ---

    def send(self, data: bytes) -> None:
        with self._out_lock:
            scheduled = bool(self._out)
            self._out += data
        if not scheduled:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to show it to
                self._loop.call_soon_threadsafe(self._put)

    def _put(self) -> None:
        with self._out_lock:
            data = bytes(self._out)
            self._out.clear()
        if not self._writer.is_closing():
            self._writer.write(data)

    def read(self) -> bytes:
        """The next piece of the caller's stdin; b"" at its end. A caller gone before
        its stdin ended (Ctrl+C while typing a body) is an OSError: the verb must not
        go on with half its input, as it would not have in the caller's process."""
        if not self._asked:
            self._asked = True
            self.send(frame(WANT))
        while True:
            try:
                data = self._stdin.get(timeout=POLL_S)
            except queue.Empty:
                data = b""
            if data or self._stdin_ended:
                return data
            if self._ended:
                raise ConnectionError(errno.ECONNRESET, GONE_WHY)

    def read_file(self, path: str, limit: int | None) -> bytes:
        """The file `path` (at most `limit` bytes) as the caller's process reads it."""
        self.send(frame(READ, read_request(path, limit)))
        data = bytearray()
        while True:
            try:
                kind, chunk = self._file.get(timeout=POLL_S)
            except queue.Empty:
                if self._ended:
                    kind, chunk = FILE_ERROR, GONE
                else:
                    continue
            if kind == FILE_ERROR:
                number, _, why = chunk.decode(errors="replace").partition("\n")
                raise OSError(int(number) if number.isdigit() else errno.EIO, why, path)
            if not chunk:
                return bytes(data)
            data += chunk

    # --- on the loop ---

    async def feed(self, reader: asyncio.StreamReader) -> None:
        """The caller's stdin and file frames, until the connection ends (or sends
        what is none of them)."""
        try:
            while True:
                kind, size = header(await reader.readexactly(HEADER_SIZE))
                if kind not in (STDIN, FILE, FILE_ERROR) or size > FRAME_MAX:
                    break
                data = await reader.readexactly(size) if size else b""
                if kind == STDIN:
                    self._stdin_ended = not data
                    await _hold(self._stdin, data)
                else:
                    await _hold(self._file, (kind, data))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._ended = True
            # Wake a verb waiting for the caller's input or file now, not at its next look.
            with contextlib.suppress(queue.Full):
                self._stdin.put_nowait(b"")
            with contextlib.suppress(queue.Full):
                self._file.put_nowait((FILE_ERROR, GONE))


async def _hold(held: queue.Queue[Any], item: object) -> None:
    """Put `item` where the verb's thread takes it, once there is room."""
    while True:
        try:
            held.put_nowait(item)
            return
        except queue.Full:
            await asyncio.sleep(POLL_S)


class _Out(io.RawIOBase):
    def __init__(self, streams: Streams, kind: int) -> None:
        self._streams = streams
        self._kind = kind

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        for at in range(0, len(data), FRAME_MAX):
            self._streams.send(frame(self._kind, data[at : at + FRAME_MAX]))
        return len(data)

    def isatty(self) -> bool:
        return self._streams.tty[self._kind]


class _In(io.RawIOBase):
    def __init__(self, streams: Streams) -> None:
        self._streams = streams
        self._held = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._held or self._streams.read()
        size = min(len(b), len(data))
        b[:size] = data[:size]
        self._held = data[size:]
        return size

    def isatty(self) -> bool:
        return self._streams.tty[0]


# --- the office's sys.stdin, sys.stdout, sys.stderr ---------------------------------------

_bound = threading.local()
_installing = threading.Lock()
_NAMES = ("stdin", "stdout", "stderr")


class _Proxy:
    """sys.stdout (or stdin, stderr) of the office: on a thread running a verb, that
    verb's; anywhere else, what it stood in for."""

    def __init__(self, name: str, fallback: Any) -> None:
        self._name = name
        self._fallback = fallback

    def __getattr__(self, attr: str) -> Any:
        target = getattr(_bound, self._name, None)
        return getattr(self._fallback if target is None else target, attr)


def _install() -> None:
    """Stand in for sys's streams (again, if something replaced them since)."""
    with _installing:
        for name in _NAMES:
            stream = getattr(sys, name)
            if not isinstance(stream, _Proxy):
                setattr(sys, name, _Proxy(name, stream))


def run_verb(
    program: Program, argv: list[str], running: invocation.Invocation, streams: Streams
) -> None:
    """On a worker thread: `hive ARGV` as `running`'s caller, its streams `streams`,
    its exit code sent last."""
    _install()
    out = io.TextIOWrapper(
        io.BufferedWriter(_Out(streams, STDOUT), FRAME_MAX), encoding="utf-8", errors="replace"
    )
    err = io.TextIOWrapper(
        io.BufferedWriter(_Out(streams, STDERR)),
        encoding="utf-8",
        errors="replace",
        line_buffering=True,
    )
    stdin = io.TextIOWrapper(io.BufferedReader(_In(streams)), encoding="utf-8")
    _bound.stdin, _bound.stdout, _bound.stderr = stdin, out, err
    try:
        with invocation.running(running):
            try:
                program.run(argv)
                code = 0
            except SystemExit as e:
                code = _exit_code(e.code, err)
            except KeyboardInterrupt:
                code = 130
            except Exception:
                # As an uncaught exception ends a `hive` process: its traceback, code 1.
                traceback.print_exc(file=err)
                code = REFUSED
        for stream in (out, err):
            with contextlib.suppress(ValueError, OSError):
                stream.flush()
    finally:
        _bound.stdin = _bound.stdout = _bound.stderr = None
    streams.send(exit_frame(code))


def _exit_code(code: object, err: io.TextIOWrapper) -> int:
    """SystemExit's code as the process would end with it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=err)
    return REFUSED
