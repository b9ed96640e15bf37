"""What the office reads or appends to in the hive never waits on a FIFO an agent put
in a file's place, nor follows a symlink there (issue 24): the log's readers see what is
readable, an append is refused with an OSError instead of blocking, and an ordinary log
reads and appends as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hive_core.agents.login import Folder, LoginReader, desk_folder
from hive_core.cost import LedgerHistory
from hive_core.fsio import append_line, read_tail
from hive_core.hive import init_office
from hive_core.logfile import LogFollower, iter_log_lines
from hive_core.paths import HivePaths
from hive_core.team.tasks import LedgerUnreadable, load_ledger


@pytest.fixture
def paths(tmp_path: Path) -> HivePaths:
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    paths.log_segments.mkdir(exist_ok=True)
    (paths.log_segments / "0001.jsonl").write_bytes(b'{"n":1}\n{"n":2}\n')
    paths.log.parent.mkdir(parents=True, exist_ok=True)
    paths.log.write_bytes(b'{"n":3}\n')
    return paths


def test_an_ordinary_log_reads_and_appends(paths: HivePaths) -> None:
    follower = LogFollower(paths)
    append_line(paths.log, b'{"n":4}')
    assert follower.read() == [b'{"n":4}']
    assert list(iter_log_lines(paths)) == [b'{"n":%d}' % n for n in (1, 2, 3, 4)]
    assert read_tail(paths.log, 8) == b'{"n":4}\n'


@pytest.mark.parametrize("kind", ["fifo", "link-to-fifo", "link-to-zero"])
def test_a_fifo_or_link_in_the_logs_place_is_never_waited_on(
    paths: HivePaths, tmp_path: Path, kind: str
) -> None:
    follower = LogFollower(paths)
    paths.log.unlink()
    if kind == "fifo":
        os.mkfifo(paths.log)
    elif kind == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo")
        paths.log.symlink_to(tmp_path / "fifo")
    else:
        paths.log.symlink_to("/dev/zero")
    # The segments are still read; the live file counts as missing.
    assert list(iter_log_lines(paths)) == [b'{"n":1}', b'{"n":2}']
    assert follower.read() == []
    assert read_tail(paths.log, 100) == b""
    with pytest.raises(OSError):
        append_line(paths.log, b'{"n":5}')
    assert list(LogFollower(paths, from_start=True).read()) == []


def test_a_desks_git_file_leading_to_a_fifo_is_never_waited_on(tmp_path: Path) -> None:
    """Where a claude desk starts is read from its worktree's `.git` file, which the
    agent can point anywhere: a `commondir` that is a FIFO is a folder of its own."""
    work = tmp_path / "work"
    work.mkdir()
    gitdir = tmp_path / "repo" / ".git" / "worktrees" / "work"
    gitdir.mkdir(parents=True)
    (work / ".git").write_text(f"gitdir: {gitdir}\n")
    (gitdir / "commondir").write_text("../..\n")
    # The allowed path: a worktree is known by its main checkout.
    assert desk_folder(work) == Folder(key=tmp_path / "repo", path=work)
    (gitdir / "commondir").unlink()
    os.mkfifo(gitdir / "commondir")
    assert desk_folder(work) == Folder(key=work, path=work)


def test_a_fifo_for_claudes_config_reads_as_no_login(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude.json").write_text('{"primaryApiKey": "sk-ant-x"}')
    assert LoginReader()(env).source is not None
    (tmp_path / ".claude.json").unlink()
    os.mkfifo(tmp_path / ".claude.json")
    assert LoginReader()(env).source is None


def test_a_fifo_for_the_task_ledger_is_refused_not_waited_on(paths: HivePaths) -> None:
    assert load_ledger(paths.tasks) is not None  # the allowed path: an ordinary ledger
    paths.tasks.unlink(missing_ok=True)
    os.mkfifo(paths.tasks)
    with pytest.raises(LedgerUnreadable):
        load_ledger(paths.tasks)
    assert LedgerHistory(paths.hive, paths.tasks).read() == []
