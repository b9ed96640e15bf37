"""A remote desk's start as the host's shells run it (hive_core/remote/plan.py): the
command sources the launch script prepare kept, and the CLI it execs sees every variable
and file exactly, while the script is gone and no argv held a value. Real dash and bash,
on this machine, with the desk's folder a temporary one."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from hive_core.remote import plan

HOSTILE = "it's $HOME `id` \"q\"\nline2 \\ '' $(id) %s \\n -e"
SHELLS = [s for s in ("dash", "bash") if shutil.which(s)]


@pytest.mark.parametrize("shell", SHELLS)
def test_the_cli_sees_every_value_and_file_and_the_script_is_gone(
    tmp_path: Path, shell: str
) -> None:
    rdir = tmp_path / "desk"
    (rdir / "files").mkdir(parents=True)
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    local = "/srv/office/agent-settings/jim.json"
    shipped = plan.ship_plan({local: HOSTILE.encode()}, Path("/srv/office"), str(rdir))
    env = {"OPENAI_API_KEY": "sk-" + HOSTILE, "SETTINGS": local, "EMPTY": ""}
    # The CLI: what it sees of its environment, its cwd and the shipped file, written out.
    argv = [
        "/bin/sh",
        "-c",
        'printf %s "$OPENAI_API_KEY" > key; printf %s "$SETTINGS" > settings; '
        'printf %s "${EMPTY-unset}" > empty; printf %s "$PATH" > path; cat "$SETTINGS" > file',
    ]
    start = plan.remote_start(argv, env, str(rdir), str(work), shipped, str(venv_bin))
    script = rdir / plan.LAUNCH_FILE
    script.write_text(start.script)
    done = subprocess.run(
        [shell, "-c", start.command],
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    there = f"{rdir}/files/agent-settings/jim.json"
    assert (work / "key").read_text() == "sk-" + HOSTILE
    assert (work / "settings").read_text() == there
    assert (work / "empty").read_text() == ""
    assert (work / "path").read_text() == f"{venv_bin}:{os.environ['PATH']}"
    assert (work / "file").read_text() == HOSTILE
    assert stat.S_IMODE(os.stat(there).st_mode) == 0o600
    assert not script.exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_script_that_fails_is_gone_all_the_same_and_nothing_runs(
    tmp_path: Path, shell: str
) -> None:
    rdir = tmp_path / "desk"
    rdir.mkdir()
    # A shipped file whose folder cannot be made (a file is in the way).
    (tmp_path / "blocked").write_text("")
    shipped = [plan.Shipped("/o/x", str(tmp_path / "blocked" / "x"), "text")]
    start = plan.remote_start(
        ["/bin/sh", "-c", "echo ran > ran"],
        {"K": "v"},
        str(rdir),
        str(tmp_path),
        shipped,
        "/nowhere",
    )
    script = rdir / plan.LAUNCH_FILE
    script.write_text(start.script)
    done = subprocess.run(
        [shell, "-c", start.command], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode != 0
    assert not script.exists() and not (tmp_path / "ran").exists()
