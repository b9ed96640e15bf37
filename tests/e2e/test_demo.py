"""`hive-office --demo` deletes only what a demo made: it takes an empty folder or one a
previous demo marked, and refuses anything else with a sentence, touching nothing."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from hive_core.demo.office import DEMO_MARK, DemoHomeTaken, start_demo
from hive_core.hive import init_office
from hive_core.paths import HivePaths

BIN = Path(sys.executable).parent


def demo_in_a_terminal(*args: str, env_home: Path | None = None) -> tuple[int, str]:
    """`hive-office --demo` with a terminal on stdin/stdout (it needs one), as a person
    runs it; its exit code and what it said on stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    if env_home is not None:
        env["HIVE_HOME"] = str(env_home)
    master, slave = pty.openpty()
    try:
        result = subprocess.run(
            [str(BIN / "hive-office"), *args, "--demo"],
            stdin=slave,
            stdout=slave,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            timeout=60,
        )
    finally:
        os.close(slave)
        os.close(master)
    return result.returncode, result.stderr


def listing(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(folder.rglob("*"))
    }


def test_a_folder_of_someone_elses_files_is_refused_untouched(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine\n")
    before = listing(theirs)
    code, err = demo_in_a_terminal("--home", str(theirs))
    assert code == 1
    assert "notes.txt" in err and "nothing was touched" in err and "--home" in err
    assert listing(theirs) == before, "not even a lock or a mark was written"


def test_the_demo_honours_hive_home_and_refuses_a_real_office(tmp_path: Path) -> None:
    office = HivePaths(tmp_path / "office")
    init_office(office)
    before = listing(office.home)
    code, err = demo_in_a_terminal(env_home=office.home)
    assert code == 1 and str(office.home) in err and "unset HIVE_HOME" in err
    assert listing(office.home) == before


def test_an_empty_folder_and_a_previous_demos_are_laid_out(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    home.mkdir()
    start_demo(home).stop()
    assert (home / DEMO_MARK).is_file() and (home / "office.toml").exists()
    # What the demo and its office made is laid out afresh on the next run.
    (home / "project" / "from-the-last-run.txt").write_text("story so far\n")
    HivePaths(home).memory_db.write_bytes(b"the office's cache")
    start_demo(home).stop()
    assert not (home / "project" / "from-the-last-run.txt").exists()
    assert not HivePaths(home).memory_db.exists()
    # A folder that does not exist yet is made.
    start_demo(tmp_path / "new").stop()
    assert (tmp_path / "new" / DEMO_MARK).is_file()


def test_a_file_put_in_a_previous_demos_home_is_never_deleted(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    start_demo(home).stop()
    (home / "keep-me.txt").write_text("the person's\n")
    before = listing(home)
    with pytest.raises(DemoHomeTaken, match=r"keep-me\.txt.*Move them out"):
        start_demo(home)
    assert listing(home) == before


def test_a_mark_that_is_not_a_file_marks_nothing(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "office.toml").write_text("[office]\n")
    (tmp_path / "elsewhere").write_text("")
    (theirs / DEMO_MARK).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DemoHomeTaken, match=r"office\.toml"):
        start_demo(theirs)
    assert (theirs / "office.toml").read_text() == "[office]\n"
