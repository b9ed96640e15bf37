"""A damaged hive repository: each case detected, reported, repaired or refused with a
sentence, never a silent new history. Real pygit2 repos, real damage, real `git` checks."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

import hive_core.committer as committer_module
from hive_core.committer import Committer, RepoDamaged, commit_all, ensure_repo
from hive_core.hive import GITIGNORE
from tests.e2e.test_serve import run
from tests.effects.test_committer import git, messages, run_with, tracked, write
from tests.serve_support import ServedOffice
from tests.support import until, wait_for


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "hive"
    path.mkdir()
    ensure_repo(path)
    write(path, ".gitignore", GITIGNORE)
    write(path, "board.md", "# Board\n")
    assert commit_all(path, "office: initialised")
    write(path, "board.md", "# Board\nsecond\n")
    assert commit_all(path, "board: second")
    return path


def roots(repo: Path) -> list[str]:
    """Commits without a parent, in every object the repository holds."""
    objects = git(repo, "cat-file", "--batch-all-objects", "--batch-check").splitlines()
    commits = [line.split()[0] for line in objects if line.split()[1] == "commit"]
    return [c for c in commits if "parent " not in git(repo, "cat-file", "-p", c)]


def command_in(sentence: str) -> list[str]:
    """The first `git -C ... ` command a refusal suggests, as argv."""
    match = re.search(r"`(git -C [^`]+)`", sentence)
    assert match, sentence
    return match.group(1).split()[3:]


class Health:
    """What the office's health board would be told."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.cleared = 0

    def wire(self, committer: Committer) -> Committer:
        committer.on_problem = self.problems.append
        committer.on_ok = self.ok
        return committer

    def ok(self) -> None:
        self.cleared += 1


# --- a missing branch -------------------------------------------------------------


def test_a_deleted_branch_is_refused_not_restarted_as_a_new_root(repo: Path) -> None:
    committer = Committer(repo)
    tip = git(repo, "rev-parse", "HEAD").strip()
    (repo / ".git" / "refs" / "heads" / "main").unlink()
    committer.touch(write(repo, "tasks.json", "{}"))
    with pytest.raises(RepoDamaged) as refused:
        committer.commit_now()
    sentence = str(refused.value)
    assert "refs/heads/main" in sentence and "is gone" in sentence and tip[:12] in sentence
    assert committer.pending, "the change waits for the repair"
    assert len(roots(repo)) == 1
    # The suggested repair works, and the pending change is committed on the old history.
    git(repo, *command_in(sentence))
    assert committer.commit_now() is not None
    assert messages(repo) == ["office: initialised", "board: second", "tasks.json"]
    git(repo, "fsck", "--strict")


def test_a_branch_deleted_while_the_office_was_down_is_found_by_its_reflog(repo: Path) -> None:
    tip = git(repo, "rev-parse", "HEAD").strip()
    (repo / ".git" / "refs" / "heads" / "main").unlink()
    write(repo, "tasks.json", "{}")
    with pytest.raises(RepoDamaged, match=tip[:12]):
        commit_all(repo, "init re-run")
    committer = Committer(repo)
    with pytest.raises(RepoDamaged, match="is gone"):
        committer.commit_now(full=True)
    assert len(roots(repo)) == 1


def test_a_new_history_is_made_only_when_the_person_asks_for_one(repo: Path) -> None:
    (repo / ".git" / "refs" / "heads" / "main").unlink()
    with pytest.raises(RepoDamaged) as refused:
        Committer(repo).commit_now(full=True)
    # The second suggestion: the person deletes the branch with git, then restarts.
    start_over = re.findall(r"`(git -C [^`]+)`", str(refused.value))[1]
    assert "update-ref -d" in start_over
    git(repo, *start_over.split()[3:])
    write(repo, "tasks.json", "{}")
    assert Committer(repo).commit_now(full=True) is not None
    assert len(roots(repo)) == 2


# --- a moved branch -----------------------------------------------------------------


def test_a_branch_moved_elsewhere_is_refused_one_moved_forward_is_followed(repo: Path) -> None:
    committer = Committer(repo)
    # Someone commits on top with git: the office goes on from there.
    write(repo, "notes.md", "by hand")
    git(repo, "add", "notes.md")
    git(repo, "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qm", "by hand")
    committer.touch(write(repo, "tasks.json", "{}"))
    assert committer.commit_now() is not None
    assert messages(repo)[-2:] == ["by hand", "tasks.json"]
    # Someone points the branch back at the first commit: refused, with both ways out.
    ours = git(repo, "rev-parse", "HEAD").strip()
    first = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    git(repo, "update-ref", "refs/heads/main", first)
    committer.touch(write(repo, "tasks.json", '{"v": 2}'))
    with pytest.raises(RepoDamaged) as refused:
        committer.commit_now()
    assert f"moved from {ours[:12]} to {first[:12]}" in str(refused.value)
    assert "restart the office" in str(refused.value)
    git(repo, *command_in(str(refused.value)))
    assert committer.commit_now() is not None
    assert git(repo, "show", "HEAD:tasks.json") == '{"v": 2}'


# --- a garbage index ----------------------------------------------------------------


def test_a_garbage_index_is_rebuilt_from_head(repo: Path) -> None:
    index = repo / ".git" / "index"
    index.write_bytes(os.urandom(512))
    committer = Committer(repo)
    assert git(repo, "status", "--porcelain") == ""
    committer.touch(write(repo, "tasks.json", "{}"))
    assert committer.commit_now() is not None
    # Garbage again while the office runs: the next commit rebuilds it and stages all.
    index.write_bytes(b"DIRC" + os.urandom(200))
    write(repo, "agents/jim/memory.md", "nobody touched this")
    committer.touch(write(repo, "board.md", "# Board\nthird\n"))
    assert committer.commit_now() is not None
    assert {"tasks.json", "agents/jim/memory.md", "board.md"} <= tracked(repo)
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    git(repo, "fsck", "--strict")


# --- a missing commit ---------------------------------------------------------------


def remove_object(repo: Path, oid: str) -> Path:
    """Move a loose object out of the repository; returns where it went."""
    loose = repo / ".git" / "objects" / oid[:2] / oid[2:]
    kept = repo.parent / f"kept-{oid}"
    os.rename(loose, kept)
    return kept


def test_a_missing_head_commit_is_reported_once_while_retries_back_off(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Short backoffs so several retries happen in the test's time.
    monkeypatch.setattr(committer_module, "BACKOFF_MAX", 0.05)
    monkeypatch.setattr(committer_module, "FAILING_BACKOFF_MAX", 0.4)
    health = Health()
    attempts: list[int] = []

    class Counting(Committer):
        def commit_now(self, *, full: bool = False) -> str | None:
            attempts.append(1)
            return super().commit_now(full=full)

    committer = health.wire(Counting(repo, interval=0.05))
    tip = git(repo, "rev-parse", "HEAD").strip()
    kept = remove_object(repo, tip)

    async def damaged_then_repaired() -> None:
        committer.touch(write(repo, "tasks.json", "{}"))
        await until(None, lambda: len(attempts) >= 5, "five commit attempts")
        assert len(health.problems) == 1, health.problems
        assert f"last commit {tip[:12]}" in health.problems[0]
        assert "is missing" in health.problems[0]
        assert health.cleared == 0
        os.rename(kept, repo / ".git" / "objects" / tip[:2] / tip[2:])
        await until(None, lambda: health.cleared == 1, "the health report cleared")

    run_with(committer, damaged_then_repaired)
    assert messages(repo)[-1] == "tasks.json"
    assert len(health.problems) == 1
    assert len(roots(repo)) == 1


# --- through a real office ----------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    run("hive-office", "init", home=home)
    return home


def doctor(home: Path) -> str:
    result = run("hive-office", "doctor", "--home", str(home), home=home, check=False)
    return result.stdout


def test_serve_starts_on_a_garbage_index(home: Path, tmp_path: Path) -> None:
    (home / "hive" / ".git" / "index").write_bytes(os.urandom(1024))
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    try:
        run("hive", "send", "--to", "pam", "--body", "hello", home=home, agent="jim")
        # Any commit of the run: a later one (the registry, the log) may follow it.
        try:
            wait_for(lambda: "route: 1 message" in git(home / "hive", "log"), "the commit", 60)
        except AssertionError:
            # It has timed out only inside full CI runs: say what the office and git said.
            raise AssertionError(
                f"no route commit in 60 s.\ngit log:\n{git(home / 'hive', 'log', '--oneline')}"
                f"\nserve said:\n{office.log.read_text(errors='replace')[-4000:]}"
            ) from None
    finally:
        assert office.stop() == 0
    assert git(home / "hive", "status", "--porcelain") == ""


def test_commit_failures_show_in_doctor_and_clear_when_repaired(home: Path, tmp_path: Path) -> None:
    hive = home / "hive"
    tip = git(hive, "rev-parse", "HEAD").strip()
    assert "FIX" not in doctor(home).split("office not running")[0]
    kept = remove_object(hive, tip)
    # Without an office, doctor reads the repository itself.
    assert "FIX  the last commit" in doctor(home)
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    try:
        run("hive", "send", "--to", "pam", "--body", "hello", home=home, agent="jim")
        wait_for(lambda: "commit: the last commit" in doctor(home), "doctor to show it")
        os.rename(kept, hive / ".git" / "objects" / tip[:2] / tip[2:])
        # The retry after the repair commits and clears the problem (backoff <= 60 s).
        wait_for(lambda: "route: 1 message" in git(hive, "log", "-1"), "the commit", 90)
        wait_for(lambda: "commit:" not in doctor(home), "the problem to clear")
    finally:
        assert office.stop() == 0
    assert len(roots(hive)) == 1


@pytest.mark.parametrize("damage", ["missing", "garbage-file"])
def test_serve_refuses_a_hive_that_is_not_a_repository_with_a_sentence(
    tmp_path: Path, damage: str
) -> None:
    home = tmp_path / "home"
    run("hive-office", "init", home=home)
    git_dir = home / "hive" / ".git"
    shutil.rmtree(git_dir)
    if damage == "garbage-file":
        git_dir.write_text("garbage\n")
    refused = run("hive-office", "serve", "--no-agents", home=home, check=False)
    assert refused.returncode == 1
    assert "not a git repository" in refused.stderr and "Traceback" not in refused.stderr
    # The way out the sentence names works, and keeps the hive's files.
    (home / "hive" / "board.md").write_text("# kept\n")
    if damage == "garbage-file":
        git_dir.rename(tmp_path / "old.git")
    run("hive-office", "init", home=home)
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    assert office.stop() == 0
    assert (home / "hive" / "board.md").read_text() == "# kept\n"
