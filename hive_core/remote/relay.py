"""The office's side of a desk's `hive` verb that runs in a process of its own.

The verbs the thin client keeps in the caller's process (hive_client.client.LOCAL:
`hive mcp`, `memory`, `ci-logs`, ...) cannot run there for two kinds of desk: a remote
desk's host has no hive files, and a contained desk (desks/contain.py) cannot write
what they write. `hive` there sends them over the control socket, and this runs the
office's own `hive` console script as a child for them, once the caller is known (a
remote desk's claim checked by control.decide_desk; a local caller attributed by its
process), with HIVE_HOME the office's home, HIVE_AGENT_ID the desk and HIVE_SECRET its
current secret, so the child proves itself to the office as every local verb does. Its
cwd is the contained desk's own, or for a remote desk the office home (the host's cwd
is not on this machine). Either way the child gets the caller's cwd as HIVE_REMOTE_CWD,
and a file named on the command line is refused (cli/common.py): the office's process
reads no file for a desk. stdin, stdout and stderr go over the connection in frames
(the client's wire: WANT at once, since the child may read stdin any time; the exit code
last); a client that goes away, or sends what is not a stdin frame, gets its child
killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from hive_client.client import (
    FRAME_MAX,
    HEADER_SIZE,
    REFUSED,
    STDERR,
    STDIN,
    STDOUT,
    WANT,
    exit_frame,
    frame,
    header,
)
from hive_core.invocation import RELAYED_ENV
from hive_core.schema import ControlRequest

# Which of the remote `hive`'s stdin, stdout, stderr were terminals ("stdin,stdout").
REMOTE_TTY_ENV = "HIVE_REMOTE_TTY"
STREAM_NAMES = ("stdin", "stdout", "stderr")

Log = Callable[[str, str], None]  # (agent id, what happened)


def hive_command(executable: str = sys.executable) -> list[str]:
    """The office's own `hive`: the console script beside the office's python (same
    venv), else the module run by that python; -P, as for the office itself (daemon.py),
    so a desk working inside a checkout of hive-office runs the installed code, not the
    checkout's."""
    script = shutil.which("hive", path=str(Path(executable).parent))
    return [script] if script else [executable, "-P", "-m", "hive_core.cli.hive"]


def child_env(
    base: Mapping[str, str], home: Path, desk: str, secret: str, req: ControlRequest
) -> dict[str, str]:
    """The relayed verb's environment: the office's own, without any HIVE_* of it (a
    HIVE_REMOTE would relay it again), and the desk's identity in this office."""
    env = {k: v for k, v in base.items() if not k.startswith("HIVE_")}
    env.update(HIVE_HOME=str(home), HIVE_AGENT_ID=desk, HIVE_SECRET=secret)
    # Where its `hive` ran on the host; also what tells the child it is relayed.
    env[RELAYED_ENV] = req.cwd
    env[REMOTE_TTY_ENV] = ",".join(n for n, t in zip(STREAM_NAMES, req.tty, strict=False) if t)
    return env


def exit_code(returncode: int) -> int:
    """A child's return code as a shell reports it (a signal n: 128 + n)."""
    return 128 - returncode if returncode < 0 else returncode


class Relay:
    """Runs relayed verbs; `close` kills those still running (the office stops)."""

    def __init__(
        self, home: Path, secret_of: Callable[[str], str | None], log: Log | None = None
    ) -> None:
        self.home = home
        self._secret_of = secret_of
        self._log = log
        # Each running verb and the desk it runs as.
        self._children: dict[asyncio.subprocess.Process, str] = {}

    async def __call__(
        self,
        desk: str,
        req: ControlRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        here: bool = False,
    ) -> None:
        """Run `hive req.argv` as `desk` with its streams on this connection (the ok
        reply is already sent). Returns when the child is gone and its code sent. `here`:
        the desk runs on this machine (a contained one), so its cwd is the child's."""
        secret = self._secret_of(desk) or ""
        cwd = req.cwd if here and os.path.isabs(req.cwd) and os.path.isdir(req.cwd) else self.home
        try:
            proc = await asyncio.create_subprocess_exec(
                *hive_command(),
                *req.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=child_env(os.environ, self.home, desk, secret, req),
                # Its own group: killed with whatever it started.
                start_new_session=True,
            )
        except OSError as e:
            if self._log:
                self._log(desk, f"a relayed `hive` could not start: {e}")
            text = f"hive: the office cannot run `hive` ({e}); reinstall hive-office there.\n"
            with contextlib.suppress(ConnectionError):
                writer.write(frame(STDERR, text.encode()[:FRAME_MAX]))
                writer.write(exit_frame(REFUSED))
                await writer.drain()
            return
        self._children[proc] = desk
        with contextlib.suppress(ConnectionError):
            writer.write(frame(WANT))
        feeding = asyncio.create_task(self._feed(reader, proc))
        try:
            assert proc.stdout is not None and proc.stderr is not None
            await asyncio.gather(
                self._drain(proc.stdout, STDOUT, writer, proc),
                self._drain(proc.stderr, STDERR, writer, proc),
            )
            code = exit_code(await proc.wait())
            with contextlib.suppress(ConnectionError):
                writer.write(exit_frame(code))
                await writer.drain()
        finally:
            feeding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeding
            _kill(proc)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            self._children.pop(proc, None)

    async def _feed(self, reader: asyncio.StreamReader, proc: asyncio.subprocess.Process) -> None:
        """The client's stdin frames into the child. The connection's end (or a frame
        that is not stdin, or too long) kills the child: nobody waits for its output."""
        stdin = proc.stdin
        try:
            while True:
                kind, size = header(await reader.readexactly(HEADER_SIZE))
                if kind != STDIN or size > FRAME_MAX:
                    break
                data = await reader.readexactly(size) if size else b""
                if stdin is None:
                    continue  # input after its end, or to a child that closed it: dropped
                if not data:
                    stdin.close()
                    stdin = None
                    continue
                try:
                    stdin.write(data)
                    await stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    stdin = None
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        _kill(proc)

    async def _drain(
        self,
        stream: asyncio.StreamReader,
        kind: int,
        writer: asyncio.StreamWriter,
        proc: asyncio.subprocess.Process,
    ) -> None:
        """One of the child's outputs onto the connection, to its end."""
        while data := await stream.read(FRAME_MAX):
            try:
                writer.write(frame(kind, data))
                await writer.drain()
            except ConnectionError:
                _kill(proc)  # the client is gone: read on to the end, sending nothing
                while await stream.read(FRAME_MAX):
                    pass
                return

    @property
    def running(self) -> list[int]:
        """The pids of the relayed verbs running now."""
        return [proc.pid for proc in self._children if proc.returncode is None]

    def desks(self) -> dict[int, str]:
        """Each relayed verb not yet waited for, by pid: the desk it runs as (the leader
        of its own session, so what it starts is the desk's too, control.py)."""
        return {proc.pid: desk for proc, desk in list(self._children.items())}

    def close(self) -> None:
        """Kill every relayed verb still running (each connection then ends)."""
        for proc in list(self._children):
            _kill(proc)


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
