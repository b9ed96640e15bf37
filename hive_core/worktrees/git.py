"""The git command, locally or on a desk's host over ssh, and the children it runs:
one runner per record (Git, RemoteGit), each child halted with the thread that asked."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from hive_core import gitsafe
from hive_core.errors import OfficeError
from hive_core.fsio import UnsafeFile, read_head
from hive_core.paths import HivePaths
from hive_core.remote import plan as remote_plan
from hive_core.remote.ssh import SSH_FAILED, remote_path_word, ssh_argv
from hive_core.schema import AgentSpec
from hive_core.worktrees.plan import (
    GIT_VARS,
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_LINK,
    NO_FOLDER_EXIT,
    UNTRACKED_READ_MAX,
    WorktreeRecord,
    new_file_patch,
    remote_git_script,
    remote_home_script,
    remote_new_files_script,
    remote_setup_script,
    unreachable_text,
)

GIT_TIMEOUT_S = 300.0
# Reading a repository's config is instant unless something in it never ends (an
# include that is a FIFO an agent made): then the call fails soon, with the reason.
CONFIG_TIMEOUT_S = 20.0
# worktree_setup may install dependencies; past this it is stopped and reported.
SETUP_TIMEOUT_S = 1800.0


class WorktreeError(OfficeError):
    """A worktree operation cannot be done; the message says why and what to do."""


class NoFolder(WorktreeError):
    """The folder git was to run in does not exist (a worktree deleted by hand)."""


class HostUnreachable(WorktreeError):
    """ssh could not reach a remote desk's host (ssh's own exit 255, not git's)."""

    def __init__(self, host: str, reason: str) -> None:
        super().__init__(unreachable_text(host, reason))
        self.reason = reason  # ssh's own words, for the desk's link-down line


# The children running now, each with the halt of the thread that started it (None: a
# caller that is never halted).
_RUNNING: dict[subprocess.Popen[bytes], threading.Event | None] = {}
_RUNNING_LOCK = threading.Lock()
_HALT = threading.local()


@contextlib.contextmanager
def halted_by(halt: threading.Event) -> Iterator[None]:
    """Children this thread starts within the block are killed at stop_children(halt),
    and none starts once it is set."""
    _HALT.event = halt
    try:
        yield
    finally:
        _HALT.event = None


def _child(
    argv: Sequence[str],
    timeout: float,
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """subprocess.run, with the child known to stop_children while it runs."""
    halt: threading.Event | None = getattr(_HALT, "event", None)
    if halt is not None and halt.is_set():
        raise WorktreeError("the office is stopping")
    with subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # Its own process group, so a kill takes what it started too (whatever still
        # holds its output pipes).
        start_new_session=True,
    ) as proc:
        with _RUNNING_LOCK:
            _RUNNING[proc] = halt
        if halt is not None and halt.is_set():
            _kill(proc)  # halted between the check and the start
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            raise
        finally:
            with _RUNNING_LOCK:
                del _RUNNING[proc]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def running_children() -> list[int]:
    """The pids of the children `_child` runs now: each in a session of its own and
    waited for here (strays.py must never reap one)."""
    with _RUNNING_LOCK:
        return [proc.pid for proc in _RUNNING]


def stop_children(halt: threading.Event) -> int:
    """Set `halt` and kill every git (or ssh, or worktree_setup) started under it, so a
    stopping office never waits for one a repository holds up (a config include that is
    a FIFO blocks git itself); their callers see a failure. How many there were."""
    halt.set()
    with _RUNNING_LOCK:
        running = [proc for proc, its in _RUNNING.items() if its is halt]
    for proc in running:
        _kill(proc)
    return len(running)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _said(stderr: bytes, fallback: object) -> str:
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else str(fallback)


class Git:
    """Runs git for one desk's worktrees. This one runs it here; RemoteGit on the
    desk's host. Every worktree operation goes through one of these."""

    host: str | None = None

    def where(self, folder: Path | str) -> str:
        """`folder` as a sentence names it."""
        return str(folder)

    def __call__(
        self, args: Sequence[str], cwd: Path | str, *, ok: tuple[int, ...] = (0,)
    ) -> subprocess.CompletedProcess[bytes]:
        if not os.path.isdir(cwd):
            raise NoFolder(f"the folder {cwd} does not exist")
        # The repository's own driver settings are read first and each is emptied for
        # the call itself (gitsafe): reading config runs nothing.
        try:
            names = _child(
                gitsafe.argv(gitsafe.LIST_NAMES),
                CONFIG_TIMEOUT_S,
                cwd=cwd,
                env=gitsafe.environment(os.environ),
            )
        except OSError as e:
            raise WorktreeError(f"git could not run in {cwd}: {e}") from None
        except subprocess.TimeoutExpired:
            raise WorktreeError(
                f"git could not read the repository's config in {cwd} within "
                f"{CONFIG_TIMEOUT_S:g} s (does an include.path there name a FIFO?); "
                "nothing was run"
            ) from None
        if names.returncode:
            raise WorktreeError(
                f"git cannot read the repository's config in {cwd}: "
                f"{_said(names.stderr, names.returncode)}"
            )
        env = gitsafe.environment(
            os.environ, gitsafe.driver_overrides(gitsafe.parse_names(names.stdout))
        )
        return self._git(args, cwd, env, ok)

    def _git(
        self, args: Sequence[str], cwd: Path | str, env: dict[str, str], ok: tuple[int, ...]
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            done = _child(gitsafe.argv(args), GIT_TIMEOUT_S, cwd=cwd, env=env)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise WorktreeError(f"`git {' '.join(args)}` could not run in {cwd}: {e}") from None
        if done.returncode not in ok:
            raise WorktreeError(
                f"`git {' '.join(args)}` failed in {cwd}: {_said(done.stderr, done.returncode)}"
            )
        return done

    def new_files(self, names: Sequence[str], cwd: Path | str) -> str:
        """git's patch of each untracked file as a new file. Made here from the office's
        own safe read (`git diff --no-index` would read a FIFO an agent left, from git
        2.42 on, and wait for a writer); a FIFO or device is left out."""
        parts = []
        for name in names:
            found = read_new_file(str(cwd), name)
            if found is not None:
                data, mode, whole = found
                parts.append(new_file_patch(name, data, mode, whole=whole))
        return "".join(parts)

    def is_dir(self, folder: Path | str) -> bool:
        return os.path.isdir(folder)

    def setup(
        self, script: str, cwd: str, env: Mapping[str, str]
    ) -> subprocess.CompletedProcess[bytes]:
        """Run worktree_setup (`/bin/sh -c script`) in the worktree with `env` added."""
        full = {k: v for k, v in os.environ.items() if k not in GIT_VARS}
        full.update(env)
        return _child(["/bin/sh", "-c", script], SETUP_TIMEOUT_S, cwd=cwd, env=full)


LOCAL = Git()


class RemoteGit(Git):
    """git on a remote desk's host: each call one `ssh ... DEST 'cd DIR || exit 97;
    <gitsafe's prelude>; exec git -c ... ...'` (ssh_argv: the desk's connection is reused when up).
    ssh's exit 255 is HostUnreachable, exit 97 NoFolder."""

    def __init__(self, spec: AgentSpec, paths: HivePaths) -> None:
        assert spec.host is not None, f"{spec.id} has no host"
        self.spec = spec
        self.paths = paths
        self.host = spec.host

    def where(self, folder: Path | str) -> str:
        return f"{folder} on {self.host}"

    def _run(
        self, script: str, *, what: str, timeout: float = GIT_TIMEOUT_S
    ) -> subprocess.CompletedProcess[bytes]:
        host = self.spec.host or "?"
        try:
            done = _child(ssh_argv(self.spec, self.paths, script), timeout)
        except OSError as e:
            raise HostUnreachable(host, f"ssh cannot be run: {e}") from None
        except subprocess.TimeoutExpired:
            raise WorktreeError(
                f"{what} on {host} was still running after {timeout:g} s and was stopped"
            ) from None
        if done.returncode == SSH_FAILED:
            reason = remote_plan.link_reason(
                done.stderr.decode("utf-8", "replace"), "ssh exited with code 255"
            )
            raise HostUnreachable(host, reason)
        return done

    def _checked(
        self,
        done: subprocess.CompletedProcess[bytes],
        cwd: Path | str,
        what: str,
        ok: tuple[int, ...],
    ) -> subprocess.CompletedProcess[bytes]:
        if done.returncode == NO_FOLDER_EXIT:
            raise NoFolder(f"the folder {cwd} does not exist on {self.host}")
        if done.returncode not in ok:
            raise WorktreeError(
                f"{what} failed in {self.where(cwd)}: {_said(done.stderr, done.returncode)}"
            )
        return done

    def __call__(
        self, args: Sequence[str], cwd: Path | str, *, ok: tuple[int, ...] = (0,)
    ) -> subprocess.CompletedProcess[bytes]:
        what = f"`git {' '.join(args)}`"
        done = self._run(remote_git_script(str(cwd), args), what=what)
        return self._checked(done, cwd, what, ok)

    def new_files(self, names: Sequence[str], cwd: Path | str) -> str:
        """git there makes the patches, in one connection (reading each file over ssh
        would be a connection each); only regular files and symlinks are given to it."""
        if not names:
            return ""
        what = f"`git diff --no-index` of {len(names)} new file{'s' if len(names) != 1 else ''}"
        done = self._run(remote_new_files_script(str(cwd), names), what=what)
        return self._checked(done, cwd, what, (0,)).stdout.decode("utf-8", "replace")

    def is_dir(self, folder: Path | str) -> bool:
        return self._run(f"test -d {remote_path_word(str(folder))}", what="test -d").returncode == 0

    def home(self) -> str:
        """The host's $HOME, with the office's worktrees folder there made."""
        done = self._run(
            remote_home_script(remote_plan.office_key(self.paths.home)), what="finding $HOME"
        )
        found = remote_plan.parse_home(done.stdout.decode("utf-8", "replace"))
        if done.returncode or found is None:
            raise WorktreeError(
                f"the office's worktrees folder cannot be made under $HOME on {self.host}: "
                f"{_said(done.stderr, done.returncode)}"
            )
        return found

    def setup(
        self, script: str, cwd: str, env: Mapping[str, str]
    ) -> subprocess.CompletedProcess[bytes]:
        done = self._run(
            remote_setup_script(cwd, script, env), what="worktree_setup", timeout=SETUP_TIMEOUT_S
        )
        if done.returncode == NO_FOLDER_EXIT:
            raise NoFolder(f"the folder {cwd} does not exist on {self.host}")
        return done


def runner(paths: HivePaths, record: WorktreeRecord) -> Git:
    """The git runner for a recorded worktree: here, or on the host it was made on."""
    if record.host is None:
        return LOCAL
    spec = AgentSpec(id=record.agent, name=record.agent, host=record.host, ssh_args=record.ssh_args)
    return RemoteGit(spec, paths)


def given_runner(record: WorktreeRecord, run: Git | None) -> Git:
    """The runner a caller passed; a local worktree's without one."""
    if run is not None:
        return run
    if record.host is not None:
        raise WorktreeError(
            f"{record.agent}'s worktree is on {record.host}: its git runs there (pass its runner)"
        )
    return LOCAL


def git(
    args: Iterable[str], cwd: Path | str, *, ok: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[bytes]:
    """git here (the local runner)."""
    return LOCAL(list(args), cwd, ok=ok)


def output_of(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode("utf-8", "surrogateescape").strip()


def repo_top(folder: Path) -> Path | None:
    """The top of the git repository `folder` is in (its own worktree's top), or None."""
    if not folder.is_dir():
        return None
    try:
        return Path(output_of(git(["rev-parse", "--show-toplevel"], folder)))
    except WorktreeError:
        return None


def read_new_file(folder: str, name: str) -> tuple[bytes, str, bool] | None:
    """An untracked file's first UNTRACKED_READ_MAX bytes, its git mode, and whether that
    was all of it; a symlink's target (never followed); None for anything else (a FIFO,
    a device, a file gone): the agent named it, and the office must not wait on it."""
    path = os.path.join(folder, name)
    try:
        data, st = read_head(path, UNTRACKED_READ_MAX)
    except UnsafeFile:
        try:
            if not stat.S_ISLNK(os.lstat(path).st_mode):
                return None
            return os.fsencode(os.readlink(path)), MODE_LINK, True
        except OSError:
            return None
    except OSError:
        return None
    mode = MODE_EXECUTABLE if st.st_mode & 0o100 else MODE_FILE
    return data, mode, len(data) == st.st_size
