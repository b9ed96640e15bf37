"""The office's hardened git (hive_core/gitsafe.py) and its own diff of an untracked
file, against real git: the patch the office makes for a new file is git's own, byte for
byte; a remote host's shell neutralises the drivers a repository names as the local
runner does; and the safe open never waits on what an agent leaves."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hive_core import gitsafe
from hive_core.fsio import UnsafeFile, open_regular, read_head
from hive_core.worktrees import LOCAL
from hive_core.worktrees.plan import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_LINK,
    new_file_patch,
    remote_new_files_script,
)


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = gitsafe.environment(os.environ)
    return subprocess.run(gitsafe.argv(args), cwd=cwd, env=env, capture_output=True, check=False)


@pytest.mark.parametrize(
    ("name", "data", "executable"),
    [
        ("plain.txt", b"one\ntwo\n", False),
        ("no-newline.txt", b"one\ntwo", False),
        ("one-line.txt", b"only\n", False),
        ("empty.txt", b"", False),
        ("binary.bin", b"abc\0def\n", False),
        ("run.sh", b"#!/bin/sh\necho hi\n", True),
        ("tab\there.txt", b"x\n", False),
        ('quote"back\\slash.txt', b"x\n", False),
        ("naïve.txt", b"caf\xc3\xa9\n", False),
    ],
)
def test_a_new_files_patch_is_gits_own(
    tmp_path: Path, name: str, data: bytes, executable: bool
) -> None:
    (tmp_path / name).write_bytes(data)
    if executable:
        (tmp_path / name).chmod(0o755)
    mode = MODE_EXECUTABLE if executable else MODE_FILE
    theirs = git(
        tmp_path, "diff", *gitsafe.DIFF_FLAGS, "--no-color", "--no-index", "--", "/dev/null", name
    )
    assert theirs.returncode == 1, theirs.stderr
    assert new_file_patch(name, data, mode) == theirs.stdout.decode("utf-8", "replace")


def test_a_symlinks_patch_is_its_target_as_git_shows_it(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/somewhere/else")
    theirs = git(
        tmp_path, "diff", *gitsafe.DIFF_FLAGS, "--no-color", "--no-index", "--", "/dev/null", "link"
    )
    assert new_file_patch("link", b"/somewhere/else", MODE_LINK) == theirs.stdout.decode()


def test_a_file_read_only_in_part_is_shown_as_binary() -> None:
    assert "Binary files /dev/null and b/big differ" in new_file_patch(
        "big", b"text\n", MODE_FILE, whole=False
    )


def test_the_drivers_a_repository_names_are_found_and_given_values_that_run_nothing() -> None:
    names = [
        "filter.lfs.clean",
        "filter.lfs.process",
        "filter.a.b.smudge",
        "filter.x=y.clean",
        "filter.lfs.required",
        "merge.ours.driver",
        "diff.pdf.textconv",
        "diff.pdf.command",
        "credential.https://example.com.helper",
        "user.name",
        "core.editor",
        "filter.lfs.cleanup",
    ]
    assert gitsafe.driver_overrides(names) == [
        ("credential.https://example.com.helper", ""),
        ("diff.pdf.command", ""),
        ("diff.pdf.textconv", ""),
        ("filter.a.b.smudge", ""),
        ("filter.lfs.clean", ""),
        ("filter.lfs.process", ""),
        ("filter.lfs.required", "false"),
        ("filter.x=y.clean", ""),
        ("merge.ours.driver", "git merge-file %A %O %B"),
    ]


def _planted_repo(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    ran = tmp_path / "ran"
    prog = tmp_path / "prog"
    prog.write_text(f'#!/bin/sh\necho "$0" >> {ran}\ncat\n')
    prog.chmod(0o755)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    (repo / ".gitattributes").write_text("* filter=x=y\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True)
    # A driver whose name holds `=`: `-c filter.x=y.clean=` would set another key.
    with (repo / ".git" / "config").open("a") as f:
        f.write(f'[filter "x=y"]\n\tclean = {prog}\n\trequired = true\n')
    (repo / "a.txt").write_text("changed\n")
    return repo, ran


def test_the_local_runner_empties_a_driver_whose_name_holds_an_equals_sign(
    tmp_path: Path,
) -> None:
    repo, ran = _planted_repo(tmp_path)
    names = gitsafe.parse_names(git(repo, *gitsafe.LIST_NAMES).stdout)
    env = gitsafe.environment(os.environ, gitsafe.driver_overrides(names))
    done = subprocess.run(
        gitsafe.argv(["diff", *gitsafe.DIFF_FLAGS, "--numstat"]),
        cwd=repo,
        env=env,
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"1\t1\ta.txt\n"
    assert not ran.exists()
    # The plant is live for a git without the overrides.
    subprocess.run(["git", "diff"], cwd=repo, capture_output=True, check=False)
    assert ran.exists()


def test_a_remote_hosts_shell_empties_the_same_drivers(tmp_path: Path) -> None:
    repo, ran = _planted_repo(tmp_path)
    script = (
        gitsafe.shell_prelude()
        + gitsafe.shell_words(["diff", *gitsafe.DIFF_FLAGS, "--numstat"])
        + "; env | grep ^GIT_CONFIG_"
    )
    done = subprocess.run(["/bin/sh", "-c", script], cwd=repo, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0] == "1\t1\ta.txt"
    assert "GIT_CONFIG_KEY_0=filter.x=y.clean" in lines
    assert not ran.exists()


def test_the_safe_open_never_waits_on_a_fifo_or_follows_a_link(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    for name in ("fifo", "link", "zero"):
        with pytest.raises(UnsafeFile):
            open_regular(tmp_path / name)
    with (tmp_path / "sparse").open("wb") as f:
        f.truncate(4 << 30)
    data, st = read_head(tmp_path / "sparse", 1024)
    assert data == b"\0" * 1024 and st.st_size == 4 << 30
    with pytest.raises(FileNotFoundError):
        read_head(tmp_path / "missing", 10)


def test_a_remote_hosts_new_file_patches_are_the_local_runners(tmp_path: Path) -> None:
    """The host's script (run here by /bin/sh, as ssh's login shell would) and the local
    runner give the same patches, and both leave a FIFO out without waiting on it."""
    (tmp_path / "text.txt").write_bytes(b"one\ntwo\n")
    (tmp_path / "link").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    names = ["text.txt", "link", "fifo"]
    script = remote_new_files_script(str(tmp_path), names)
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    here = LOCAL.new_files(names, tmp_path)
    assert done.stdout.decode() == here
    assert "b/text.txt" in here and "+/dev/zero" in here and "fifo" not in here


def test_the_environment_drops_what_would_point_git_elsewhere_or_run_something() -> None:
    base = {
        "PATH": "/usr/bin",
        "GIT_DIR": "/elsewhere",
        "GIT_EXTERNAL_DIFF": "/tmp/evil",
        "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='/tmp/evil'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": "/tmp/evil",
        "GIT_AUTHOR_NAME": "Person",
    }
    env = gitsafe.environment(base, [("filter.x.clean", "")])
    assert env["PATH"] == "/usr/bin" and env["GIT_AUTHOR_NAME"] == "Person"
    for gone in ("GIT_DIR", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS"):
        assert gone not in env
    assert env["GIT_CONFIG_COUNT"] == "1"
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("filter.x.clean", "")
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_ATTR_NOSYSTEM"] == "1"
    assert "GIT_CONFIG_COUNT" not in gitsafe.environment(base)
