"""Agents' git worktrees with real git and real agents: each starts in its own worktree
on its own branch, `hive-office diff` shows its work, `merge` brings it into the base
(or, on a conflict, changes nothing and lists the files), two agents on one file are
warned once, worktree_setup runs once and a failing one leaves the agent running."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hive_core.config import load_office
from hive_core.hive import init_office
from hive_core.mail import message_names
from hive_core.paths import HivePaths
from hive_core.schema import Draft
from hive_core.worktrees import changed_files, place, read_record, review
from hive_core.worktrees.plan import branch_name
from tests.support import wait_for

BIN = Path(sys.executable).parent


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "src").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "person@example.com")
    git(repo, "config", "user.name", "Person")
    (repo / "a.txt").write_text("a\n")
    (repo / "b.txt").write_text("b\n")
    (repo / "src" / "main.py").write_text("print('hi')\n")
    (repo / ".gitignore").write_text(".env\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init")
    (repo / ".env").write_text("SECRET=1\n")
    return repo


def roster(root: Path, repo: Path, setup: str, extra: str = "") -> str:
    # bash's readline takes the bracketed paste `hive-office type` sends.
    shell = 'provider = "shell"\ncommand = ["bash", "--norc", "--noprofile", "-i"]\n'
    # contain = false: the desks write what they saw into the test's folder, which a
    # contained desk may not (tests/e2e/test_contained_desks.py has the walls).
    return (
        f'[office]\nmanager = "michael"\ncontain = false\n'
        f"worktree_setup = {json.dumps(setup)}\n{extra}\n"
        f'[[agents]]\nid = "michael"\nname = "Michael"\n{shell}cwd = "{repo}"\n\n'
        f'[[agents]]\nid = "jim"\nname = "Jim"\n{shell}cwd = "{repo}"\n\n'
        f'[[agents]]\nid = "pam"\nname = "Pam"\n{shell}cwd = "{repo / "src"}"\n\n'
        f'[[agents]]\nid = "dwight"\nname = "Dwight"\n{shell}cwd = "{root / "plain"}"\n'
    )


COUNTING_SETUP = 'echo "$PWD" >> "$HIVE_REPO/../setup-runs"; cp "$HIVE_REPO/.env" .env'


class Office:
    def __init__(self, root: Path, setup: str = COUNTING_SETUP, extra: str = "") -> None:
        self.root = root
        self.repo = make_repo(root)
        (root / "plain").mkdir()
        self.paths = HivePaths(root / "home")
        self.paths.home.mkdir()
        self.paths.office_toml.write_text(roster(root, self.repo, setup, extra))
        init_office(self.paths)
        self.config = load_office(self.paths.office_toml)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        self.proc: subprocess.Popen[bytes] | None = None

    def serve(self) -> None:
        self.proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(self.paths.home)],
            env=self.env,
            stdout=(self.root / "serve.out").open("a"),
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        self.proc = None

    def run(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        cmd = [str(BIN / args[0]), *args[1:], "--home", str(self.paths.home)]
        return subprocess.run(
            cmd, env=self.env, input=stdin, capture_output=True, text=True, timeout=120
        )

    def log(self, agent: str) -> list[str]:
        if not self.paths.log.exists():
            return []
        lines = [json.loads(line) for line in self.paths.log.read_text().splitlines() if line]
        return [e["detail"] for e in lines if e.get("agent") == agent]

    def pid(self, agent: str, after: int = 0) -> int | None:
        starts = [d for d in self.log(agent) if d.startswith("started ") and "(pid " in d]
        if len(starts) <= after:
            return None
        return int(starts[-1].split("(pid ")[1].split(")")[0].split(",")[0])

    def type(self, agent: str, text: str) -> None:
        done = self.run("hive-office", "type", agent, text)
        assert done.returncode == 0, done.stderr

    def worktree(self, agent: str) -> Path:
        return self.paths.worktree(agent)

    def inbox(self, agent: str, about: str) -> list[dict[str, Any]]:
        found = []
        inbox = self.paths.mailbox(agent).inbox
        # message_names: never a file the router is still writing.
        for name in message_names(inbox):
            message = json.loads((inbox / name).read_text())
            if about in message["subject"]:
                found.append(message)
        return found


@pytest.fixture
def root(short_tmp: Path) -> Path:
    # Outside any repository: a tmp_path inside one would give every agent a worktree of it.
    return short_tmp


def cwd_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/cwd")


def test_agents_start_in_their_own_worktrees_and_are_warned_once_of_a_shared_file(
    root: Path,
) -> None:
    office = Office(root, extra="worktree_check_s = 0.2\n")
    office.serve()
    try:
        pids = {
            a: wait_for(partial(office.pid, a), f"{a} started")
            for a in ("michael", "jim", "pam", "dwight")
        }
        # Each in its own worktree (pam in the same subfolder it was given), on its branch;
        # the manager in the person's checkout; dwight, outside any repository, where he was.
        assert cwd_of(pids["jim"]) == str(office.worktree("jim"))
        assert cwd_of(pids["pam"]) == str(office.worktree("pam") / "src")
        assert cwd_of(pids["michael"]) == str(office.repo)
        assert cwd_of(pids["dwight"]) == str(root / "plain")
        for agent in ("jim", "pam"):
            branch = branch_name("Scranton", str(office.paths.home), agent)
            assert git(office.worktree(agent), "symbolic-ref", "--short", "HEAD") == branch
            assert (office.worktree(agent) / ".env").read_text() == "SECRET=1\n"
        said = [d for d in office.log("dwight") if "not in a git repository" in d]
        assert len(said) == 1
        assert len((root / "setup-runs").read_text().splitlines()) == 2

        # Both change a.txt (committed or not): one warning each, and one for the manager.
        office.type("jim", "echo jim > a.txt")
        office.type("pam", "echo pam > ../a.txt && git commit -qam pam")
        for agent in ("jim", "pam", "michael"):
            wait_for(partial(office.inbox, agent, "a.txt"), f"{agent} warned of a.txt")
        # A later overlap (b.txt) is found by later checks; a.txt is not told again.
        office.type("jim", "echo jim > b.txt")
        office.type("pam", "echo pam > ../b.txt")
        for agent in ("jim", "pam", "michael"):
            wait_for(partial(office.inbox, agent, "b.txt"), f"{agent} warned of b.txt")
        assert [len(office.inbox(a, "a.txt")) for a in ("jim", "pam", "michael")] == [1, 1, 1]
        assert "pam" in office.inbox("jim", "a.txt")[0]["subject"]
        assert "jim" in office.inbox("pam", "a.txt")[0]["subject"]

        # The manager may merge through `hive`; another agent may not.
        office.type(
            "jim",
            f"git commit -qam jim; hive merge pam > {root}/jim.out 2>&1; echo exit-$? >> {root}/jim.out",
        )
        out = wait_for(lambda: _finished(root / "jim.out"), "jim's refusal")
        assert "only the manager (michael) merges" in out and "exit-1" in out
        office.type("michael", f"hive merge pam > {root}/m.out 2>&1; echo exit-$? >> {root}/m.out")
        out = wait_for(lambda: _finished(root / "m.out"), "michael's merge")
        assert "merged hive/" in out and "exit-0" in out
        assert (office.repo / "a.txt").read_text() == "pam\n"
        # jim's branch now conflicts with what pam merged: nothing changes.
        head = git(office.repo, "rev-parse", "HEAD")
        office.type("michael", f"hive merge jim > {root}/c.out 2>&1; echo exit-$? >> {root}/c.out")
        out = wait_for(lambda: _finished(root / "c.out"), "the conflict")
        assert (
            "exit-1" in out
            and "does not merge cleanly" in out
            and "  a.txt" in out
            and "  b.txt" not in out
        )
        assert git(office.repo, "rev-parse", "HEAD") == head
        assert (office.repo / "a.txt").read_text() == "pam\n"

        # Restarted, nobody is set up again.
        office.stop()
        office.serve()
        wait_for(lambda: office.pid("jim", after=1), "jim started again")
        assert len((root / "setup-runs").read_text().splitlines()) == 2
    finally:
        office.stop()


def _finished(path: Path) -> str:
    """What a command typed into a pane wrote, once its `exit-N` line is there."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ""
    return text if "exit-" in text else ""


def test_a_failing_setup_leaves_the_agent_running_with_the_error_shown(root: Path) -> None:
    office = Office(root, setup="echo no-npm-here >&2; exit 3")
    office.serve()
    try:
        pid = wait_for(lambda: office.pid("jim"), "jim started")
        assert cwd_of(pid) == str(office.worktree("jim"))

        def problem() -> str | None:
            try:
                health = json.loads(office.paths.health_file.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                return None
            found = [p for p in health["problems"] if p["component"] == "worktree:jim"]
            return found[0]["detail"] if found else None

        detail = wait_for(problem, "the setup failure in health")
        assert "exit 3: no-npm-here" in detail and "jim runs anyway" in detail
        assert any("worktree_setup failed" in d for d in office.log("jim"))
        os.kill(pid, 0)  # still running
        # Archiving stops the agent and keeps its branch and worktree.
        archived = office.run("hive-office", "archive", "jim")
        assert archived.returncode == 0, archived.stderr
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), "jim stopped")
        branch = branch_name("Scranton", str(office.paths.home), "jim")
        assert git(office.repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}")
        assert (office.worktree("jim") / "a.txt").exists()
    finally:
        office.stop()


def placed(office: Office, agent: str) -> Path:
    spec = next(a for a in office.config.agents if a.id == agent)
    where = place(office.paths, office.config, spec)
    assert where.problem is None, where.problem
    assert where.cwd is not None
    return office.worktree(agent)


def test_diff_shows_committed_uncommitted_and_untracked_work(root: Path) -> None:
    office = Office(root)
    jim = placed(office, "jim")
    (jim / "a.txt").write_text("a\njim\n")
    (jim / "new.py").write_text("x = 1\ny = 2\n")
    git(jim, "add", "new.py")
    git(jim, "commit", "-qm", "new")
    (jim / "b.txt").write_text("")  # uncommitted: b's one line removed
    (jim / "scratch.txt").write_text("1\n2\n3\n")  # untracked
    stat = office.run("hive-office", "diff", "jim", "--stat")
    assert stat.returncode == 0, stat.stderr
    lines = [" ".join(line.split()) for line in stat.stdout.splitlines()]
    assert lines == [
        "a.txt | +1 -0",
        "b.txt | +0 -1",
        "new.py | +2 -0",
        "scratch.txt | +3 -0 (untracked)",
        "4 files changed, +6 -1",
    ]
    full = office.run("hive-office", "diff", "jim").stdout
    assert "+jim" in full and "+y = 2" in full and "-b" in full
    assert "diff --git a/scratch.txt b/scratch.txt" in full and "+3" in full
    # The Diff panel's one-diff view counts what numstat counts.
    record = read_record(office.paths, "jim")
    assert record is not None
    files, patches = review(record)
    assert sorted(files, key=lambda f: f.path) == changed_files(record)
    assert [p.path for p in patches if p.untracked] == ["scratch.txt"]
    # Reading never wrote to the index: scratch.txt is still untracked.
    assert "?? scratch.txt" in git(jim, "status", "--porcelain")
    refused = office.run("hive-office", "diff", "michael")
    assert refused.returncode == 1 and "michael has no worktree" in refused.stderr


def test_merge_asks_then_merges_commits_only_and_a_conflict_changes_nothing(root: Path) -> None:
    office = Office(root)
    jim, pam = placed(office, "jim"), placed(office, "pam")
    (jim / "a.txt").write_text("jim\n")
    (jim / "j.txt").write_text("j\n")
    git(jim, "add", ".")
    git(jim, "commit", "-qm", "jim's work")
    (jim / "wip.txt").write_text("not yet\n")
    (pam / "a.txt").write_text("pam\n")
    git(pam, "commit", "-qam", "pam's work")
    # The person has work of their own in the checkout; no merge may lose it.
    (office.repo / "b.txt").write_text("the person's edit\n")
    before = git(office.repo, "rev-parse", "HEAD")

    declined = office.run("hive-office", "merge", "jim", stdin="n\n")
    assert declined.returncode == 1 and "not merged." in declined.stdout
    assert "a.txt" in declined.stdout and "j.txt" in declined.stdout
    assert "Not merged: 1 uncommitted file" in declined.stdout and "wip.txt" in declined.stdout
    assert git(office.repo, "rev-parse", "HEAD") == before

    merged = office.run("hive-office", "merge", "jim", "--yes")
    assert merged.returncode == 0, merged.stderr
    assert (office.repo / "j.txt").read_text() == "j\n"
    assert (office.repo / "a.txt").read_text() == "jim\n"
    assert not (office.repo / "wip.txt").exists()
    assert (office.repo / "b.txt").read_text() == "the person's edit\n"
    assert git(office.repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    # Merged work no longer counts as jim's change.
    assert office.run("hive-office", "diff", "jim", "--stat").stdout.split() == [
        "wip.txt",
        "|",
        "+1",
        "-0",
        "(untracked)",
        "1",
        "file",
        "changed,",
        "+1",
        "-0",
    ]

    head = git(office.repo, "rev-parse", "HEAD")
    status = git(office.repo, "status", "--porcelain")
    conflict = office.run("hive-office", "merge", "pam", "--yes")
    assert conflict.returncode == 1
    assert "does not merge cleanly" in conflict.stdout and "  a.txt" in conflict.stdout
    assert git(office.repo, "rev-parse", "HEAD") == head
    assert git(office.repo, "status", "--porcelain") == status
    assert not (office.repo / ".git" / "MERGE_HEAD").exists()
    # The manager is told (queued from the person's outbox: no office runs here).
    drafts = [
        msgspec.json.decode(p.read_bytes(), type=Draft)
        for p in office.paths.mailbox("human").outbox.glob("*.json")
    ]
    assert [(d.to, "a.txt" in d.body) for d in drafts] == [("michael", True)]


def test_removing_a_worktree_refuses_uncommitted_work_and_keeps_the_branch(root: Path) -> None:
    office = Office(root)
    jim = placed(office, "jim")
    (jim / "notes.txt").write_text("mine\n")
    refused = office.run("hive-office", "worktree", "remove", "jim")
    assert refused.returncode == 1 and "uncommitted work (notes.txt)" in refused.stderr
    assert (jim / "notes.txt").read_text() == "mine\n"
    git(jim, "add", "notes.txt")
    git(jim, "commit", "-qm", "notes")
    removed = office.run("hive-office", "worktree", "remove", "jim")
    assert removed.returncode == 0, removed.stderr
    assert not jim.exists()
    record = read_record(office.paths, "jim")
    assert record is not None
    assert git(office.repo, "log", "-1", "--format=%s", record.branch) == "notes"
    # The next start makes it again, on the same branch.
    again = placed(office, "jim")
    assert (again / "notes.txt").read_text() == "mine\n"
    # A folder deleted by hand (still registered to git) is made again too.
    shutil.rmtree(again)
    assert (placed(office, "jim") / "notes.txt").read_text() == "mine\n"


def test_a_detached_or_dirty_base_is_said_never_discarded(root: Path) -> None:
    office = Office(root)
    (office.repo / "a.txt").write_text("the person's edit\n")
    git(office.repo, "checkout", "-q", "--detach")
    spec = next(a for a in office.config.agents if a.id == "jim")
    where = place(office.paths, office.config, spec)
    notes = " ".join(where.notes)
    assert "detached HEAD" in notes and "uncommitted changes" in notes
    assert (office.repo / "a.txt").read_text() == "the person's edit\n"
    assert (office.worktree("jim") / "a.txt").read_text() == "a\n"
    refused = office.run("hive-office", "merge", "jim", "--yes")
    assert refused.returncode == 1 and "detached HEAD" in refused.stderr
    # Back on a branch, a new agent's worktree records it and merges (the allowed path).
    git(office.repo, "checkout", "-q", "main")
    pam = placed(office, "pam")
    (pam / "p.txt").write_text("p\n")
    git(pam, "add", "p.txt")
    git(pam, "commit", "-qm", "p")
    assert office.run("hive-office", "merge", "pam", "--yes").returncode == 0
    assert (office.repo / "p.txt").exists()


def test_a_base_checked_out_nowhere_only_has_its_branch_moved(root: Path) -> None:
    office = Office(root)
    jim, pam = placed(office, "jim"), placed(office, "pam")
    git(office.repo, "checkout", "-q", "-b", "other")
    for worktree, name in ((jim, "j.txt"), (pam, "p.txt")):
        (worktree / name).write_text(f"{name}\n")
        git(worktree, "add", name)
        git(worktree, "commit", "-qm", name)
    # jim's is a fast-forward, pam's then needs a merge commit; neither touches a folder.
    for agent in ("jim", "pam"):
        done = office.run("hive-office", "merge", agent, "--yes")
        assert done.returncode == 0, done.stderr
        assert "only the branch moved" in done.stdout
    assert git(office.repo, "show", "main:j.txt") == "j.txt"
    assert git(office.repo, "show", "main:p.txt") == "p.txt"
    assert len(git(office.repo, "rev-list", "--parents", "-n1", "main").split()) == 3
    assert git(office.repo, "rev-parse", "--abbrev-ref", "HEAD") == "other"
    assert not (office.repo / "j.txt").exists() and not (office.repo / "p.txt").exists()
