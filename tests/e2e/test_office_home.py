"""The office's home: one office per home whatever is deleted, and only its user can read it.
Real `hive-office` subprocesses."""

from __future__ import annotations

import shutil
import stat
import time
from pathlib import Path

import pytest

from tests.e2e.test_serve import run
from tests.serve_support import ServedOffice
from tests.support import wait_for


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    run("hive-office", "init", home=home)
    return home


def second_serve(home: Path) -> tuple[int, str]:
    result = run("hive-office", "serve", "--no-agents", "--home", str(home), home=home, check=False)
    return result.returncode, result.stderr


def test_deleting_the_run_folder_does_not_let_a_second_office_start(
    home: Path, tmp_path: Path
) -> None:
    first = ServedOffice(home, agents=False, log=tmp_path / "first.log").start()
    try:
        # Everything the office keeps in run/ goes: lock, pid file, sockets. The office
        # may write a file there mid-removal ("Directory not empty"): remove it again.
        deadline = time.monotonic() + 20
        while (home / "run").exists():
            assert time.monotonic() < deadline, "run/ could not be removed"
            shutil.rmtree(home / "run", ignore_errors=True)
        code, err = second_serve(home)
        assert code == 1, err
        # No pid file left: the holder is still named.
        assert "already running" in err and f"pid {first.process.pid}" in err
        assert first.process.poll() is None
    finally:
        assert first.stop() == 0
    # Once the first office is gone, the next one starts.
    second = ServedOffice(home, agents=False, log=tmp_path / "second.log").start()
    assert second.stop() == 0


def modes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode)
        for p in [root, *root.rglob("*")]
        if not p.is_symlink() and not stat.S_ISSOCK(p.lstat().st_mode)
    }


def loose(found: dict[str, int]) -> dict[str, str]:
    return {path: oct(mode) for path, mode in found.items() if mode & 0o077}


def outside_git(found: dict[str, int]) -> dict[str, int]:
    """libgit2 makes its objects with the process umask (0444, folders 0755); inside a
    0700 .git in a 0700 home nobody else can reach them, and each start tightens them."""
    return {path: mode for path, mode in found.items() if not path.startswith("hive/.git/")}


def test_init_and_serve_keep_the_home_private(home: Path, tmp_path: Path) -> None:
    assert loose(outside_git(modes(home))) == {}
    assert stat.S_IMODE((home / "hive" / ".git").stat().st_mode) == 0o700
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    try:
        run("hive", "send", "--to", "pam", "--body", "hello", home=home, agent="jim")
        wait_for(lambda: bool(list((home / "hive/agents/pam/inbox").glob("2*.json"))), "delivery")
    finally:
        assert office.stop() == 0
    # What the office wrote while it ran: messages, archives, the log, the registry.
    hive = {f"hive/{k}": v for k, v in modes(home / "hive").items()}
    assert loose(outside_git(hive)) == {}
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "hive" / "log.jsonl").stat().st_mode) == 0o600


def test_a_loose_home_is_tightened_at_start_and_nothing_outside_it(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print(1)\n")
    (project / "main.py").chmod(0o644)
    script = home / "hive" / "agents" / "jim" / "memory" / "tool.sh"
    script.write_text("#!/bin/sh\n")
    for path in [home, *home.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    script.chmod(0o755)
    # A link out of the home is not followed.
    (home / "hive" / "agents" / "jim" / "memory" / "project").symlink_to(project)
    before = {p: p.lstat().st_ino for p in [home, *home.rglob("*")] if not p.is_symlink()}
    office = ServedOffice(home, agents=False, log=tmp_path / "serve.log").start()
    assert office.stop() == 0
    # Every one of them that the run did not replace. A commit replaces git's index and
    # branch ref by renaming a new file over them, and the new file may get the old
    # inode number back, so those are left out by name.
    git = home / "hive" / ".git"
    rewritten = {git / "index", *(git / "refs").rglob("*")}
    kept = [
        p
        for p, inode in before.items()
        if p not in rewritten and p.exists() and p.lstat().st_ino == inode
    ]
    assert len(kept) > 50
    assert {str(p): oct(p.lstat().st_mode) for p in kept if p.lstat().st_mode & 0o077} == {}
    assert stat.S_IMODE(script.stat().st_mode) == 0o700, "the owner keeps the execute bit"
    assert stat.S_IMODE(project.stat().st_mode) & 0o077
    assert stat.S_IMODE((project / "main.py").stat().st_mode) == 0o644
    assert "tightened" in (home / "hive" / "log.jsonl").read_text()
