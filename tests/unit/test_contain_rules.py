"""The containment plan (hive_core/desks/contain.py): which Landlock rules a desk gets,
from its folders and the listings of the folders above hidden paths. Pure, except the
last tests, which read a real office layout and a real git worktree."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hive_core.desks import contain
from hive_core.desks.contain import DeskFolders, Entry, Grant, plan
from hive_core.paths import HivePaths

D, F = "dir", "file"


def tree(**folders: list[tuple[str, str]]) -> dict[str, tuple[Entry, ...]]:
    """Listings keyed by folder; `_` in a keyword stands for `/` (root is `root`)."""
    return {
        ("/" if k == "root" else "/" + k.replace("_", "/")): tuple(Entry(n, t) for n, t in v)  # type: ignore[arg-type]
        for k, v in folders.items()
    }


def covers(grants: tuple[Grant, ...], path: str, access: set[str]) -> bool:
    return any(
        g.access in access and (path == g.path or path.startswith(g.path.rstrip("/") + "/"))
        for g in grants
    )


LISTINGS = tree(
    root=[("usr", D), ("etc", D), ("h", D), ("vmlinuz", F)],
    h=[("office", D), (".bashrc", F), ("code", D)],
    h_office=[("hive", D), ("run", D), ("office.toml", F), ("memory.db", F)],
    h_office_hive=[("agents", D), (".git", D), ("board.md", F)],
    h_office_hive_agents=[("jim", D), ("pam", D)],
    h_office_hive_agents_pam=[("inbox", D), ("memory", D), ("memory.md", F)],
)
FOLDERS = DeskFolders(
    agent="jim",
    writable=("/h/code", "/h/office/hive/agents/jim"),
    hidden=(
        "/h/office/hive/agents/pam/memory",
        "/h/office/hive/agents/pam/memory.md",
        "/h/office/hive/.git",
        "/h/office/memory.db",
    ),
    protected=("/h/office",),
)


def test_everything_is_readable_but_the_hidden_paths() -> None:
    grants = plan(FOLDERS, LISTINGS).grants
    read = {"read", "write"}
    for path in ("/usr/bin/ls", "/etc/passwd", "/vmlinuz", "/h/.bashrc", "/h/office/office.toml"):
        assert covers(grants, path, read), path
    for path in ("/h/office/hive/board.md", "/h/office/hive/agents/pam/inbox/m.json"):
        assert covers(grants, path, read), path
    for hidden in FOLDERS.hidden:
        assert not covers(grants, hidden, read), hidden
        assert not covers(grants, hidden + "/x", read), hidden
    # The folders above a hidden path are entered, never granted whole.
    for above in ("/", "/h", "/h/office", "/h/office/hive", "/h/office/hive/agents/pam"):
        assert Grant(above, "read") not in grants, above
    # Every folder can be listed: names are not contents.
    assert Grant("/", "list") in grants


def test_only_the_desks_own_folders_are_writable() -> None:
    grants = plan(FOLDERS, LISTINGS).grants
    for path in ("/h/code/x.py", "/h/office/hive/agents/jim/outbox/d.json"):
        assert covers(grants, path, {"write"}), path
    for path in (
        "/h/office/hive/agents/pam/inbox/x.json",
        "/h/office/hive/board.md",
        "/h/office/run/x",
        "/h/.bashrc",
        "/etc/passwd",
    ):
        assert not covers(grants, path, {"write"}), path


def test_a_folder_that_could_not_be_listed_grants_nothing_below_it() -> None:
    listings = {k: v for k, v in LISTINGS.items() if k != "/h/office/hive/agents"}
    grants = plan(FOLDERS, listings).grants
    assert not covers(grants, "/h/office/hive/agents/pam/inbox/m.json", {"read", "write"})
    assert covers(grants, "/h/office/hive/board.md", {"read"})


def test_shared_tmp_is_writable_only_when_it_holds_nothing_protected() -> None:
    grants = plan(FOLDERS, LISTINGS).grants
    assert Grant("/tmp", "write") in grants and Grant("/dev", "device") in grants
    in_tmp = DeskFolders(
        agent="jim",
        writable=("/tmp/t/code",),
        hidden=("/tmp/t/office/hive/.git",),
        protected=("/tmp/t/office",),
    )
    listings = tree(root=[("tmp", D)], tmp=[("t", D)], tmp_t=[("office", D), ("code", D)])
    listings["/tmp/t/office"] = (Entry("hive", "dir"),)
    listings["/tmp/t/office/hive"] = (Entry(".git", "dir"),)
    grants = plan(in_tmp, listings).grants
    assert Grant("/tmp", "write") not in grants
    assert not covers(grants, "/tmp/t/office/hive/x", {"write"})
    assert covers(grants, "/tmp/t/code/x", {"write"})


def test_a_working_folder_that_holds_the_office_cannot_be_contained() -> None:
    around = DeskFolders(
        agent="jim", writable=("/h",), hidden=FOLDERS.hidden, protected=FOLDERS.protected
    )
    refused = plan(around, LISTINGS)
    assert refused.grants == () and refused.refused is not None
    assert "/h" in refused.refused and "cwd in office.toml" in refused.refused


def test_to_list_names_every_folder_above_a_hidden_path_root_first() -> None:
    assert contain.to_list(["/a/b/c", "/a/d"]) == ["/", "/a", "/a/b"]


def test_rights_fit_the_abi_and_a_file_gets_file_rights_only() -> None:
    assert contain.handled(3) & contain.TRUNCATE and not contain.handled(3) & contain.IOCTL_DEV
    assert contain.handled(7) & contain.IOCTL_DEV
    for access in ("list", "read", "write", "device"):
        for abi in (3, 5, 7):
            on_dir = contain.rights(access, True, abi)  # type: ignore[arg-type]
            on_file = contain.rights(access, False, abi)  # type: ignore[arg-type]
            assert on_dir & ~contain.handled(abi) == 0
            assert on_file & ~contain.FILE_RIGHTS == 0
    assert contain.rights("read", True, 7) & contain.WRITE_FILE == 0
    assert contain.unavailable(0) and contain.unavailable(2) and contain.unavailable(3) is None


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_desk_folders_from_a_real_layout_and_worktree(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(
        repo,
        "-c",
        "user.email=p@e",
        "-c",
        "user.name=P",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
    )
    worktree = paths.worktree("jim")
    git(repo, "worktree", "add", "-q", "-b", "hive/scranton/jim", str(worktree))
    env = {"HOME": str(tmp_path / "user"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    inside = worktree / "sub"
    git_of_desk = (repo, "hive/scranton/jim")
    folders = contain.desk_folders(
        paths, "jim", "claude", worktree, ["jim", "pam"], env, [str(repo), str(inside)], git_of_desk
    )
    real = os.path.realpath
    assert real(worktree) in folders.writable
    assert real(paths.mailbox("jim").root) in folders.writable
    assert real(paths.desk_tmp("jim")) in folders.writable
    assert real(tmp_path / "cfg") in folders.writable
    assert real(tmp_path / "user" / ".claude") in folders.writable
    # git in the worktree writes its own folder, the object store and its branch's folder.
    common = real(repo / ".git")
    assert f"{common}/objects" in folders.writable
    assert f"{common}/worktrees/jim" in folders.writable
    assert f"{common}/refs/heads/hive/scranton" in folders.writable
    assert not any(w == common or w == f"{common}/refs/heads" for w in folders.writable)
    pam = paths.mailbox("pam")
    for hidden in (pam.memory_dir, pam.memory, paths.git_dir, paths.memory_db):
        assert real(hidden) in folders.hidden
    assert real(paths.mailbox("jim").memory_dir) not in folders.hidden
    assert real(paths.home) in folders.protected
    assert real(paths.worktree("pam")) in folders.protected
    # Another desk's working folder is never written (the person's checkout, here);
    # one inside this desk's own is this desk's to write.
    assert real(repo) in folders.protected
    assert real(inside) not in folders.protected
    assert plan(folders, contain.listings(contain.to_list(folders.hidden))).refused is None


def test_claude_is_contained_only_where_it_can_save_its_settings(tmp_path: Path) -> None:
    """Claude Code replaces ~/.claude.json by a rename in $HOME, which no contained desk
    may write: such a desk runs uncontained and is told how to contain it."""
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    problem = contain.cli_problem("claude", {"HOME": str(home)})
    assert problem is not None and "CLAUDE_CONFIG_DIR" in problem
    assert contain.cli_problem("claude", {"HOME": str(home), "CLAUDE_CONFIG_DIR": "/c"}) is None
    assert contain.cli_problem("shell", {"HOME": str(home)}) is None
    # A config dir with .config.json is where Claude Code keeps its settings instead.
    (home / ".claude" / ".config.json").write_text("{}")
    assert contain.cli_problem("claude", {"HOME": str(home)}) is None


def test_a_gemini_desk_writes_the_offices_shared_gemini_sign_in(tmp_path: Path) -> None:
    from hive_core.agents.gemini import gemini_home, shared_login

    paths = HivePaths(tmp_path / "home")
    folders = contain.desk_folders(paths, "pam", "gemini", tmp_path, ["pam"], {"HOME": "/x"})
    assert os.path.realpath(shared_login(paths).parent) in folders.writable
    assert os.path.realpath(gemini_home(paths, "pam")) in folders.writable


def test_a_worktree_whose_git_files_the_agent_rewrote_is_granted_nothing_more(
    tmp_path: Path,
) -> None:
    """The worktree's .git file and HEAD are the agent's to write: pointing them at
    another agent's folder or at the person's branch grants nothing at its next start."""
    paths = HivePaths(tmp_path / "home")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(
        repo,
        "-c",
        "user.email=p@e",
        "-c",
        "user.name=P",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
    )
    worktree = paths.worktree("jim")
    git(repo, "worktree", "add", "-q", "-b", "hive/scranton/jim", str(worktree))
    common = os.path.realpath(repo / ".git")
    own = f"{common}/worktrees/jim"
    (Path(own) / "HEAD").write_text("ref: refs/heads/main\n")
    folders = contain.desk_folders(
        paths, "jim", "shell", worktree, ["jim"], {"HOME": "/x"}, (), (repo, "hive/scranton/jim")
    )
    assert f"{common}/refs/heads/hive/scranton" in folders.writable
    assert f"{common}/refs/heads" not in folders.writable
    pam = paths.mailbox("pam").root
    pam.mkdir(parents=True)
    (worktree / ".git").write_text(f"gitdir: {pam}\n")
    folders = contain.desk_folders(
        paths, "jim", "shell", worktree, ["jim", "pam"], {"HOME": "/x"}, (), (repo, "hive/x/jim")
    )
    assert not any(w.startswith(common) for w in folders.writable), folders.writable
    assert os.path.realpath(pam) not in folders.writable


def test_a_desk_in_a_subfolder_of_its_worktree_works_in_the_whole_worktree(
    tmp_path: Path,
) -> None:
    paths = HivePaths(tmp_path / "home")
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "src" / "x").write_text("x\n")
    git(repo, "add", ".")
    git(repo, "-c", "user.email=p@e", "-c", "user.name=P", "commit", "-q", "-m", "i")
    worktree = paths.worktree("pam")
    git(repo, "worktree", "add", "-q", "-b", "hive/s/pam", str(worktree))
    folders = contain.desk_folders(
        paths,
        "pam",
        "shell",
        worktree / "src",
        ["pam"],
        {"HOME": "/x"},
        (),
        (repo / "src", "hive/s/pam"),
    )
    assert os.path.realpath(worktree) in folders.writable
    assert f"{os.path.realpath(repo / '.git')}/objects" in folders.writable


def test_a_desks_real_paths_are_realpaths_answers(tmp_path: Path) -> None:
    """desk_folders resolves its ~200 paths with one `_RealPaths`, each folder on the
    way once: whatever lies on the way (links to folders and files, a link loop, a
    dangling link, missing folders, a file taken for a folder, `.` and `..`, doubled,
    trailing or leading slashes, a relative path, `~`), its answer is realpath's."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "f").write_text("")
    (tmp_path / "to_b").symlink_to(tmp_path / "a" / "b")
    (tmp_path / "a" / "up").symlink_to("..")
    (tmp_path / "a" / "to_f").symlink_to("f")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone" / "x")
    t = str(tmp_path)
    asked: list[str | Path] = [
        f"{t}/a/b/c", f"{t}/a/b", f"{t}/to_b/c/d", f"{t}/to_b", f"{t}/a/up/a/b/x",
        f"{t}/a/to_f", f"{t}/a/to_f/x", f"{t}/a/f/x", f"{t}/loop1/x", f"{t}/loop2",
        f"{t}/dangling", f"{t}/dangling/y", f"{t}/missing/m/n", f"{t}/a/./b",
        f"{t}/a/../a/b", f"{t}//a//b", f"{t}/a/b/", f"/{t}/a", "/", "relative/x", "~",
        "~/.config", Path(t) / "to_b" / "z",
    ]  # fmt: skip
    real = contain._RealPaths()
    for path in [*asked, *asked]:  # the second time from what the first resolved
        assert real(path) == os.path.realpath(os.path.expanduser(path)), path
