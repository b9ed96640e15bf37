"""Merging an agent's branch back: the plan (checked with `git merge-tree` before
anything is written), applying it, and the text the person reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from hive_core import gitsafe
from hive_core.paths import HivePaths
from hive_core.worktrees.git import LOCAL, Git, NoFolder, WorktreeError, output_of, runner
from hive_core.worktrees.place import record_for
from hive_core.worktrees.plan import (
    FileStat,
    MergeCheck,
    WorktreeRecord,
    parse_merge_tree,
    parse_numstat,
    parse_worktree_list,
)
from hive_core.worktrees.review import uncommitted

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


# A dry run's last line, after the plan (the app asks its question with the plan above).
DRY_RUN_ENDS = "dry run: nothing merged."


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
    base_head = output_of(found)
    head = output_of(run(["rev-parse", "--verify", f"refs/heads/{record.branch}"], record.repo))
    ahead = int(output_of(run(["rev-list", "--count", f"{base_head}..{head}"], record.repo)))
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
        now = output_of(run(["rev-parse", "--verify", f"refs/heads/{base}"], folder))
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
            new = output_of(
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
        echo(DRY_RUN_ENDS)
        return 0
    if not ask(f"Merge into {record.base_branch}?"):
        echo("not merged.")
        return 1
    echo(apply_merge(plan))
    return 0
