"""What an agent changed in its worktree: the diff against its base, file by file,
and the office-wide review the app shows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import msgspec

from hive_core import gitsafe
from hive_core.paths import HivePaths
from hive_core.schema import OfficeConfig
from hive_core.worktrees.git import (
    LOCAL,
    Git,
    NoFolder,
    WorktreeError,
    given_runner,
    output_of,
    read_new_file,
    runner,
)
from hive_core.worktrees.place import read_record
from hive_core.worktrees.plan import (
    FilePatch,
    FileStat,
    WorktreeRecord,
    parse_numstat,
    parse_patch,
    stat_of,
    untracked_stat,
)

# --- diffs ------------------------------------------------------------------------------
# Each takes the worktree's runner (`run`); without one, a local worktree's.


def diff_base(record: WorktreeRecord, *, run: Git | None = None) -> str:
    """What the agent's changes are counted from: where its branch left the base branch
    (so work already merged back does not count), or the recorded commit."""
    run = given_runner(record, run)
    if record.base_branch is not None:
        found = run(["merge-base", record.base_branch, "HEAD"], record.path, ok=(0, 1))
        if found.returncode == 0 and output_of(found):
            return output_of(found)
    return record.base_commit


def untracked(folder: str, *, run: Git = LOCAL) -> list[str]:
    out = run(["ls-files", "--others", "--exclude-standard", "-z"], folder).stdout
    return [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]


def changed_files(record: WorktreeRecord, *, run: Git | None = None) -> list[FileStat]:
    """Every file the agent changed against its base, committed or not; untracked files
    count as new (read, never added to the index)."""
    run = given_runner(record, run)
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
        found = read_new_file(record.path, name)
        if found is not None:
            stats.append(untracked_stat(name, found[0]))
    return sorted(stats, key=lambda s: s.path)


def patch(
    record: WorktreeRecord, only: Iterable[str] | None = None, *, run: Git | None = None
) -> str:
    """The unified diff of the agent's changes (untracked files as new files)."""
    run = given_runner(record, run)
    wanted = None if only is None else set(only)
    return _patch(record, run, diff_base(record, run=run), untracked(record.path, run=run), wanted)


def review(
    record: WorktreeRecord, *, run: Git | None = None
) -> tuple[list[FileStat], list[FilePatch]]:
    """The files and hunks the Diff panel shows, from one diff (the counts are the
    hunks'): each git call stats the whole worktree, so fewer calls is most of it."""
    run = given_runner(record, run)
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
