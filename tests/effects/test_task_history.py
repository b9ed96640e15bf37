"""A task's history dates each change by the commit that introduced it (issue 23: an 08:47
change showed 08:56, the newest commit that still held it). Real git commits, each at a
time of its own, read back through the task screen's own functions."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hive_core.team import tasks
from hive_tui.screens.task import changes, committed_versions


def commit(repo: Path, at: str, message: str) -> None:
    env = dict(
        os.environ,
        GIT_AUTHOR_DATE=at,
        GIT_COMMITTER_DATE=at,
        GIT_AUTHOR_NAME="office",
        GIT_AUTHOR_EMAIL="office@example.invalid",
        GIT_COMMITTER_NAME="office",
        GIT_COMMITTER_EMAIL="office@example.invalid",
    )
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "add", "-A"], check=True, env=env)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True, env=env)


def test_each_change_is_dated_by_the_commit_that_introduced_it(tmp_path: Path) -> None:
    repo = tmp_path / "hive"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ledger_file = repo / "tasks.json"
    ledger = tasks.empty_ledger()
    ledger, _ = tasks.add_task(ledger, "Pick a DB", assignable=["jim"], now="2026-12-05T08:40:00Z")
    tasks.save_ledger(ledger_file, ledger)
    commit(repo, "2026-12-05T08:40:00Z", "task t1 created")

    ledger, _ = tasks.update_task(
        ledger, "t1", {"status": "doing"}, assignable=["jim"], now="2026-12-05T08:47:00Z"
    )
    tasks.save_ledger(ledger_file, ledger)
    commit(repo, "2026-12-05T08:47:00Z", "t1 doing")
    # Commits that keep the ledger as it was: other files, then nothing at all.
    (repo / "board.md").write_text("plan\n")
    commit(repo, "2026-12-05T08:56:00Z", "board")
    commit(repo, "2026-12-05T09:01:00Z", "nothing")

    ledger, _ = tasks.update_task(
        ledger, "t1", {"status": "done"}, assignable=["jim"], now="2026-12-05T09:05:00Z"
    )
    tasks.save_ledger(ledger_file, ledger)
    (repo / "board.md").write_text("shipped\n")
    commit(repo, "2026-12-05T09:05:00Z", "t1 done")
    commit(repo, "2026-12-05T09:10:00Z", "later")

    versions = committed_versions(repo, "t1")
    assert [when for when, _ in versions] == [
        "2026-12-05T08:40:00+00:00",
        "2026-12-05T08:47:00+00:00",
        "2026-12-05T09:05:00+00:00",
    ]
    assert changes(versions) == [
        ("2026-12-05T08:47:00+00:00", "status: todo -> doing"),
        ("2026-12-05T09:05:00+00:00", "status: doing -> done"),
    ]


def test_a_ledger_removed_and_written_again_is_a_change_of_its_own(tmp_path: Path) -> None:
    repo = tmp_path / "hive"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    ledger, _ = tasks.add_task(
        tasks.empty_ledger(), "Pick a DB", assignable=["jim"], now="2026-12-05T08:40:00Z"
    )
    tasks.save_ledger(repo / "tasks.json", ledger)
    commit(repo, "2026-12-05T08:40:00Z", "created")
    (repo / "tasks.json").unlink()
    commit(repo, "2026-12-05T08:50:00Z", "ledger gone")
    tasks.save_ledger(repo / "tasks.json", ledger)
    commit(repo, "2026-12-05T09:00:00Z", "ledger back")

    assert [when for when, _ in committed_versions(repo, "t1")] == [
        "2026-12-05T08:40:00+00:00",
        "2026-12-05T09:00:00+00:00",
    ]
