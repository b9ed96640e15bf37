"""`hive-office remote-setup HOST` against a real sshd on 127.0.0.1 ("the remote host"),
with real pip: the wheel built here runs there, again after a second run, and a host
or a Python that is not there is told in a sentence, leaving nothing behind."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from hive_core.hive import init_office
from hive_core.paths import HivePaths
from tests.sshd_support import SshHost, running_sshd
from tests.support import short_dir

HIVE_OFFICE = str(Path(sys.executable).parent / "hive-office")


@pytest.fixture(scope="module")
def host() -> Iterator[SshHost]:
    with short_dir() as root, running_sshd(root / "ssh") as host:
        yield host


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then freed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def setup_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HIVE_OFFICE, "--home", str(home), "remote-setup", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _office_on(home: Path, host: SshHost, remote_venv: Path) -> None:
    init_office(HivePaths(home))
    (home / "office.toml").write_text(
        f"""[office]
manager = "pam"
remote_venv = "{remote_venv}"

[[agents]]
id = "pam"
name = "Pam"
provider = "shell"
command = ["sh"]
host = "{host.alias}"
ssh_args = {host.ssh_args!r}
""".replace("'", '"')
    )


def test_installs_this_version_and_installs_it_again(host: SshHost, tmp_path: Path) -> None:
    here = version("hive-office")
    venv = tmp_path / "remote" / "venv"
    home = tmp_path / "home"
    # ssh_args and the venv come from office.toml's agent on that host.
    _office_on(home, host, venv)
    first = setup_cli(home, host.alias)
    assert first.returncode == 0, first.stderr
    assert f"hive-office {here} installed in {venv} on {host.alias}" in first.stdout
    assert f"created the venv {venv}" in first.stderr
    ran = host.run(f"{venv}/bin/hive --version")
    assert ran.returncode == 0 and ran.stdout.strip() == f"hive, version {here}", ran.stderr
    assert host.run(f"test -x {venv}/bin/cth-hook").returncode == 0

    # Given on the command line, with no office: the same version replaces itself.
    again = setup_cli(
        tmp_path / "no-office",
        host.alias,
        f"--ssh-arg={host.ssh_args[0]}",
        f"--ssh-arg={host.ssh_args[1]}",
        "--venv",
        str(venv),
    )
    assert again.returncode == 0, again.stderr
    assert "created the venv" not in again.stderr
    assert "Successfully installed hive-office" in again.stderr
    assert host.run(f"{venv}/bin/hive --version").stdout.strip() == f"hive, version {here}"
    # The temporary folders it made on the host are gone (pip names the wheel in them).
    made = re.findall(r"Processing (\S+)/hive_office-\S+\.whl", first.stderr + again.stderr)
    assert len(made) == 4, first.stderr
    assert not any(Path(folder).exists() for folder in made)


def test_a_host_that_does_not_answer_is_told(host: SshHost, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = setup_cli(
        tmp_path / "home",
        host.alias,
        *(f"--ssh-arg={a}" for a in [*host.ssh_args, "-p", str(closed_port())]),
        "--venv",
        str(venv),
    )
    assert done.returncode == 1
    assert "nothing accepts ssh connections at hive-remote" in done.stderr, done.stderr
    assert not venv.exists()


def test_a_python_that_is_not_there_is_told_and_nothing_is_made(
    host: SshHost, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    done = setup_cli(
        tmp_path / "home",
        host.alias,
        *(f"--ssh-arg={a}" for a in host.ssh_args),
        "--venv",
        str(venv),
        "--python",
        "/nonexistent/python3",
    )
    assert done.returncode == 1
    assert "there is no `/nonexistent/python3` on hive-remote" in done.stderr, done.stderr
    assert not venv.exists()


def test_both_command_lines_print_the_version() -> None:
    here = version("hive-office")
    for program in ("hive", "hive-office"):
        done = subprocess.run(
            [str(Path(sys.executable).parent / program), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0 and done.stdout.strip() == f"{program}, version {here}"
