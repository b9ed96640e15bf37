"""`hive-office doctor` on an office with desks on "the remote host" (a real sshd on
127.0.0.1): one ssh call per host says whether `hive` is there at this version, whether
each agent's CLI and working folder are, and why a host cannot be reached."""

from __future__ import annotations

import io
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from hive_core.hive import init_office
from hive_core.paths import HivePaths
from hive_core.remote.setup import remote_setup
from tests.sshd_support import SshHost, running_sshd
from tests.support import short_dir

HIVE_OFFICE = str(Path(sys.executable).parent / "hive-office")


@pytest.fixture(scope="module")
def host() -> Iterator[SshHost]:
    with short_dir() as root, running_sshd(root / "ssh") as host:
        yield host


@pytest.fixture(scope="module")
def venv(host: SshHost) -> Iterator[Path]:
    """A venv on the host made by remote-setup, once for the module."""
    with short_dir() as root:
        made = root / "venv"
        log = io.StringIO()
        _target, installed = remote_setup(
            HivePaths(root / "home"), host.alias, ssh_args=host.ssh_args, venv=str(made), log=log
        )
        assert installed == version("hive-office"), log.getvalue()
        yield made


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _toml(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def doctor(home: Path, remote_venv: Path, agents: list[dict[str, object]]) -> tuple[int, str]:
    """doctor's exit code and output for an office of `agents` (the first is the manager)."""
    init_office(HivePaths(home))
    text = f'[office]\nmanager = "{agents[0]["id"]}"\nremote_venv = {_toml(remote_venv)}\n'
    for agent in agents:
        text += "\n[[agents]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in agent.items())
    (home / "office.toml").write_text(text)
    done = subprocess.run(
        [HIVE_OFFICE, "--home", str(home), "doctor"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout


def shell_desk(host: SshHost, agent_id: str = "pam", **kw: object) -> dict[str, object]:
    return {
        "id": agent_id,
        "name": agent_id.title(),
        "provider": "shell",
        "command": ["sh"],
        "host": host.alias,
        "ssh_args": host.ssh_args,
        **kw,
    }


def test_a_venv_without_hive_is_told_to_run_remote_setup(host: SshHost) -> None:
    with short_dir() as root:
        empty = root / "no-venv"
        code, out = doctor(root / "home", empty, [shell_desk(host)])
    assert code == 1, out
    assert f"FIX  hive-remote: `hive` is not installed in {empty}" in out
    assert "-> run `hive-office remote-setup hive-remote` to install it there" in out
    assert "ok   hive-remote (for pam): reachable over ssh" in out
    assert "ok   pam: shell on hive-remote -> " in out


def test_a_set_up_host_is_ok(host: SshHost, venv: Path) -> None:
    with short_dir() as root:
        code, out = doctor(root / "home", venv, [shell_desk(host)])
    assert code == 0, out
    assert f"ok   hive-remote: hive {version('hive-office')} in {venv}" in out
    assert "FIX" not in out


def test_a_missing_cli_and_folder_say_what_to_install_there(host: SshHost, venv: Path) -> None:
    claude: dict[str, object] = {
        "id": "jim",
        "name": "Jim",
        "provider": "claude",
        "command": ["no-such-claude-here"],
        "cwd": "~/no/such/folder",
        "host": host.alias,
        "ssh_args": host.ssh_args,
    }
    with short_dir() as root:
        code, out = doctor(root / "home", venv, [shell_desk(host), claude])
    assert code == 1, out
    # Both desks share one host and one probe.
    assert out.count("reachable over ssh") == 1 and "(for pam, jim)" in out
    assert "FIX  jim: `no-such-claude-here` not found on hive-remote" in out
    assert (
        "-> on hive-remote: Install Claude Code with `npm install -g @anthropic-ai/claude-code`"
        in out
    )
    assert "FIX  jim: working folder ~/no/such/folder does not exist on hive-remote" in out
    # The local checks of a remote desk are skipped: no local `claude` complaint.
    assert out.count("no-such-claude-here") == 1


def test_an_unreachable_host_gets_the_reason(host: SshHost) -> None:
    refused = shell_desk(host, ssh_args=[*host.ssh_args, "-p", str(closed_port())])
    stranger = shell_desk(host, "dwight", ssh_args=[*host.ssh_args, "-o", "User=nobody-here"])
    with short_dir() as root:
        code, out = doctor(root / "home", root / "venv", [refused, stranger])
    assert code == 1, out
    assert "FIX  hive-remote (for pam): not reachable over ssh" in out
    assert "-> nothing accepts ssh connections at hive-remote" in out
    assert "FIX  hive-remote (for dwight): not reachable over ssh" in out
    assert "-> hive-remote refused the login" in out


def test_a_home_too_deep_for_a_desk_s_sockets_is_told_and_a_short_one_is_not(
    host: SshHost, venv: Path
) -> None:
    desk = shell_desk(host, "a" * 32)
    with short_dir() as root:
        # The office's own sockets fit; the remote desk's run/desks/<id>.control.sock not.
        deep = root / ("d" * (107 - len(str(root)) - len("/run/desks/") - 40))
        code, out = doctor(deep, venv, [desk])
        assert (
            code == 1 and f"socket path {deep}/run/desks/{'a' * 32}.control.sock is longer" in out
        )
        code, out = doctor(root / "home", venv, [desk])
        assert "socket path" not in out, out
