"""The pure part of agents' worktrees: who gets one, branch names, and git's output read
into structs (the numbers here come from real git runs of tests/e2e/test_worktree.py's kind)."""

from __future__ import annotations

import shlex

import msgspec
import pytest

from hive_core import gitsafe
from hive_core.remote.plan import rdir_relative, remote_worktree_relative
from hive_core.schema import AgentSpec
from hive_core.worktrees.plan import (
    NO_FOLDER_EXIT,
    FileStat,
    Overlap,
    WorktreeRecord,
    branch_name,
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
    unreachable_text,
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


# --- a remote desk's worktree ----------------------------------------------------------


def test_a_remote_worktree_sits_beside_the_desks_folders_under_the_office_key() -> None:
    assert remote_worktree_relative("ab12cd34", "pam") == ".hive-remote/ab12cd34/worktrees/pam"
    # Not inside any desk's private folder (which prepare empties of sockets and secrets).
    assert not remote_worktree_relative("k", "pam").startswith(rdir_relative("k", "pam") + "/")
    # An agent named "worktrees" cannot take the worktrees' folder for its own.
    assert not remote_worktree_relative("k", "pam").startswith(rdir_relative("k", "worktrees"))


def test_a_remote_git_command_cds_quotes_every_word_and_says_a_missing_folder() -> None:
    script = remote_git_script("/srv/my repo", ["commit", "-m", "it's $HOME; rm -rf /"])
    cd, rest = script.split(" || ", 1)
    assert shlex.split(cd) == ["cd", "/srv/my repo"]
    assert rest.startswith(f"exit {NO_FOLDER_EXIT}; unset GIT_DIR GIT_WORK_TREE ")
    command = rest.split("; exec ", 1)[1]
    assert shlex.split(command) == gitsafe.argv(["commit", "-m", "it's $HOME; rm -rf /"])
    # `~/` is the host's home, expanded there.
    assert remote_git_script("~/src/app", ["status"]).startswith('cd "$HOME"/src/app || ')


def test_new_files_share_one_connection_and_only_files_and_links_reach_git() -> None:
    script = remote_new_files_script("/r", ["a b", "c"])
    steps = script.split('HIVE_EOF\nexport GIT_CONFIG_COUNT="$n"; ', 1)[1].split("; if ")
    assert len(steps) == 2
    assert steps[0].startswith("if [ -h 'a b' ] || [ -f 'a b' ]; then git ")
    assert "case $c in 0|1) ;; *) exit $c;; esac; fi" in steps[1]


def test_setup_and_home_scripts_for_the_host() -> None:
    setup = remote_setup_script("/w/pam", "cp $HIVE_REPO/.env .", {"HIVE_REPO": "/r x"})
    assert setup.endswith("exec env 'HIVE_REPO=/r x' /bin/sh -c 'cp $HIVE_REPO/.env .' </dev/null")
    home = remote_home_script("ab12cd34")
    assert home.startswith('umask 077 && mkdir -p "$HOME"/.hive-remote/ab12cd34/worktrees && ')
    assert home.endswith('"$HOME"')


def test_the_repository_top_and_the_folder_in_it() -> None:
    assert parse_top_prefix(b"/srv/repo\nsrc/app/\n") == ("/srv/repo", "src/app")
    assert parse_top_prefix(b"/srv/repo\n\n") == ("/srv/repo", "")
    with pytest.raises(ValueError):
        parse_top_prefix(b"")


def test_an_unreachable_host_is_one_sentence() -> None:
    text = unreachable_text("box", "ssh: connect to host box port 22: Connection refused.")
    assert text == (
        "cannot reach box: ssh: connect to host box port 22: Connection refused; "
        "the office retries when the desk reconnects"
    )


def test_records_made_before_remote_desks_read_as_local() -> None:
    old = b'{"agent":"jim","repo":"/r","path":"/w","branch":"b","base_branch":"main","base_commit":"c"}'
    record = msgspec.json.decode(old, type=WorktreeRecord)
    assert record.host is None and record.ssh_args == []
    remote = msgspec.structs.replace(record, host="box", ssh_args=["-p", "2222"])
    assert msgspec.json.decode(msgspec.json.encode(remote), type=WorktreeRecord) == remote
