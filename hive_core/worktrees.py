"""Agents' git worktrees, the effects: create one per agent, bootstrap it, diff it
against its base, merge it back, remove it, and warn when two branches touch a file.

This is the person's repository, not the hive: everything goes through the `git`
command (pygit2 is the committer's, for the hive only), and nothing here discards
work. A remote desk's worktree lives on its host, made from its roster cwd's repository
there: the same git commands run there over ssh (RemoteGit), through the desk's own
connection when it is up. A merge that would conflict is found with `git merge-tree --write-tree` before
anything is written; a worktree with uncommitted work is never removed. Decisions and
git's output are read in hive_core/worktree_plan.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from hive_core import gitsafe
from hive_core.agents.provider import agent_cwd
from hive_core.fsio import UnsafeFile, atomic_write, read_head
from hive_core.ids import new_message_id, utc_now_iso
from hive_core.paths import HivePaths
from hive_core.remote import plan as remote_plan
from hive_core.remote.launch import LinkFailed
from hive_core.remote.plan import remote_worktree_relative
from hive_core.remote.ssh import SSH_FAILED, remote_path_word, ssh_argv
from hive_core.routing.decide import router_notice
from hive_core.schema import AgentSpec, Message, OfficeConfig
from hive_core.worktree_plan import (
    GIT_VARS,
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_LINK,
    NO_FOLDER_EXIT,
    UNTRACKED_READ_MAX,
    FilePatch,
    FileStat,
    MergeCheck,
    Overlap,
    SetupMarker,
    WorktreeRecord,
    branch_name,
    new_file_patch,
    overlap_text,
    overlaps,
    parse_merge_tree,
    parse_numstat,
    parse_patch,
    parse_top_prefix,
    parse_worktree_list,
    remote_git_script,
    remote_home_script,
    remote_new_files_script,
    remote_setup_script,
    stat_of,
    unreachable_text,
    untracked_stat,
    wants_worktree,
)

GIT_TIMEOUT_S = 300.0
# Reading a repository's config is instant unless something in it never ends (an
# include that is a FIFO an agent made): then the call fails soon, with the reason.
CONFIG_TIMEOUT_S = 20.0
# worktree_setup may install dependencies; past this it is stopped and reported.
SETUP_TIMEOUT_S = 1800.0


class WorktreeError(Exception):
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
            found = _new_file(str(cwd), name)
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


def _given(record: WorktreeRecord, run: Git | None) -> Git:
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


def _out(done: subprocess.CompletedProcess[bytes]) -> str:
    return done.stdout.decode("utf-8", "surrogateescape").strip()


def repo_top(folder: Path) -> Path | None:
    """The top of the git repository `folder` is in (its own worktree's top), or None."""
    if not folder.is_dir():
        return None
    try:
        return Path(_out(git(["rev-parse", "--show-toplevel"], folder)))
    except WorktreeError:
        return None


# --- records ---------------------------------------------------------------------------


def _record_file(paths: HivePaths, agent_id: str) -> Path:
    return paths.worktree_records / f"{agent_id}.json"


def _marker_file(paths: HivePaths, agent_id: str) -> Path:
    return paths.worktree_records / f"{agent_id}.setup.json"


def read_record(paths: HivePaths, agent_id: str) -> WorktreeRecord | None:
    try:
        return msgspec.json.decode(_record_file(paths, agent_id).read_bytes(), type=WorktreeRecord)
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError) as e:
        raise WorktreeError(
            f"{_record_file(paths, agent_id)} cannot be read ({e}); move it aside and the "
            "office records the worktree again."
        ) from None


def _write(path: Path, value: object) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, msgspec.json.encode(value))


def record_for(paths: HivePaths, agent_id: str) -> WorktreeRecord:
    """The agent's worktree record, or a WorktreeError saying it has none."""
    record = read_record(paths, agent_id)
    if record is None:
        raise WorktreeError(
            f"{agent_id} has no worktree in this office (the manager, `worktree = false`, "
            "or a cwd outside any git repository)."
        )
    return record


# --- creating ---------------------------------------------------------------------------


class Placement(NamedTuple):
    # Where the agent starts (a remote desk's: a folder on its host); None: its roster
    # cwd, as before.
    cwd: Path | None
    notes: list[str]  # sentences for the office log
    problem: str | None  # for health: the person must act


def place(paths: HivePaths, config: OfficeConfig, spec: AgentSpec) -> Placement:
    """Where `spec` starts: its worktree (made, or made again, if missing), else its
    own cwd with the reason. A remote desk's worktree is on its host (the Path is that
    host's). Runs git: call it off the event loop. Raises HostUnreachable when a remote
    desk's host cannot be reached: starting in its roster cwd would put the agent in
    the person's checkout."""
    if not wants_worktree(spec, config.office.manager):
        return Placement(None, [], None)
    notes: list[str] = []
    run: Git = LOCAL if spec.host is None else RemoteGit(spec, paths)
    try:
        record = read_record(paths, spec.id)
        if record is not None and record.host != spec.host:
            return Placement(
                None,
                notes,
                f"{spec.id}'s worktree {record.path} is on {record.host or 'this machine'}, "
                f"but office.toml now puts it on {spec.host or 'this machine'}, so it works "
                f"in its cwd without a worktree; merge or remove the old one "
                f"(`hive-office worktree remove {spec.id}` with the old host) and delete "
                f"{_record_file(paths, spec.id)}",
            )
        if record is None:
            found = _repository(run, spec, notes)
            if found is None:
                return Placement(None, notes, None)
            top, subdir = found
            record = _create(paths, config, spec, run, top, subdir, notes)
        else:
            if record.ssh_args != spec.ssh_args:
                record = msgspec.structs.replace(record, ssh_args=list(spec.ssh_args))
                _write(_record_file(paths, spec.id), record)
            if not run.is_dir(record.path):
                _add_again(run, record)
                notes.append(
                    f"made {spec.id}'s worktree again at {run.where(record.path)} on "
                    f"{record.branch}"
                )
    except HostUnreachable:
        raise
    except (WorktreeError, OSError) as e:
        return Placement(None, notes, f"{spec.id} works in its cwd without a worktree: {e}")
    problem = bootstrap(paths, config, record, notes, run=run)
    if not record.subdir:
        return Placement(Path(record.path), notes, problem)
    where = f"{record.path}/{record.subdir}"
    return Placement(Path(where if run.is_dir(where) else record.path), notes, problem)


def _repository(run: Git, spec: AgentSpec, notes: list[str]) -> tuple[str, str] | None:
    """The repository top the agent's roster cwd is in and the cwd's place in it, or None
    with the reason in `notes`."""
    if run.host is None:
        cwd = agent_cwd(spec)
        top = repo_top(cwd)
        if top is None:
            notes.append(
                f"{cwd} is not in a git repository, so {spec.id} works there, without a worktree"
            )
            return None
        subdir = os.path.relpath(cwd.resolve(), top.resolve()) if cwd != top else ""
        return str(top), "" if subdir == "." or subdir.startswith("..") else subdir
    try:
        found = run(["rev-parse", "--show-toplevel", "--show-prefix"], spec.cwd, ok=(0, 128))
    except NoFolder as e:
        notes.append(f"{e}, so {spec.id} works without a worktree")
        return None
    if found.returncode:
        notes.append(
            f"{run.where(spec.cwd)} is not in a git repository, so {spec.id} works there, "
            "without a worktree"
        )
        return None
    try:
        return parse_top_prefix(found.stdout)
    except ValueError as e:
        raise WorktreeError(str(e)) from None


def _add_again(run: Git, record: WorktreeRecord) -> None:
    """Check the kept branch out again where the folder was. A folder deleted by hand
    is still registered to git; only that registration is overridden (-f), never the
    branch being checked out somewhere else (`git worktree prune` would also drop the
    person's own worktrees on an unmounted disk)."""
    listed = run(["worktree", "list", "--porcelain", "-z"], record.repo).stdout
    holder = parse_worktree_list(listed).get(record.branch)
    if holder is not None and holder != record.path:
        raise WorktreeError(
            f"{record.branch} is checked out in {run.where(holder)}; check out another branch there"
        )
    force = ["-f"] if holder == record.path else []
    run(["worktree", "add", *force, record.path, record.branch], record.repo)


def _create(
    paths: HivePaths,
    config: OfficeConfig,
    spec: AgentSpec,
    run: Git,
    top: str,
    subdir: str,
    notes: list[str],
) -> WorktreeRecord:
    branch = branch_name(config.office.name, str(paths.home), spec.id)
    shown = run.where(top)
    head = run(["rev-parse", "--verify", "-q", "HEAD^{commit}"], top, ok=(0, 1))
    if head.returncode:
        raise WorktreeError(f"{shown} has no commit yet; commit something and restart {spec.id}")
    commit = _out(head)
    on = run(["symbolic-ref", "-q", "--short", "HEAD"], top, ok=(0, 1))
    base = _out(on) if on.returncode == 0 else None
    if base is None:
        notes.append(
            f"{shown} has a detached HEAD ({commit[:10]}); {spec.id}'s worktree starts from "
            f"that commit, and its branch {branch} is yours to merge (there is no base "
            "branch to merge it into)"
        )
    if _out(run(["status", "--porcelain", "--untracked-files=no"], top)):
        notes.append(
            f"{shown} has uncommitted changes; {spec.id}'s worktree starts from the last "
            f"commit ({commit[:10]}) without them, and they stay where they are"
        )
    if isinstance(run, RemoteGit):
        key = remote_plan.office_key(paths.home)
        target = f"{run.home().rstrip('/')}/{remote_worktree_relative(key, spec.id)}"
        # git worktree add itself refuses a folder that holds files.
    else:
        local = paths.worktree(spec.id)
        if local.exists() and any(local.iterdir()):
            raise WorktreeError(
                f"{local} already holds files the office did not put there; move them "
                f"and restart {spec.id}"
            )
        paths.worktrees.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = str(local)
    known = run(["rev-parse", "--verify", "-q", f"refs/heads/{branch}"], top, ok=(0, 1))
    if known.returncode == 0:
        run(["worktree", "add", target, branch], top)
        notes.append(f"{spec.id} works in {run.where(target)} on its existing branch {branch}")
    else:
        run(["worktree", "add", "-b", branch, target, commit], top)
        notes.append(
            f"{spec.id} works in {run.where(target)} on branch {branch}, from "
            f"{base or 'a detached HEAD'} at {commit[:10]}"
        )
    record = WorktreeRecord(
        agent=spec.id,
        repo=top,
        path=target,
        branch=branch,
        base_branch=base,
        base_commit=commit,
        subdir=subdir,
        created=utc_now_iso(),
        host=spec.host,
        ssh_args=list(spec.ssh_args),
    )
    _write(_record_file(paths, spec.id), record)
    return record


def bootstrap(
    paths: HivePaths,
    config: OfficeConfig,
    record: WorktreeRecord,
    notes: list[str],
    *,
    run: Git | None = None,
) -> str | None:
    """Run office.worktree_setup once in the worktree (a marker says it ran; a remote
    desk's runs on its host). Its failure is returned (and returned again at every start
    until the person removes the marker): the agent still starts."""
    run = _given(record, run)
    setup = config.office.worktree_setup
    marker = _marker_file(paths, record.agent)
    if not setup:
        return None
    with contextlib.suppress(FileNotFoundError, msgspec.DecodeError):
        ran = msgspec.json.decode(marker.read_bytes(), type=SetupMarker)
        return None if ran.ok else ran.detail
    where = run.where(record.path)
    try:
        done = run.setup(
            setup, record.path, {"HIVE_REPO": record.repo, "HIVE_WORKTREE": record.path}
        )
        failed = (
            f"exit {done.returncode}: {_tail(done.stderr or done.stdout)}"
            if done.returncode
            else None
        )
    except subprocess.TimeoutExpired:
        failed = f"still running after {SETUP_TIMEOUT_S:g} s, stopped"
    except HostUnreachable:
        raise
    except (OSError, WorktreeError) as e:
        failed = str(e)
    detail = (
        f"worktree_setup failed in {where} ({failed}); {record.agent} runs anyway. "
        f"Fix it there, then delete {marker} to have it run at the next start"
        if failed
        else f"worktree_setup ran in {where}"
    )
    _write(marker, SetupMarker(ok=failed is None, detail=detail, ts=utc_now_iso()))
    notes.append(detail)
    return detail if failed else None


def _tail(output: bytes) -> str:
    lines = output.decode("utf-8", "replace").strip().splitlines()
    return " / ".join(lines[-3:])[-300:] or "no output"


# --- diffs ------------------------------------------------------------------------------
# Each takes the worktree's runner (`run`); without one, a local worktree's.


def diff_base(record: WorktreeRecord, *, run: Git | None = None) -> str:
    """What the agent's changes are counted from: where its branch left the base branch
    (so work already merged back does not count), or the recorded commit."""
    run = _given(record, run)
    if record.base_branch is not None:
        found = run(["merge-base", record.base_branch, "HEAD"], record.path, ok=(0, 1))
        if found.returncode == 0 and _out(found):
            return _out(found)
    return record.base_commit


def untracked(folder: str, *, run: Git = LOCAL) -> list[str]:
    out = run(["ls-files", "--others", "--exclude-standard", "-z"], folder).stdout
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


def changed_files(record: WorktreeRecord, *, run: Git | None = None) -> list[FileStat]:
    """Every file the agent changed against its base, committed or not; untracked files
    count as new (read, never added to the index)."""
    run = _given(record, run)
    base = diff_base(record, run=run)
    out = run(["diff", *gitsafe.DIFF_FLAGS, "--numstat", "-z", "--no-renames", base], record.path)
    stats = parse_numstat(out.stdout)
    new = untracked(record.path, run=run)
    if run.host is not None and new:
        stats += [
            stat_of(msgspec.structs.replace(p, untracked=True))
            for p in parse_patch(run.new_files(new, record.path))
        ]
        return sorted(stats, key=lambda s: s.path)
    for name in new:
        found = _new_file(record.path, name)
        if found is not None:
            stats.append(untracked_stat(name, found[0]))
    return sorted(stats, key=lambda s: s.path)


def _new_file(folder: str, name: str) -> tuple[bytes, str, bool] | None:
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


def patch(
    record: WorktreeRecord, only: Iterable[str] | None = None, *, run: Git | None = None
) -> str:
    """The unified diff of the agent's changes (untracked files as new files)."""
    run = _given(record, run)
    wanted = None if only is None else set(only)
    return _patch(record, run, diff_base(record, run=run), untracked(record.path, run=run), wanted)


def review(
    record: WorktreeRecord, *, run: Git | None = None
) -> tuple[list[FileStat], list[FilePatch]]:
    """The files and hunks the Diff panel shows, from one diff (the counts are the
    hunks'): each git call stats the whole worktree, so fewer calls is most of it."""
    run = _given(record, run)
    new = untracked(record.path, run=run)
    patches = parse_patch(_patch(record, run, diff_base(record, run=run), new, None))
    if new:
        fresh = set(new)
        patches = [
            msgspec.structs.replace(p, untracked=True) if p.path in fresh else p for p in patches
        ]
    return [stat_of(p) for p in patches], patches


class AgentReview(NamedTuple):
    agent: str
    branch: str
    files: list[FileStat]
    patches: list[FilePatch]
    error: str | None = None


def office_review(paths: HivePaths, config: OfficeConfig) -> list[AgentReview]:
    """Every agent with a worktree and changes against its base (the Diff panel's
    view); an agent whose worktree git cannot read (its host down, say) is listed with
    the reason."""
    found: list[AgentReview] = []
    for spec in config.agents:
        try:
            record = read_record(paths, spec.id)
            if record is None:
                continue
            files, patches = review(record, run=runner(paths, record))
        except NoFolder:
            continue
        except WorktreeError as e:
            found.append(AgentReview(spec.id, "", [], [], str(e)))
            continue
        if files:
            found.append(AgentReview(spec.id, record.branch, files, patches))
    return found


def _patch(
    record: WorktreeRecord, run: Git, base: str, new: list[str], wanted: set[str] | None
) -> str:
    args = ["diff", *gitsafe.DIFF_FLAGS, "--no-color", "--no-renames", base]
    if wanted is not None:
        args += ["--", *sorted(wanted)]
    parts = [run(args, record.path).stdout.decode("utf-8", "replace")] if wanted != set() else []
    added = [name for name in new if wanted is None or name in wanted]
    if added:
        parts.append(run.new_files(added, record.path))
    return "".join(parts)


def uncommitted(folder: str, *, run: Git = LOCAL) -> list[str]:
    """Paths with uncommitted work in a worktree (untracked included, ignored not)."""
    out = run(
        ["status", "--porcelain", "-z", "--untracked-files=all", "--no-renames"], folder
    ).stdout
    return [e[3:].decode("utf-8", "surrogateescape") for e in out.split(b"\0") if len(e) > 3]


# --- merging ----------------------------------------------------------------------------


class MergePlan(NamedTuple):
    record: WorktreeRecord
    base_head: str  # the base branch's commit the check was made against
    head: str  # the agent's branch's commit
    ahead: int  # the agent's commits the base does not have
    check: MergeCheck
    files: list[FileStat]  # what the merge changes in the base
    uncommitted: list[str]  # left in the worktree: only commits are merged
    run: Git = LOCAL  # where the repository's git runs (a remote desk's host)


def plan_merge(paths: HivePaths, agent_id: str) -> MergePlan:
    """What merging the agent's branch into its base would do; writes nothing (the
    check is git merge-tree, which touches no worktree or ref). A remote desk's runs on
    its host."""
    record = record_for(paths, agent_id)
    run = runner(paths, record)
    repo = run.where(record.repo)
    if record.base_branch is None:
        raise WorktreeError(
            f"{agent_id}'s worktree was made from a detached HEAD, so there is no base "
            f"branch to merge into; merge {record.branch} yourself with git"
        )
    base_ref = f"refs/heads/{record.base_branch}"
    found = run(["rev-parse", "--verify", "-q", base_ref], record.repo, ok=(0, 1))
    if found.returncode:
        raise WorktreeError(f"the base branch {record.base_branch} no longer exists in {repo}")
    base_head = _out(found)
    head = _out(run(["rev-parse", "--verify", f"refs/heads/{record.branch}"], record.repo))
    ahead = int(_out(run(["rev-list", "--count", f"{base_head}..{head}"], record.repo)))
    done = run(
        ["merge-tree", "--write-tree", "--name-only", "--no-messages", base_head, head],
        record.repo,
        ok=(0, 1),
    )
    check = parse_merge_tree(done.stdout, done.returncode)
    numstat = run(
        ["diff", *gitsafe.DIFF_FLAGS, "--numstat", "-z", "--no-renames", base_head, check.tree],
        record.repo,
    )
    files = parse_numstat(numstat.stdout) if check.clean else []
    try:
        left = uncommitted(record.path, run=run)
    except NoFolder:
        left = []
    return MergePlan(record, base_head, head, ahead, check, files, left, run)


def apply_merge(plan: MergePlan) -> str:
    """Merge a clean plan into the base branch: in the folder that has it checked out
    (git merge, which refuses rather than overwrite local changes there), or, checked
    out nowhere, by moving the ref only if it has not moved since the plan."""
    record, run = plan.record, plan.run
    base = record.base_branch
    assert base is not None and plan.check.clean
    listed = run(["worktree", "list", "--porcelain", "-z"], record.repo).stdout
    folder = parse_worktree_list(listed).get(base)
    if folder is not None:
        now = _out(run(["rev-parse", "--verify", f"refs/heads/{base}"], folder))
        if now != plan.base_head:
            raise WorktreeError(f"{base} moved while the merge was being checked; run it again")
        run(["merge", "--no-edit", "--no-verify", "--no-gpg-sign", plan.head], folder)
        where = f"in {run.where(folder)}"
    else:
        ref = f"refs/heads/{base}"
        is_ff = run(
            ["merge-base", "--is-ancestor", plan.base_head, plan.head], record.repo, ok=(0, 1)
        )
        if is_ff.returncode == 0:
            new = plan.head
        else:
            message = f"Merge branch '{record.branch}' into {base}"
            new = _out(
                run(
                    [
                        "commit-tree",
                        "--no-gpg-sign",
                        plan.check.tree,
                        "-p",
                        plan.base_head,
                        "-p",
                        plan.head,
                        "-m",
                        message,
                    ],
                    record.repo,
                )
            )
        run(
            ["update-ref", "-m", f"hive-office merge {record.agent}", ref, new, plan.base_head],
            record.repo,
        )
        where = "(not checked out anywhere, so only the branch moved)"
    count = f"{plan.ahead} commit{'s' if plan.ahead != 1 else ''}"
    files = f"{len(plan.files)} file{'s' if len(plan.files) != 1 else ''}"
    return f"merged {record.branch} ({count}, {files}) into {base} {where}."


def render_stat(stats: list[FileStat]) -> str:
    if not stats:
        return "no changes."
    width = min(max(len(s.path) for s in stats), 60)
    lines = []
    for s in stats:
        counts = "binary" if s.binary else f"+{s.added} -{s.deleted}"
        new = " (untracked)" if s.untracked else ""
        lines.append(f" {s.path:<{width}} | {counts}{new}")
    added = sum(s.added for s in stats)
    deleted = sum(s.deleted for s in stats)
    files = f"{len(stats)} file{'s' if len(stats) != 1 else ''}"
    lines.append(f" {files} changed, +{added} -{deleted}")
    return "\n".join(lines)


def render_plan(plan: MergePlan) -> str:
    record = plan.record
    commits = f"{plan.ahead} commit{'s' if plan.ahead != 1 else ''}"
    lines = [f"{record.branch} -> {record.base_branch} ({commits}):", render_stat(plan.files)]
    if plan.uncommitted:
        lines.append(_uncommitted(plan))
    return "\n".join(lines)


def _uncommitted(plan: MergePlan) -> str:
    left = plan.uncommitted
    shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
    return (
        f"Not merged: {len(left)} uncommitted file{'s' if len(left) != 1 else ''} in "
        f"{plan.run.where(plan.record.path)} ({shown}); commit them there to include them."
    )


def conflict_text(plan: MergePlan) -> str:
    record = plan.record
    files = "\n".join(f"  {p}" for p in plan.check.conflicts)
    return (
        f"{record.branch} does not merge cleanly into {record.base_branch}; nothing was "
        f"changed. Conflicting files:\n{files}\n"
        f"Have {record.agent} merge {record.base_branch} into its branch and resolve "
        "them, then merge again."
    )


def run_merge(
    plan: MergePlan,
    *,
    ask: Callable[[str], bool],
    echo: Callable[[str], None],
    tell_manager: Callable[[str, str], None] | None,
    dry_run: bool = False,
) -> int:
    """A merge as the person or the manager runs it (`hive-office merge`, `hive merge`,
    the app's Diff screen): a conflict told (and mailed to the manager by
    `tell_manager`), nothing to merge said, else the plan shown, `ask`ed, applied; the
    exit code."""
    record = plan.record
    if not plan.check.clean:
        text = conflict_text(plan)
        echo(text)
        if tell_manager is not None:
            tell_manager(f"{record.agent}'s branch conflicts with {record.base_branch}", text)
        return 1
    if plan.ahead == 0:
        echo(f"nothing to merge: {record.branch} has no commit {record.base_branch} lacks.")
        if plan.uncommitted:
            echo(_uncommitted(plan))
        return 0
    echo(render_plan(plan))
    if dry_run:
        echo("dry run: nothing merged.")
        return 0
    if not ask(f"Merge into {record.base_branch}?"):
        echo("not merged.")
        return 1
    echo(apply_merge(plan))
    return 0


# --- removing ---------------------------------------------------------------------------


def remove(paths: HivePaths, agent_id: str) -> str:
    """Remove the agent's worktree folder; its branch stays. Refused while it holds
    uncommitted work."""
    record = record_for(paths, agent_id)
    run = runner(paths, record)
    try:
        left = uncommitted(record.path, run=run)
    except NoFolder:
        raise WorktreeError(
            f"{agent_id}'s worktree {run.where(record.path)} is already gone; its branch "
            f"{record.branch} stays"
        ) from None
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        raise WorktreeError(
            f"{agent_id}'s worktree has uncommitted work ({shown}); commit it there (or "
            "move it away) and try again. Nothing was removed"
        )
    run(["worktree", "remove", record.path], record.repo)
    _marker_file(paths, agent_id).unlink(missing_ok=True)
    return f"removed {run.where(record.path)}; the branch {record.branch} stays."


# --- the office's side ------------------------------------------------------------------


def _overlaps_file(paths: HivePaths) -> Path:
    return paths.worktree_records / "overlaps.json"


def read_overlaps(paths: HivePaths) -> list[Overlap]:
    """The files two agents' branches touch now, as of the keeper's last pass (told.json
    keeps every overlap ever warned of; this one forgets a pair once it is resolved)."""
    try:
        return msgspec.json.decode(_overlaps_file(paths).read_bytes(), type=list[Overlap])
    except (FileNotFoundError, msgspec.DecodeError):
        return []


class WorktreeKeeper:
    """What a running office does with worktrees: place each agent before its start, and
    every office.worktree_check_s compare branches and warn (once per pair and file) of files
    two agents both change. Git runs on threads, never on the loop."""

    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        *,
        log: Callable[[str, str], None],
        report: Callable[[str, str | None], None],
        post: Callable[[str, Message], None],
    ) -> None:
        self.paths = paths
        self.config = config
        self.log = log
        self.report = report  # (component, detail or None to clear)
        self.post = post
        self._said: set[str] = set()
        self._halt = threading.Event()

    async def workplace(self, spec: AgentSpec) -> Path | None:
        """Where the agent's CLI starts (None: its roster cwd); a remote desk's is a
        folder on its host. Raises LinkFailed when that host cannot be reached (the
        supervisor's link-down path then retries the whole start)."""
        loop = asyncio.get_running_loop()
        try:
            placed = await loop.run_in_executor(None, place, self.paths, self.config, spec)
        except HostUnreachable as e:
            raise LinkFailed(e.reason) from None
        for note in placed.notes:
            if note not in self._said:
                self._said.add(note)
                self.log(spec.id, note)
        if placed.problem and placed.problem not in self._said:
            self._said.add(placed.problem)
            self.log(spec.id, placed.problem)
        self.report(f"worktree:{spec.id}", placed.problem)
        return placed.cwd

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                checking: asyncio.Future[Any] = loop.run_in_executor(None, self.check_overlaps)
                await asyncio.wait({checking, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not checking.done():
                    # A stop is never held up by a pass: its git children are killed,
                    # no other starts, and the pass's thread ends with their failure.
                    stop_children(self._halt)
                    return
                self._tell(checking.result())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.config.office.worktree_check_s)
        finally:
            stopping.cancel()

    def _tell(self, news: dict[tuple[str, str], list[str]]) -> None:
        for (first, second), files in news.items():
            for reader in dict.fromkeys([first, second, self.config.office.manager]):
                subject, body = overlap_text(first, second, files, reader)
                notice = router_notice(f"{new_message_id()}-overlap", reader, subject, body)
                self.post(reader, notice)
            self.log(first, f"told {second} and the manager that both change {', '.join(files)}")

    def check_overlaps(self) -> dict[tuple[str, str], list[str]]:
        """New overlaps by pair, remembered in run/ as told before anyone is told (a
        crash then loses a warning rather than repeating it)."""
        with halted_by(self._halt):
            return self._check_overlaps()

    def _check_overlaps(self) -> dict[tuple[str, str], list[str]]:
        changes: dict[str, list[str]] = {}
        for spec in self.config.agents:
            try:
                record = read_record(self.paths, spec.id)
                if record is None or spec.archived:
                    continue
                run = runner(self.paths, record)
                changes[spec.id] = [s.path for s in changed_files(record, run=run)]
            except NoFolder:
                continue
            except WorktreeError as e:
                if self._halt.is_set():
                    break
                # One unreadable worktree does not keep the others from being compared.
                if str(e) not in self._said:
                    self._said.add(str(e))
                    self.log(spec.id, f"its worktree cannot be compared with the others: {e}")
        if self._halt.is_set():
            return {}  # a pass cut short knows too little to change what was found
        found = overlaps(changes)
        if found != read_overlaps(self.paths):
            _write(_overlaps_file(self.paths), found)
        told_file = self.paths.worktree_records / "told.json"
        try:
            told = set(msgspec.json.decode(told_file.read_bytes(), type=list[Overlap]))
        except (FileNotFoundError, msgspec.DecodeError):
            told = set()
        news = [o for o in found if o not in told]
        if not news:
            return {}
        _write(told_file, sorted(told | set(news)))
        by_pair: dict[tuple[str, str], list[str]] = {}
        for o in news:
            by_pair.setdefault((o.first, o.second), []).append(o.path)
        return by_pair
