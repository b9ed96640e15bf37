"""The office as a process of its own (issue 11): started detached from the terminal,
found again, listed and stopped.

`start` runs `hive-office serve` in a double-forked child: its own session, no
controlling terminal (not a session leader, so no tty it opens can become one), stdin
/dev/null, stdout and stderr appended to run/office.log. Where a systemd user manager
runs, the child execs through `systemd-run --user --scope`, which puts the same process
in a scope of its own so that the end of the login session does not take it down.

The office is found by its lock (office/lock.py: the flock on the home folder), so a
pid file left behind never passes for a running office. Every office that `serve`s lists
itself in a per-user folder (`listed`) for `hive-office ls`; an entry whose pid no longer
holds its home's lock is stale and dropped when read.

Stopping is SIGTERM to the lock holder: serve's own stop (agents stopped, mail routed,
last commit), then waiting for the process to be gone. A stop always ends: STOP_DEADLINE
after it was asked for, a process still held up by one of its threads ends anyway
(exit_by), and the home's lock with it. An office that dies in any other
way still takes its agents with it (desks/pty_session.py: PDEATHSIG and the session
guard), whichever way it was started.
"""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec

from hive_core.caller import request
from hive_core.errors import OfficeError
from hive_core.fsio import atomic_write
from hive_core.hint import office_command
from hive_core.office.lock import _flock_holder
from hive_core.paths import HivePaths
from hive_core.schema import ControlRequest, Registry

# Start-up recovers, scans and spawns off the loop; a loaded 2-core machine has taken
# 10-20 s for a large office.
START_TIMEOUT = 60.0
# How often a starting office is asked whether it answers: until it listens an ask is a
# connect refused at once, and the app's first frame waits on the first that succeeds
# (at 50 ms, 25 ms on average after the office could answer).
START_POLL_S = 0.01
# serve's stop waits for the agents' CLIs, the last routing pass and the last commit;
# past this, whatever still holds it up, the process ends (exit_by) and its lock with it.
STOP_DEADLINE = 60.0
# How long `hive-office stop` waits for the process to be gone: past its deadline.
STOP_TIMEOUT = STOP_DEADLINE + 15.0
# A log that grew past this is moved to office.log.1 at the next start (one kept).
LOG_KEEP = 4 * 1024 * 1024
LOG_TAIL_LINES = 30
_GONE_STATES = {"offline", "exited", "archived"}


class NotRunning(OfficeError):
    def __init__(self, paths: HivePaths) -> None:
        super().__init__(
            f"no office runs on {paths.home}; `{office_command(paths.home)}` starts one."
        )


class StartFailed(OfficeError):
    """The office did not answer in time; the message ends with the log's tail."""


class StopTimeout(OfficeError):
    pass


class Started(NamedTuple):
    pid: int
    scope: str | None
    """The systemd scope it runs in; None: detached only."""
    first_unscoped: bool = False
    """The first start of this home outside a scope: the only one that says what that
    means (each start said it again, and the screen showed it after every detach)."""

    def sentence(self, paths: HivePaths) -> str:
        if self.scope:
            return (
                f"the office of {paths.home} runs in systemd scope {self.scope} (pid {self.pid})."
            )
        if not self.first_unscoped:
            return f"the office of {paths.home} runs detached (pid {self.pid})."
        return (
            f"the office of {paths.home} runs detached (pid {self.pid}); no systemd user "
            "manager runs here, so logging out may stop it (where systemd is the init, "
            "`loginctl enable-linger` starts one and the next start uses a scope). "
            "Said once for this home."
        )


class OfficeEntry(msgspec.Struct, kw_only=True):
    """One line of the per-user list of running offices."""

    home: str
    pid: int


class Listed(NamedTuple):
    home: str
    pid: int
    agents: int
    """Agents whose CLI runs (the office's registry)."""
    clients: int | None
    """Clients attached (run/clients.json); None when the office has not said."""


# --- finding the office -----------------------------------------------------------------


def running_pid(paths: HivePaths) -> int | None:
    """The pid of the office that holds `paths`' lock, None if none does."""
    try:
        fd = os.open(paths.home, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        holder = _flock_holder(fd)
    finally:
        os.close(fd)
    return holder if holder is not None and alive(holder) else None


def alive(pid: int) -> bool:
    """`pid` exists and is not a zombie (a detached office is no child of ours; where
    nothing reaps orphans, a dead one stays a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return bool(fields) and fields[0] not in (b"Z", b"X")


def answers(paths: HivePaths) -> bool:
    """The office answers `status` on its control socket and has its client socket."""
    try:
        reply = request(paths.control_socket, ControlRequest(cmd="status"), timeout=5.0)
    except (ConnectionError, OSError, TimeoutError):
        return False
    return reply.ok and paths.client_socket.exists()


def ready(paths: HivePaths, timeout: float = START_TIMEOUT) -> None:
    """Wait for an office that holds the lock (perhaps still starting) to answer.
    NotRunning if it goes, StartFailed if it stays silent."""
    deadline = time.monotonic() + timeout
    while not answers(paths):
        if running_pid(paths) is None:
            raise NotRunning(paths)
        if time.monotonic() > deadline:
            raise StartFailed(f"the office of {paths.home} did not answer in {timeout:.0f} s.")
        time.sleep(START_POLL_S)


# --- starting -----------------------------------------------------------------------------


def systemd_user_manager() -> bool:
    """A systemd user manager runs for us and systemd-run can reach it."""
    if shutil.which("systemd-run") is None:
        return False
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime, "systemd", "private").exists():
        return True
    try:
        state = subprocess.run(
            ["systemctl", "--user", "is-system-running"],
            capture_output=True,
            text=True,
            timeout=5,
            stdin=subprocess.DEVNULL,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return state in ("running", "degraded")


def scope_name(paths: HivePaths) -> str:
    """One scope name per home, so `systemctl --user status` finds it."""
    return f"hive-office-{_home_key(paths)}"


def serve_argv(paths: HivePaths) -> list[str]:
    # The core's command group: serving never loads the app. -P: the office keeps the
    # caller's cwd (below), and `-m` would put that folder first on sys.path, so
    # `hive-office` started in a checkout of hive-office served that checkout's
    # hive_core, not the installed one beside this interpreter.
    return [sys.executable, "-P", "-m", "hive_core.cli.office", "serve", "--home", str(paths.home)]


def start(
    paths: HivePaths,
    timeout: float = START_TIMEOUT,
    meanwhile: Callable[[], object] | None = None,
) -> Started:
    """Start the office of `paths` detached and wait until it answers. StartFailed
    (with the tail of run/office.log) if it exits or stays silent. `meanwhile` runs once
    the office is forked (never before: a fork beside other threads copies their locks)."""
    paths.run.mkdir(mode=0o700, parents=True, exist_ok=True)
    _rotate(paths.office_log)
    scope = scope_name(paths) if systemd_user_manager() else None
    argv = serve_argv(paths)
    if scope:
        argv = ["systemd-run", "--user", "--scope", "--collect", "--quiet",
                "--unit", scope, "--", *argv]  # fmt: skip
    log = os.open(paths.office_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        offset = os.fstat(log).st_size
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        os.write(log, f"--- {stamp} UTC: {' '.join(argv)}\n".encode())
        pid = _spawn_detached(argv, log)
    finally:
        os.close(log)
    if meanwhile is not None:
        meanwhile()
    deadline = time.monotonic() + timeout
    while True:
        if answers(paths):
            # Another `hive-office` may have won the race to start: attach to that one.
            return Started(running_pid(paths) or pid, scope, scope is None and _first(paths))
        if not alive(pid) and running_pid(paths) is None:
            raise StartFailed(_failure(paths, offset, "the office exited at start"))
        if time.monotonic() > deadline:
            raise StartFailed(
                _failure(paths, offset, f"the office did not answer in {timeout:.0f} s")
            )
        time.sleep(START_POLL_S)


def _first(paths: HivePaths) -> bool:
    """True the first time this home's office starts outside a scope (and remembered)."""
    try:
        fd = os.open(paths.unscoped_told, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return True  # not remembered: said again next time rather than never
    os.close(fd)
    return True


def _spawn_detached(argv: list[str], log: int) -> int:
    """Fork twice and exec `argv` in the grandchild: a new session whose leader exits at
    once, so the office is re-parented, has no controlling terminal and can never get
    one. Its pid, told back over a pipe."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked children
        try:
            os.close(read)
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
            os.write(write, str(os.getpid()).encode())
            os.close(write)
            # What Python ignores for itself, given back as Popen does (restore_signals).
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            # The cwd stays the caller's: a relative `cwd` in office.toml means what it
            # meant when the app ran the agents itself.
            os.execvp(argv[0], argv)
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.write(2, f"hive-office: cannot start the office: {e}\n".encode())
        os._exit(127)
    os.close(write)
    try:
        os.waitpid(child, 0)
        told = b""
        while chunk := os.read(read, 32):
            told += chunk
    finally:
        os.close(read)
    if not told:
        raise StartFailed("the office's process could not be forked.")
    return int(told)


def _rotate(log: Path) -> None:
    """Keep the last run's log beside the new one. A symbolic link in its place (any
    process of this user can plant one) is moved aside itself, never written through."""
    with contextlib.suppress(FileNotFoundError):
        st = log.lstat()
        if stat.S_ISLNK(st.st_mode) or st.st_size > LOG_KEEP:
            log.replace(log.with_name(log.name + ".1"))


def log_tail(paths: HivePaths, offset: int = 0, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(paths.office_log, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _failure(paths: HivePaths, offset: int, what: str) -> str:
    tail = log_tail(paths, offset)
    return f"{what}; the end of {paths.office_log}:\n{tail}" if tail else f"{what}."


# --- stopping -------------------------------------------------------------------------------


_EXIT_ARMED = threading.Lock()


def exit_by(deadline_s: float = STOP_DEADLINE) -> None:
    """The last resort of a stopping office, armed once: if this process is still here
    `deadline_s` from now (a thread waits on something that never comes), the stacks of
    all its threads go to stderr (run/office.log) and it exits at once, status 1. The
    kernel then frees the home's lock (an flock ends with its process), and the agents
    go with it (PDEATHSIG), so a new office can start."""
    if not _EXIT_ARMED.acquire(blocking=False):
        return

    def last_resort() -> None:
        time.sleep(deadline_s)
        with contextlib.suppress(Exception):
            sys.stderr.write(
                f"hive-office: still stopping after {deadline_s:g} s; ending now. "
                "What each thread was doing:\n"
            )
            sys.stderr.flush()
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        os._exit(1)

    threading.Thread(target=last_resort, name="stop-deadline", daemon=True).start()


def stop(paths: HivePaths, timeout: float = STOP_TIMEOUT) -> int:
    """Ask the office of `paths` to stop (serve's SIGTERM: agents stopped, mail routed,
    last commit) and wait until its process is gone; its pid. NotRunning, StopTimeout."""
    pid = running_pid(paths)
    if pid is None:
        raise NotRunning(paths)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            raise StopTimeout(
                f"the office (pid {pid}) is still stopping after {timeout:.0f} s; "
                f"see {paths.office_log}, or `kill -9 {pid}` (its agents go with it)."
            )
        time.sleep(0.05)
    return pid


# --- the per-user list of running offices -----------------------------------------------------


def offices_dir() -> Path:
    """Where running offices list themselves: from the uid alone (not the environment),
    so an SSH login and a tmux started elsewhere see the same list."""
    uid = os.getuid()
    runtime = Path(f"/run/user/{uid}")
    with contextlib.suppress(OSError):
        if runtime.is_dir() and runtime.stat().st_uid == uid and os.access(runtime, os.W_OK):
            return runtime / "hive-office"
    return Path(tempfile.gettempdir()) / f"hive-office-{uid}"


def _own_dir(path: Path) -> Path:
    """`path` as a folder of ours alone; OSError if someone else made it or it is a link."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{path} is not a folder of this user's")
    if st.st_mode & 0o077:
        path.chmod(0o700)
    return path


def _home_key(paths: HivePaths) -> str:
    return hashlib.sha256(os.fsencode(os.path.realpath(paths.home))).hexdigest()[:16]


@contextlib.contextmanager
def listed(paths: HivePaths) -> Iterator[None]:
    """The running office in the per-user list while the block runs. A list that cannot
    be written costs `ls` this office, never the office itself."""
    entry: Path | None = None
    try:
        entry = _own_dir(offices_dir()) / f"{_home_key(paths)}.json"
        body = OfficeEntry(home=os.path.realpath(paths.home), pid=os.getpid())
        atomic_write(entry, msgspec.json.encode(body), fsync=False)
    except OSError as e:
        print(f"hive-office: `hive-office ls` will not list this office: {e}", file=sys.stderr)
        entry = None
    try:
        yield
    finally:
        if entry is not None and _entry(entry) == body:
            entry.unlink(missing_ok=True)


def _entry(path: Path) -> OfficeEntry | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=OfficeEntry)
    except (OSError, msgspec.DecodeError):
        return None


def offices() -> list[Listed]:
    """The offices of this user on this machine that run now, by home. Entries left by
    an office that died (kill -9) are dropped."""
    folder = offices_dir()
    try:
        names = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError:
        return []
    found = []
    for path in names:
        entry = _entry(path)
        if entry is None:
            continue
        paths = HivePaths(Path(entry.home))
        if running_pid(paths) != entry.pid:
            path.unlink(missing_ok=True)
            continue
        found.append(
            Listed(entry.home, entry.pid, agents_running(paths), _clients(paths, entry.pid))
        )
    return found


def agents_running(paths: HivePaths) -> int:
    try:
        registry = msgspec.json.decode(paths.registry.read_bytes(), type=Registry)
    except (OSError, msgspec.DecodeError):
        return 0
    return sum(1 for a in registry.agents if a.status not in _GONE_STATES)


def _clients(paths: HivePaths, pid: int) -> int | None:
    from hive_core.clients.client_socket import ClientsFile

    try:
        told = msgspec.json.decode(paths.clients_file.read_bytes(), type=ClientsFile)
    except (OSError, msgspec.DecodeError):
        return None
    return told.clients if told.pid == pid else None


def render(found: list[Listed]) -> str:
    if not found:
        return "No office runs for this user here; `hive-office` starts one."
    width = max(len(o.home) for o in found)
    lines = [f"{'HOME':<{width}}  {'PID':>7}  AGENTS  CLIENTS"]
    for o in found:
        clients = "?" if o.clients is None else str(o.clients)
        lines.append(f"{o.home:<{width}}  {o.pid:>7}  {o.agents:>6}  {clients:>7}")
    return "\n".join(lines)
