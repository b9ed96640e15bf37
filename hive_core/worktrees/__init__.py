"""Agents' git worktrees: create one per agent, bootstrap it, diff it against its base,
merge it back, remove it, and warn when two branches touch a file.

This is the person's repository, not the hive: everything goes through the `git`
command (pygit2 is the committer's, for the hive only), and nothing here discards
work. A remote desk's worktree lives on its host, made from its roster cwd's repository
there: the same git commands run there over ssh (RemoteGit), through the desk's own
connection when it is up. A merge that would conflict is found with
`git merge-tree --write-tree` before anything is written; a worktree with uncommitted
work is never removed.

- plan.py: the decisions and the reading of git's output (pure);
- git.py: running git, here or on a desk's host, and the children it starts;
- place.py: an agent's worktree record, and creating and bootstrapping the worktree;
- review.py: what an agent changed (the diff against its base);
- merge.py: merging a branch back;
- keeper.py: removing a worktree, and the office's loop over them all.

What the rest of the program uses is named here.
"""

from hive_core.worktrees.git import (
    LOCAL,
    NoFolder,
    RemoteGit,
    WorktreeError,
    runner,
    running_children,
)
from hive_core.worktrees.keeper import WorktreeKeeper, read_overlaps, remove
from hive_core.worktrees.merge import DRY_RUN_ENDS, plan_merge, render_plan, render_stat, run_merge
from hive_core.worktrees.place import place, read_record, record_for
from hive_core.worktrees.review import AgentReview, changed_files, office_review, patch, review

__all__ = [
    "DRY_RUN_ENDS",
    "LOCAL",
    "AgentReview",
    "NoFolder",
    "RemoteGit",
    "WorktreeError",
    "WorktreeKeeper",
    "changed_files",
    "office_review",
    "patch",
    "place",
    "plan_merge",
    "read_overlaps",
    "read_record",
    "record_for",
    "remove",
    "render_plan",
    "render_stat",
    "review",
    "run_merge",
    "runner",
    "running_children",
]
