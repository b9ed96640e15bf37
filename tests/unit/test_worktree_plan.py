"""The pure part of agents' worktrees: who gets one, branch names, and git's output read
into structs (the numbers here come from real git runs of tests/e2e/test_worktree.py's kind)."""

from __future__ import annotations

import pytest

from hive_core.schema import AgentSpec
from hive_core.worktree_plan import (
    FileStat,
    Overlap,
    branch_name,
    overlap_text,
    overlaps,
    parse_merge_tree,
    parse_numstat,
    parse_patch,
    parse_worktree_list,
    untracked_stat,
    wants_worktree,
)


def test_everyone_but_the_manager_wants_a_worktree_unless_the_roster_says() -> None:
    assert wants_worktree(AgentSpec(id="jim", name="Jim"), "michael")
    assert not wants_worktree(AgentSpec(id="michael", name="M"), "michael")
    assert not wants_worktree(AgentSpec(id="jim", name="Jim", worktree=False), "michael")
    assert wants_worktree(AgentSpec(id="michael", name="M", worktree=True), "michael")


def test_two_offices_on_one_repository_get_different_branches() -> None:
    a = branch_name("Scranton", "/home/u/.hive-office", "jim")
    b = branch_name("Scranton", "/home/u/other-office", "jim")
    assert a != b
    assert a.startswith("hive/scranton-") and a.endswith("/jim")
    # Anything a person names an office still makes a legal ref.
    assert (
        branch_name("Dunder Mifflin: Stamford!", "/h", "pam")
        .split("/")[1]
        .startswith("dunder-mifflin-stamford-")
    )


def test_numstat_with_binary_and_odd_names() -> None:
    out = b"3\t1\ta.txt\x00-\t-\timg.png\x000\t2\tdir/with tab\tname\x00"
    assert parse_numstat(out) == [
        FileStat("a.txt", 3, 1),
        FileStat("img.png", 0, 0, binary=True),
        FileStat("dir/with tab\tname", 0, 2),
    ]
    assert parse_numstat(b"") == []


def test_untracked_files_count_as_new() -> None:
    assert untracked_stat("n", b"x\ny\n") == FileStat("n", 2, 0, untracked=True)
    assert untracked_stat("n", b"x\ny") == FileStat("n", 2, 0, untracked=True)
    assert untracked_stat("e", b"") == FileStat("e", 0, 0, untracked=True)
    assert untracked_stat("b", b"PNG\0\1") == FileStat("b", 0, 0, binary=True, untracked=True)


PATCH = """\
diff --git a/a.txt b/a.txt
index 7898192..422c2b7 100644
--- a/a.txt
+++ b/a.txt
@@ -1 +1,2 @@
 a
+b
@@ -10,2 +11,2 @@ def f():
--- not a header: a removed line
+++ not a header: an added line
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
\\ No newline at end of file
diff --git a/n.bin b/n.bin
new file mode 100644
Binary files /dev/null and b/n.bin differ
"""


def test_a_unified_diff_becomes_files_of_hunks() -> None:
    files = parse_patch(PATCH)
    assert [(f.path, f.binary, len(f.hunks)) for f in files] == [
        ("a.txt", False, 2),
        ("gone.txt", False, 1),
        ("n.bin", True, 0),
    ]
    first, second = files[0].hunks
    assert first.header == "@@ -1 +1,2 @@" and first.lines == [" a", "+b"]
    assert second.lines == ["--- not a header: a removed line", "+++ not a header: an added line"]
    assert files[1].hunks[0].lines == ["-bye", "\\ No newline at end of file"]
    assert parse_patch("") == []


def test_merge_tree_output() -> None:
    clean = parse_merge_tree(b"4b825dc642cb6eb9a060e54bf8d69288fbee4904\n", 0)
    assert clean.clean and clean.conflicts == [] and clean.tree.startswith("4b825dc")
    conflict = parse_merge_tree(b"abc\nb.txt\na.txt\na.txt\n", 1)
    assert not conflict.clean and conflict.conflicts == ["a.txt", "b.txt"]
    with pytest.raises(ValueError):
        parse_merge_tree(b"fatal: bad revision\n", 128)


def test_worktree_list_maps_branches_to_folders() -> None:
    out = (
        b"worktree /r\x00HEAD 1\x00branch refs/heads/main\x00\x00"
        b"worktree /h/wt/jim\x00HEAD 2\x00branch refs/heads/hive/x/jim\x00\x00"
        b"worktree /d\x00HEAD 3\x00detached\x00\x00"
    )
    assert parse_worktree_list(out) == {"main": "/r", "hive/x/jim": "/h/wt/jim"}


def test_overlaps_pair_every_two_agents_on_a_file_once() -> None:
    found = overlaps({"pam": ["a", "b"], "jim": ["a", "c"], "dwight": ["a", "b"]})
    assert found == [
        Overlap("a", "dwight", "jim"),
        Overlap("a", "dwight", "pam"),
        Overlap("a", "jim", "pam"),
        Overlap("b", "dwight", "pam"),
    ]
    assert overlaps({"jim": ["a"], "pam": ["b"]}) == []


def test_each_reader_is_told_the_file_and_the_other_agent() -> None:
    subject, body = overlap_text("jim", "pam", ["a.txt"], "jim")
    assert subject == "pam is also changing a.txt" and "a.txt" in body
    subject, _ = overlap_text("jim", "pam", ["a.txt"], "pam")
    assert subject == "jim is also changing a.txt"
    subject, body = overlap_text("jim", "pam", ["a.txt", "b.txt"], "michael")
    assert subject == "jim and pam both change 2 files" and "a.txt, b.txt" in body
