"""One agent CLI in its own pseudo-terminal, driven from an asyncio loop (Linux).

`PtySession.spawn` starts argv in a new pty (ptyprocess): the child is the leader of
a new session whose controlling terminal is the pty, with the window size already set
before it execs and exactly the environment it is given (no TERM is added). `attach`
hands the raw output to a callback through `loop.add_reader` on the non-blocking master,
each wakeup draining what the terminal holds (up to `_DRAIN_LIMIT`) into one call, and
reports the exit status once; `write` queues what the terminal cannot take yet;
`resize` sets the window size (the kernel sends SIGWINCH to the foreground group);
`terminate` ends the whole session.

Children must not outlive the office, even when the office is killed with SIGKILL.
Three layers, each covering what the previous one misses:

1. The kernel hangup. The office holds the only copy of the master (it is made
   non-inheritable here, so other children of the office cannot keep it open). When the
   office dies the master closes, the kernel hangs up the terminal and sends SIGHUP and
   SIGCONT to the session leader; when the leader exits, the foreground process group at
   hangup time gets SIGHUP. Covers the leader and everything in its foreground group that
   does not ignore or handle SIGHUP, e.g. both sleeps of `bash -c 'sleep 300 & sleep 300'`
   (a non-interactive shell keeps `&` jobs in its own group).
2. PR_SET_PDEATHSIG(SIGKILL), armed in the child before exec: the leader is killed when
   its parent dies, even if it ignores SIGHUP. Direct child only. The kernel ties it to
   the *thread* that forked, so `spawn` must be called from a thread that lives as long
   as the office, never from a short-lived worker thread. `start` runs it on one such
   thread of this module's, so the event loop is not held while the child execs.
   It is also cleared if the child execs a set-uid or file-capability binary.
3. One guard process for the whole office (`session_guard.py`, a bare interpreter in a
   session of its own so the office's terminal signals do not reach it). The office
   tells it each session it starts and each one that ended cleanly, over a pipe only the
   office holds; EOF on that pipe means the office died, and the guard SIGKILLs every
   process group that still has a member in a session it was not told had ended.
   Covers what 1 and 2 miss inside the session: `nohup`'d or SIGHUP-ignoring
   descendants, and jobs in other process groups (an interactive shell's background
   jobs, `set -m`). One guard, not one per session: a guard is a Python interpreter
   (about 9 MB resident, 4 MB proportional), and an office runs dozens of agents.

Descendants that leave the session (`setsid`, double-forking daemons) stay below the
CLI, a child subreaper, while it lives; once it is gone they are the office's
(strays.py: the office is a subreaper too, and tells the guard their sessions).
Not covered: processes in the session that the office's user may not signal (set-uid
programs such as `sudo`), plus anything if the guard itself is SIGKILLed along with the
office (a guard that dies while the office lives is started again on the next spawn or
termination, and told every session still watched). Only a cgroup could contain those.

While the office runs, `terminate` does the same sweep: SIGHUP and SIGCONT (as a
closing terminal would) and SIGTERM to every process group in the session, SIGKILL to
whatever is left after the grace period, then reaps the leader, closes the master and
tells the guard the session ended. When the CLI exits on its own, call `terminate` after
`on_exit` to sweep stragglers and release the session from the guard. A session dropped
without `terminate` stays watched, so the guard kills what is left of it when the
office exits.

A session is not thread-safe: use it from the thread running its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ptyprocess

from hive_core.desks import contain, session_guard
from hive_core.desks.paste import MODE_TAIL, paste_mode
from hive_core.desks.session_guard import KILL_WAIT, POLL_INTERVAL

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_LIBC = ctypes.CDLL(None, use_errno=True)
_READ_CHUNK = 1 << 16
# What one readable callback takes at most: ~6 ms of a flooding child's output at the
# rate a pty delivers it here (about 40 MB/s), so keys and frames still get their turn.
_DRAIN_LIMIT = 1 << 18


def _arm_parent_death_signal(parent: int, ruleset: int | None = None) -> Callable[[], None]:
    def arm() -> None:
        if _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")
        # The CLI adopts its orphans (kept across exec): a process that leaves the session
        # (`setsid`, a double fork) still has the CLI as an ancestor, which is how the
        # control socket tells whose it is (control.py).
        if _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")
        # The office may have died between fork and prctl; nothing would fire then.
        if os.getppid() != parent:
            os._exit(1)
        # Last, so nothing above needs a right the desk is not given (contain.py).
        if ruleset is not None:
            contain.enter(ruleset)

    return arm


class _Guard:
    """This process's side of the shared guard: started on first use, and again if it
    died or this is a forked copy of the office (the guard belongs to the process that
    started it)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = 0
        self._sids: set[int] = set()
        # Sessions may be spawned from more than one thread; a line must not interleave.
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The guard's pid while this process has one (a Popen of its own to wait for)."""
        return self._proc.pid if self._proc is not None and self._owner == os.getpid() else None

    def watch(self, sid: int) -> None:
        with self._lock:
            self._sids.add(sid)
            self._send(b"+%d\n" % sid)

    def forget(self, sid: int) -> None:
        with self._lock:
            if sid in self._sids:
                self._sids.discard(sid)
                self._send(b"-%d\n" % sid)

    def _send(self, line: bytes) -> None:
        if self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None:
            with contextlib.suppress(BrokenPipeError):
                self._write(line)
                return
        if not self._sids:  # nothing to guard: no need for a new guard yet
            self._proc = None
            return
        # A new guard knows nothing yet: tell it every session still watched.
        self._proc, self._owner = self._start(), os.getpid()
        self._write(b"".join(b"+%d\n" % sid for sid in sorted(self._sids)))

    def _write(self, data: bytes) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        # Unbuffered and blocking: the guard reads continuously, so this never waits long.
        view = memoryview(data)
        while view:
            view = view[self._proc.stdin.write(view) or 0 :]

    @staticmethod
    def _start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            # -I: the office's PYTHON* variables and working directory do not matter;
            # -S: no site start-up, so the interpreter stays small.
            [sys.executable, "-I", "-S", session_guard.__file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            start_new_session=True,
        )


_GUARD = _Guard()
# The CLIs started here and not reaped yet: their status is PtySession's (strays.py
# must not take it).
_UNREAPED: set[int] = set()


def cli_sessions() -> frozenset[int]:
    """Each CLI this process started and has not reaped yet (its pid, also its session
    id): a child whose status is PtySession's."""
    return frozenset(_UNREAPED)


def guard_pid() -> int | None:
    """The guard's pid (also its session id), if this process has one running."""
    return _GUARD.pid


def guard_session(sid: int, on: bool) -> None:
    """Have the guard end session `sid` when the office dies (or no longer): for a
    session that is not a CLI's, such as an adopted orphan's (strays.py)."""
    if on:
        _GUARD.watch(sid)
    else:
        _GUARD.forget(sid)


# Forks every session `start` makes. Its one worker lives until the interpreter exits, as
# PR_SET_PDEATHSIG needs; the wait for each child's exec (10-25 ms, more under load: a
# second for 50 agents) happens here instead of on the event loop.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pty-spawn")
# Sessions whose `start` was cancelled mid-spawn, being terminated (the loop keeps only
# weak references to tasks).
_ORPHANS: set[asyncio.Future[None]] = set()


def _session_groups(sid: int) -> set[int]:
    return session_guard.session_groups({sid}).get(sid, set())


def _signal_session(sid: int, sig: int) -> None:
    session_guard.signal_sessions({sid}, sig)


def _terminate_unclaimed(pending: asyncio.Future[PtySession]) -> None:
    if not pending.cancelled() and pending.exception() is None:
        task = asyncio.ensure_future(pending.result().terminate())
        _ORPHANS.add(task)
        task.add_done_callback(_ORPHANS.discard)


class PtySession:
    """A child process on its own pty; see the module docstring for its lifetime rules."""

    def __init__(self, proc: ptyprocess.PtyProcess) -> None:
        self._proc = proc
        self.pid: int = proc.pid
        _UNREAPED.add(self.pid)
        self._fd: int = proc.fd
        # Readable when the child exits: reaps it without blocking once output has ended
        # but the child lingers. Opened before any reap, so the pid cannot be reused yet.
        self._pidfd = os.pidfd_open(self.pid)
        self._pidfd_watched = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_output: Callable[[bytes], None] | None = None
        self._on_exit: Callable[[int | None, int | None], None] | None = None
        self._pending = bytearray()
        self._writer_added = False
        self._master_open = True
        self._status: tuple[int | None, int | None] | None = None
        self._exit_reported = False
        self._termination: asyncio.Future[None] | None = None
        # Whether the child asked for bracketed paste, read from its output; the tail
        # catches a mode sequence cut in two by a read boundary.
        self.bracketed_paste = False
        self._mode_tail = b""

    @classmethod
    def spawn(
        cls,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        rows: int = 40,
        cols: int = 120,
        confine: tuple[contain.Grant, ...] | None = None,
    ) -> PtySession:
        """Start argv on a new rows x cols pty; argv[0] is looked up on env's PATH.
        `confine`: the Landlock grants the child and all it starts are held to
        (contain.py); the ruleset is built here, the child only enters it."""
        if not argv:
            raise ValueError("empty argv")
        # ptyprocess would search the office's PATH; the child's own PATH is what counts.
        exe = shutil.which(argv[0], path=env.get("PATH", os.defpath))
        if exe is None:
            raise FileNotFoundError(f"{argv[0]!r} not found on the child's PATH")
        ruleset = None if confine is None else contain.ruleset(confine, contain.abi())
        try:
            proc = ptyprocess.PtyProcess.spawn(
                [exe, *argv[1:]],
                cwd=str(cwd),
                env=env,
                dimensions=(rows, cols),
                preexec_fn=_arm_parent_death_signal(os.getpid(), ruleset),
                pass_fds=() if ruleset is None else (ruleset,),
            )
        finally:
            if ruleset is not None:
                os.close(ruleset)
        # A copy of the master in any other process would keep the terminal from hanging
        # up when the office dies.
        os.set_inheritable(proc.fd, False)
        os.set_blocking(proc.fd, False)
        _GUARD.watch(proc.pid)
        return cls(proc)

    @classmethod
    async def start(
        cls,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        rows: int = 40,
        cols: int = 120,
        confine: tuple[contain.Grant, ...] | None = None,
    ) -> PtySession:
        """`spawn` on the spawner thread, without holding the event loop meanwhile."""
        spawn = functools.partial(
            cls.spawn, argv, env=env, cwd=cwd, rows=rows, cols=cols, confine=confine
        )
        pending = asyncio.get_running_loop().run_in_executor(_SPAWNER, spawn)
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            # The child may be running by now, and nobody will hold its session.
            pending.add_done_callback(_terminate_unclaimed)
            raise

    def attach(
        self,
        loop: asyncio.AbstractEventLoop,
        on_output: Callable[[bytes], None],
        on_exit: Callable[[int | None, int | None], None],
    ) -> None:
        """Deliver output to on_output as it comes; on_exit(exit_status, signal_status) once
        the output has ended and the child is reaped."""
        if self._loop is not None:
            raise RuntimeError("already attached")
        self._loop, self._on_output, self._on_exit = loop, on_output, on_exit
        if self._master_open:
            loop.add_reader(self._fd, self._on_readable)
            self._flush()
        else:
            self._output_ended()

    @property
    def alive(self) -> bool:
        return not self._reap()

    @property
    def exit_status(self) -> int | None:
        """The exit code, once reaped and if the child exited rather than was killed."""
        return None if self._status is None else self._status[0]

    @property
    def signal_status(self) -> int | None:
        """The signal that killed the child, once reaped."""
        return None if self._status is None else self._status[1]

    def write(self, data: bytes) -> None:
        """Type into the child's terminal; what it cannot take now is queued, in order.

        A terminal whose child is gone takes nothing: the bytes are dropped.
        """
        if self._master_open:
            self._pending += data
            self._flush()

    def resize(self, rows: int, cols: int) -> None:
        if self._master_open:
            self._proc.setwinsize(rows, cols)

    def read_available(self) -> bytes:
        """Drain the output readable now, without blocking (for use without attach)."""
        if self._loop is not None:
            raise RuntimeError("attached: output goes to on_output")
        self._flush()
        chunks: list[bytes] = []
        while self._master_open:
            try:
                data = self._read()
            except BlockingIOError:
                break
            if not data:
                self._output_ended()
                break
            chunks.append(data)
        return b"".join(chunks)

    async def terminate(self, grace: float = 3.0) -> None:
        """End the child's whole session and reap it; safe to call again or concurrently."""
        if self._termination is None:
            self._termination = asyncio.ensure_future(self._terminate(grace))
        await asyncio.shield(self._termination)

    async def _terminate(self, grace: float) -> None:
        loop = asyncio.get_running_loop()
        # SIGCONT lets stopped jobs act on the SIGHUP and SIGTERM, as on a real hangup.
        for sig in (signal.SIGHUP, signal.SIGCONT, signal.SIGTERM):
            _signal_session(self.pid, sig)
        deadline = loop.time() + grace
        while not self._session_over() and loop.time() < deadline:
            await asyncio.sleep(POLL_INTERVAL)
        deadline = loop.time() + KILL_WAIT
        while not self._session_over() and loop.time() < deadline:
            _signal_session(self.pid, signal.SIGKILL)
            await asyncio.sleep(POLL_INTERVAL)
        if self._master_open:
            # Hand over what the child wrote before it died, then hang up the terminal for
            # anything that survived: the kernel's SIGHUP reaches what we could not signal.
            if self._on_output is not None:
                while data := self._read_or_empty():
                    self._on_output(data)
            self._output_ended()
        if self._session_over():
            _GUARD.forget(self.pid)

    def _session_over(self) -> bool:
        # After the leader is reaped its pid stays reserved while any process still has it
        # as session id, so the scan cannot hit an unrelated session.
        return self._reap() and not _session_groups(self.pid)

    def _read(self) -> bytes:
        try:
            return os.read(self._fd, _READ_CHUNK)
        except OSError as e:
            # Linux reports a pty whose slave side is closed by everyone as EIO, not EOF.
            if e.errno == errno.EIO:
                return b""
            raise

    def _read_or_empty(self) -> bytes:
        try:
            return self._read()
        except BlockingIOError:
            return b""

    def _on_readable(self) -> None:
        # A pty hands out at most ~4 KB a read. Reading on while more is there (a busy
        # child refills it as fast) makes one callback of many reads: one wakeup and one
        # parse per batch instead of per 4 KB. Capped, so a flooding child holds the loop
        # for a few milliseconds at most.
        chunks: list[bytes] = []
        size = 0
        ended = False
        while size < _DRAIN_LIMIT:
            try:
                data = self._read()
            except BlockingIOError:
                break
            if not data:
                ended = True
                break
            chunks.append(data)
            size += len(data)
        if chunks:
            assert self._on_output is not None
            output = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            seen = self._mode_tail + output
            self.bracketed_paste = paste_mode(seen, self.bracketed_paste)
            self._mode_tail = seen[-MODE_TAIL:] if b"\x1b" in seen[-MODE_TAIL:] else b""
            self._on_output(output)
        if ended:
            self._output_ended()

    def _flush(self) -> None:
        while self._pending:
            try:
                n = os.write(self._fd, self._pending)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno != errno.EIO:
                    raise
                # Nobody holds the terminal any more; the reader will see the end.
                self._pending.clear()
                break
            del self._pending[:n]
        want_writer = bool(self._pending) and self._loop is not None
        if want_writer != self._writer_added:
            assert self._loop is not None
            if want_writer:
                self._loop.add_writer(self._fd, self._flush)
            else:
                self._loop.remove_writer(self._fd)
            self._writer_added = want_writer

    def _output_ended(self) -> None:
        if self._master_open:
            if self._loop is not None:
                self._loop.remove_reader(self._fd)
                if self._writer_added:
                    self._loop.remove_writer(self._fd)
                    self._writer_added = False
            self._pending.clear()
            self._proc.fileobj.close()
            # Keeps ptyprocess's __del__ from closing the fd number again, maybe reused.
            self._proc.closed = True
            self._master_open = False
        if not self._reap() and self._loop is not None and not self._pidfd_watched:
            self._loop.add_reader(self._pidfd, self._reap)
            self._pidfd_watched = True

    def _reap(self) -> bool:
        """Collect the exit status if the child has exited; True once it has been reaped."""
        if self._status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Someone else's waitpid(-1) took it: the status is lost.
                pid, status = self.pid, -1
            if pid == 0:
                return False
            _UNREAPED.discard(self.pid)
            if status == -1:
                self._status = (None, None)
            elif os.WIFSIGNALED(status):
                self._status = (None, os.WTERMSIG(status))
            else:
                self._status = (os.WEXITSTATUS(status), None)
            if self._pidfd_watched:
                assert self._loop is not None
                self._loop.remove_reader(self._pidfd)
                self._pidfd_watched = False
            os.close(self._pidfd)
        if not self._master_open and self._on_exit is not None and not self._exit_reported:
            self._exit_reported = True
            self._on_exit(*self._status)
        return True
