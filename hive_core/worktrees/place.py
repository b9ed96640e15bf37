"""Where an agent works: its worktree's record under run/worktrees, and creating and
bootstrapping a worktree for a desk that wants one."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import NamedTuple

import msgspec

from hive_core.agents.provider import agent_cwd
from hive_core.fsio import atomic_write
from hive_core.ids import utc_now_iso
from hive_core.paths import HivePaths
from hive_core.remote import plan as remote_plan
from hive_core.remote.plan import remote_worktree_relative
from hive_core.schema import AgentSpec, OfficeConfig
from hive_core.worktrees.git import (
    LOCAL,
    SETUP_TIMEOUT_S,
    Git,
    HostUnreachable,
    NoFolder,
    RemoteGit,
    WorktreeError,
    given_runner,
    output_of,
    repo_top,
)
from hive_core.worktrees.plan import (
    SetupMarker,
    WorktreeRecord,
    branch_name,
    parse_top_prefix,
    parse_worktree_list,
    wants_worktree,
)

# --- records ---------------------------------------------------------------------------


def read_record(paths: HivePaths, agent_id: str) -> WorktreeRecord | None:
    try:
        return msgspec.json.decode(
            paths.worktree_record(agent_id).read_bytes(), type=WorktreeRecord
        )
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError) as e:
        raise WorktreeError(
            f"{paths.worktree_record(agent_id)} cannot be read ({e}); move it aside and the "
            "office records the worktree again."
        ) from None


def write_json(path: Path, value: object) -> None:
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
                f"{paths.worktree_record(spec.id)}",
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
                write_json(paths.worktree_record(spec.id), record)
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
    commit = output_of(head)
    on = run(["symbolic-ref", "-q", "--short", "HEAD"], top, ok=(0, 1))
    base = output_of(on) if on.returncode == 0 else None
    if base is None:
        notes.append(
            f"{shown} has a detached HEAD ({commit[:10]}); {spec.id}'s worktree starts from "
            f"that commit, and its branch {branch} is yours to merge (there is no base "
            "branch to merge it into)"
        )
    if output_of(run(["status", "--porcelain", "--untracked-files=no"], top)):
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
    write_json(paths.worktree_record(spec.id), record)
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
    run = given_runner(record, run)
    setup = config.office.worktree_setup
    marker = paths.worktree_setup_marker(record.agent)
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
    write_json(marker, SetupMarker(ok=failed is None, detail=detail, ts=utc_now_iso()))
    notes.append(detail)
    return detail if failed else None


def _tail(output: bytes) -> str:
    lines = output.decode("utf-8", "replace").strip().splitlines()
    return " / ".join(lines[-3:])[-300:] or "no output"
