"""Agents' git worktrees, the effects: create one per agent, bootstrap it, diff it
against its base, merge it back, remove it, and warn when two branches touch a file.

This is the person's repository, not the hive: everything goes through the `git`
command (pygit2 is the committer's, for the hive only), and nothing here discards
work. A merge that would conflict is found with `git merge-tree --write-tree` before
anything is written; a worktree with uncommitted work is never removed. Decisions and
git's output are read in hive_core/worktree_plan.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

import msgspec

from hive_core.agents.provider import agent_cwd
from hive_core.fsio import atomic_write
from hive_core.ids import new_message_id, utc_now_iso
from hive_core.paths import HivePaths
from hive_core.routing.decide import router_notice
from hive_core.schema import AgentSpec, Message, OfficeConfig
from hive_core.worktree_plan import (
    UNTRACKED_READ_MAX,
    FilePatch,
    FileStat,
    MergeCheck,
    Overlap,
    SetupMarker,
    WorktreeRecord,
    branch_name,
    overlap_text,
    overlaps,
    parse_merge_tree,
    parse_numstat,
    parse_patch,
    parse_worktree_list,
    stat_of,
    untracked_stat,
    wants_worktree,
)

GIT_TIMEOUT_S = 300.0
# worktree_setup may install dependencies; past this it is stopped and reported.
SETUP_TIMEOUT_S = 1800.0
# Variables that would point git at another repository than the folder's own.
_GIT_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")


class WorktreeError(Exception):
    """A worktree operation cannot be done; the message says why and what to do."""


def git(
    args: Iterable[str], cwd: Path | str, *, ok: tuple[int, ...] = (0,)
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_VARS}
    env["LC_ALL"] = "C"
    argv = ["git", "-c", "core.quotepath=off", *args]
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WorktreeError(f"`git {' '.join(args)}` could not run in {cwd}: {e}") from None
    if done.returncode not in ok:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise WorktreeError(
            f"`git {' '.join(args)}` failed in {cwd}: {said[-1] if said else done.returncode}"
        )
    return done


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
    cwd: Path | None  # where the agent starts; None: its roster cwd, as before
    notes: list[str]  # sentences for the office log
    problem: str | None  # for health: the person must act


def place(paths: HivePaths, config: OfficeConfig, spec: AgentSpec) -> Placement:
    """Where `spec` starts: its worktree (made, or made again, if missing), else its
    own cwd with the reason. Runs git: call it off the event loop."""
    if not wants_worktree(spec, config.office.manager):
        return Placement(None, [], None)
    notes: list[str] = []
    try:
        record = read_record(paths, spec.id)
        if record is None:
            cwd = agent_cwd(spec)
            top = repo_top(cwd)
            if top is None:
                return Placement(
                    None,
                    [
                        f"{cwd} is not in a git repository, so {spec.id} works there, "
                        "without a worktree"
                    ],
                    None,
                )
            record = _create(paths, config, spec, top, cwd, notes)
        elif not Path(record.path).is_dir():
            _add_again(record)
            notes.append(f"made {spec.id}'s worktree again at {record.path} on {record.branch}")
    except (WorktreeError, OSError) as e:
        return Placement(None, notes, f"{spec.id} works in its cwd without a worktree: {e}")
    problem = bootstrap(paths, config, record, notes)
    where = Path(record.path) / record.subdir
    return Placement(where if where.is_dir() else Path(record.path), notes, problem)


def _add_again(record: WorktreeRecord) -> None:
    """Check the kept branch out again where the folder was. A folder deleted by hand
    is still registered to git; only that registration is overridden (-f), never the
    branch being checked out somewhere else (`git worktree prune` would also drop the
    person's own worktrees on an unmounted disk)."""
    listed = git(["worktree", "list", "--porcelain", "-z"], record.repo).stdout
    holder = parse_worktree_list(listed).get(record.branch)
    if holder is not None and holder != record.path:
        raise WorktreeError(
            f"{record.branch} is checked out in {holder}; check out another branch there"
        )
    force = ["-f"] if holder == record.path else []
    git(["worktree", "add", *force, record.path, record.branch], record.repo)


def _create(
    paths: HivePaths,
    config: OfficeConfig,
    spec: AgentSpec,
    top: Path,
    cwd: Path,
    notes: list[str],
) -> WorktreeRecord:
    branch = branch_name(config.office.name, str(paths.home), spec.id)
    head = git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], top, ok=(0, 1))
    if head.returncode:
        raise WorktreeError(f"{top} has no commit yet; commit something and restart {spec.id}")
    commit = _out(head)
    on = git(["symbolic-ref", "-q", "--short", "HEAD"], top, ok=(0, 1))
    base = _out(on) if on.returncode == 0 else None
    if base is None:
        notes.append(
            f"{top} has a detached HEAD ({commit[:10]}); {spec.id}'s worktree starts from "
            f"that commit, and its branch {branch} is yours to merge (there is no base "
            "branch to merge it into)"
        )
    if _out(git(["status", "--porcelain", "--untracked-files=no"], top)):
        notes.append(
            f"{top} has uncommitted changes; {spec.id}'s worktree starts from the last "
            f"commit ({commit[:10]}) without them, and they stay where they are"
        )
    target = paths.worktree(spec.id)
    if target.exists() and any(target.iterdir()):
        raise WorktreeError(
            f"{target} already holds files the office did not put there; move them "
            f"and restart {spec.id}"
        )
    paths.worktrees.mkdir(mode=0o700, parents=True, exist_ok=True)
    known = git(["rev-parse", "--verify", "-q", f"refs/heads/{branch}"], top, ok=(0, 1))
    if known.returncode == 0:
        git(["worktree", "add", str(target), branch], top)
        notes.append(f"{spec.id} works in {target} on its existing branch {branch}")
    else:
        git(["worktree", "add", "-b", branch, str(target), commit], top)
        notes.append(
            f"{spec.id} works in {target} on branch {branch}, from "
            f"{base or 'a detached HEAD'} at {commit[:10]}"
        )
    record = WorktreeRecord(
        agent=spec.id,
        repo=str(top),
        path=str(target),
        branch=branch,
        base_branch=base,
        base_commit=commit,
        subdir=os.path.relpath(cwd.resolve(), top.resolve()) if cwd != top else "",
        created=utc_now_iso(),
    )
    if record.subdir in (".",) or record.subdir.startswith(".."):
        record = msgspec.structs.replace(record, subdir="")
    _write(_record_file(paths, spec.id), record)
    return record


def bootstrap(
    paths: HivePaths, config: OfficeConfig, record: WorktreeRecord, notes: list[str]
) -> str | None:
    """Run office.worktree_setup once in the worktree (a marker says it ran). Its
    failure is returned (and returned again at every start until the person removes
    the marker): the agent still starts."""
    setup = config.office.worktree_setup
    marker = _marker_file(paths, record.agent)
    if not setup:
        return None
    with contextlib.suppress(FileNotFoundError, msgspec.DecodeError):
        ran = msgspec.json.decode(marker.read_bytes(), type=SetupMarker)
        return None if ran.ok else ran.detail
    env = {k: v for k, v in os.environ.items() if k not in _GIT_VARS}
    env.update(HIVE_REPO=record.repo, HIVE_WORKTREE=record.path)
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", setup],
            cwd=record.path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=SETUP_TIMEOUT_S,
            check=False,
        )
        failed = (
            f"exit {done.returncode}: {_tail(done.stderr or done.stdout)}"
            if done.returncode
            else None
        )
    except subprocess.TimeoutExpired:
        failed = f"still running after {SETUP_TIMEOUT_S:g} s, stopped"
    except OSError as e:
        failed = str(e)
    detail = (
        f"worktree_setup failed in {record.path} ({failed}); {record.agent} runs anyway. "
        f"Fix it there, then delete {marker} to have it run at the next start"
        if failed
        else f"worktree_setup ran in {record.path}"
    )
    _write(marker, SetupMarker(ok=failed is None, detail=detail, ts=utc_now_iso()))
    notes.append(detail)
    return detail if failed else None


def _tail(output: bytes) -> str:
    lines = output.decode("utf-8", "replace").strip().splitlines()
    return " / ".join(lines[-3:])[-300:] or "no output"


# --- diffs ------------------------------------------------------------------------------


def diff_base(record: WorktreeRecord) -> str:
    """What the agent's changes are counted from: where its branch left the base branch
    (so work already merged back does not count), or the recorded commit."""
    if record.base_branch is not None:
        found = git(["merge-base", record.base_branch, "HEAD"], record.path, ok=(0, 1))
        if found.returncode == 0 and _out(found):
            return _out(found)
    return record.base_commit


def untracked(folder: str) -> list[str]:
    out = git(["ls-files", "--others", "--exclude-standard", "-z"], folder).stdout
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


def changed_files(record: WorktreeRecord) -> list[FileStat]:
    """Every file the agent changed against its base, committed or not; untracked files
    count as new (read, never added to the index)."""
    base = diff_base(record)
    out = git(["diff", "--numstat", "-z", "--no-renames", "--no-ext-diff", base], record.path)
    stats = parse_numstat(out.stdout)
    for name in untracked(record.path):
        try:
            with open(Path(record.path) / name, "rb") as f:
                head = f.read(UNTRACKED_READ_MAX)
        except OSError:
            continue
        stats.append(untracked_stat(name, head))
    return sorted(stats, key=lambda s: s.path)


def patch(record: WorktreeRecord, only: Iterable[str] | None = None) -> str:
    """The unified diff of the agent's changes (untracked files as new files)."""
    wanted = None if only is None else set(only)
    return _patch(record, diff_base(record), untracked(record.path), wanted)


def review(record: WorktreeRecord) -> tuple[list[FileStat], list[FilePatch]]:
    """The files and hunks the Diff panel shows, from one diff (the counts are the
    hunks'): each git call stats the whole worktree, so fewer calls is most of it."""
    new = untracked(record.path)
    patches = parse_patch(_patch(record, diff_base(record), new, None))
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
    view); an agent whose worktree git cannot read is listed with the reason."""
    found: list[AgentReview] = []
    for spec in config.agents:
        try:
            record = read_record(paths, spec.id)
            if record is None or not Path(record.path).is_dir():
                continue
            files, patches = review(record)
        except WorktreeError as e:
            found.append(AgentReview(spec.id, "", [], [], str(e)))
            continue
        if files:
            found.append(AgentReview(spec.id, record.branch, files, patches))
    return found


def _patch(record: WorktreeRecord, base: str, new: list[str], wanted: set[str] | None) -> str:
    args = ["diff", "--no-color", "--no-ext-diff", "--no-renames", base]
    if wanted is not None:
        args += ["--", *sorted(wanted)]
    parts = [git(args, record.path).stdout.decode("utf-8", "replace")] if wanted != set() else []
    for name in new:
        if wanted is None or name in wanted:
            added = git(
                ["diff", "--no-color", "--no-ext-diff", "--no-index", "--", "/dev/null", name],
                record.path,
                ok=(0, 1),
            )
            parts.append(added.stdout.decode("utf-8", "replace"))
    return "".join(parts)


def uncommitted(folder: str) -> list[str]:
    """Paths with uncommitted work in a worktree (untracked included, ignored not)."""
    out = git(
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


def plan_merge(paths: HivePaths, agent_id: str) -> MergePlan:
    """What merging the agent's branch into its base would do; writes nothing (the
    check is git merge-tree, which touches no worktree or ref)."""
    record = record_for(paths, agent_id)
    if record.base_branch is None:
        raise WorktreeError(
            f"{agent_id}'s worktree was made from a detached HEAD, so there is no base "
            f"branch to merge into; merge {record.branch} yourself with git"
        )
    base_ref = f"refs/heads/{record.base_branch}"
    found = git(["rev-parse", "--verify", "-q", base_ref], record.repo, ok=(0, 1))
    if found.returncode:
        raise WorktreeError(
            f"the base branch {record.base_branch} no longer exists in {record.repo}"
        )
    base_head = _out(found)
    head = _out(git(["rev-parse", "--verify", f"refs/heads/{record.branch}"], record.repo))
    ahead = int(_out(git(["rev-list", "--count", f"{base_head}..{head}"], record.repo)))
    done = git(
        ["merge-tree", "--write-tree", "--name-only", "--no-messages", base_head, head],
        record.repo,
        ok=(0, 1),
    )
    check = parse_merge_tree(done.stdout, done.returncode)
    numstat = git(["diff", "--numstat", "-z", "--no-renames", base_head, check.tree], record.repo)
    files = parse_numstat(numstat.stdout) if check.clean else []
    left = uncommitted(record.path) if Path(record.path).is_dir() else []
    return MergePlan(record, base_head, head, ahead, check, files, left)


def apply_merge(plan: MergePlan) -> str:
    """Merge a clean plan into the base branch: in the folder that has it checked out
    (git merge, which refuses rather than overwrite local changes there), or, checked
    out nowhere, by moving the ref only if it has not moved since the plan."""
    record = plan.record
    base = record.base_branch
    assert base is not None and plan.check.clean
    listed = git(["worktree", "list", "--porcelain", "-z"], record.repo).stdout
    folder = parse_worktree_list(listed).get(base)
    if folder is not None:
        now = _out(git(["rev-parse", "--verify", f"refs/heads/{base}"], folder))
        if now != plan.base_head:
            raise WorktreeError(f"{base} moved while the merge was being checked; run it again")
        git(["merge", "--no-edit", plan.head], folder)
        where = f"in {folder}"
    else:
        ref = f"refs/heads/{base}"
        is_ff = git(
            ["merge-base", "--is-ancestor", plan.base_head, plan.head], record.repo, ok=(0, 1)
        )
        if is_ff.returncode == 0:
            new = plan.head
        else:
            message = f"Merge branch '{record.branch}' into {base}"
            new = _out(
                git(
                    [
                        "commit-tree",
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
        git(
            ["update-ref", "-m", f"hive-office merge {record.agent}", ref, new, plan.base_head],
            record.repo,
        )
        where = "(not checked out anywhere, so only the branch moved)"
    count = f"{plan.ahead} commit{'s' if plan.ahead != 1 else ''}"
    files = f"{len(plan.files)} file{'s' if len(plan.files) != 1 else ''}"
    return f"merged {record.branch} ({count}, {files}) into {base} {where}."


# --- removing ---------------------------------------------------------------------------


def remove(paths: HivePaths, agent_id: str) -> str:
    """Remove the agent's worktree folder; its branch stays. Refused while it holds
    uncommitted work."""
    record = record_for(paths, agent_id)
    if not Path(record.path).is_dir():
        raise WorktreeError(
            f"{agent_id}'s worktree {record.path} is already gone; its branch {record.branch} stays"
        )
    left = uncommitted(record.path)
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        raise WorktreeError(
            f"{agent_id}'s worktree has uncommitted work ({shown}); commit it there (or "
            "move it away) and try again. Nothing was removed"
        )
    git(["worktree", "remove", record.path], record.repo)
    _marker_file(paths, agent_id).unlink(missing_ok=True)
    return f"removed {record.path}; the branch {record.branch} stays."


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

    async def workplace(self, spec: AgentSpec) -> Path | None:
        """Where the agent's CLI starts (None: its roster cwd)."""
        loop = asyncio.get_running_loop()
        placed = await loop.run_in_executor(None, place, self.paths, self.config, spec)
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
        while not stop.is_set():
            news = await loop.run_in_executor(None, self.check_overlaps)
            for (first, second), files in news.items():
                for reader in dict.fromkeys([first, second, self.config.office.manager]):
                    subject, body = overlap_text(first, second, files, reader)
                    notice = router_notice(f"{new_message_id()}-overlap", reader, subject, body)
                    self.post(reader, notice)
                self.log(
                    first, f"told {second} and the manager that both change {', '.join(files)}"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.office.worktree_check_s)

    def check_overlaps(self) -> dict[tuple[str, str], list[str]]:
        """New overlaps by pair, remembered in run/ as told before anyone is told (a
        crash then loses a warning rather than repeating it)."""
        changes: dict[str, list[str]] = {}
        for spec in self.config.agents:
            try:
                record = read_record(self.paths, spec.id)
                if record is None or spec.archived or not Path(record.path).is_dir():
                    continue
                changes[spec.id] = [s.path for s in changed_files(record)]
            except WorktreeError as e:
                # One unreadable worktree does not keep the others from being compared.
                if str(e) not in self._said:
                    self._said.add(str(e))
                    self.log(spec.id, f"its worktree cannot be compared with the others: {e}")
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
