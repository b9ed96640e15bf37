"""A private OpenSSH server on 127.0.0.1 for the remote-desk tests: "the remote host".

    with running_sshd(folder) as host: ...
        host.alias         the destination an agent's office.toml names (`host = ...`)
        host.ssh_args      ["-F", <client config>]: its `ssh_args`
        host.run(cmd)      run a shell command there through ssh (CompletedProcess)
        host.drop()        cut every open connection (kills sshd's per-connection children)
        host.pause()       stop answering new connections (resume() answers again)

A generated host key and user key, a free port, a config of its own (nothing of the
machine's sshd or ~/.ssh is read or changed). Tests skip, saying why, where no sshd can be
installed (`sshd_binary()`); ./scripts/setup installs openssh-server where it can.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from hive_core.remote import plan
from tests.support import wait_for

SSHD = "/usr/sbin/sshd"
ALIAS = "hive-remote"


def forget_on_host(home: Path) -> None:
    """Remove what the office of `home` left on "the host" (this machine, whose $HOME
    is the test host's): its desks' private folders and worktrees, nothing else."""
    shutil.rmtree(Path.home() / plan.REMOTE_ROOT / plan.office_key(home), ignore_errors=True)


def sshd_binary() -> str | None:
    """Where sshd is, installing Debian's openssh-server first if it is missing and this
    process may (root with apt-get); None if there is none."""
    if os.access(SSHD, os.X_OK):
        return SSHD
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "openssh-server"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
    return SSHD if os.access(SSHD, os.X_OK) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class SshHost:
    folder: Path
    port: int
    process: subprocess.Popen[bytes]

    alias = ALIAS

    @property
    def client_config(self) -> Path:
        return self.folder / "ssh_config"

    @property
    def ssh_args(self) -> list[str]:
        return ["-F", str(self.client_config)]

    def run(self, command: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ssh", *self.ssh_args, "-o", "BatchMode=yes", self.alias, command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def connections(self) -> list[int]:
        """Pids of sshd's per-connection processes (children of the listener)."""
        try:
            out = subprocess.run(
                ["pgrep", "-P", str(self.process.pid)], capture_output=True, text=True, check=False
            ).stdout
        except FileNotFoundError:
            return []
        return [int(p) for p in out.split()]

    def pause(self) -> None:
        """Stop answering new connections (they hang until ssh's ConnectTimeout), as an
        unreachable host does; resume() answers again."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def drop(self) -> list[int]:
        """Cut every connection open now, as a dead link would; returns the pids killed."""
        pids = self.connections()
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return pids


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        stdout=subprocess.DEVNULL,
    )


@contextmanager
def running_sshd(folder: Path, *, max_startups: int = 200) -> Iterator[SshHost]:
    """Start sshd on a free loopback port with keys and configs under `folder`; stop it
    (and every connection it holds) afterwards."""
    sshd = sshd_binary()
    if sshd is None:
        import pytest

        pytest.skip("no sshd here and it cannot be installed (needs root and apt-get)")
    folder.mkdir(parents=True, exist_ok=True)
    host_key, user_key = folder / "host_key", folder / "id"
    _keygen(host_key)
    _keygen(user_key)
    (folder / "authorized_keys").write_text((folder / "id.pub").read_text())
    port = _free_port()
    (folder / "sshd_config").write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {folder}/sshd.pid
AuthorizedKeysFile {folder}/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowStreamLocalForwarding yes
StreamLocalBindUnlink yes
MaxStartups {max_startups}
MaxSessions {max_startups}
PrintMotd no
AcceptEnv none
LogLevel ERROR
"""
    )
    host_pub = (folder / "host_key.pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    (folder / "ssh_config").write_text(
        f"""Host {ALIAS}
  HostName 127.0.0.1
  Port {port}
  User {os.environ.get("USER") or __import__("pwd").getpwuid(os.getuid()).pw_name}
  IdentityFile {user_key}
  IdentitiesOnly yes
  UserKnownHostsFile {folder}/known_hosts
  StrictHostKeyChecking yes
  LogLevel ERROR
"""
    )
    # Privilege separation wants this folder to exist (it is the machine's, not ours).
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    process = subprocess.Popen(
        [sshd, "-D", "-e", "-f", str(folder / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "sshd.log", "wb"),  # noqa: SIM115 - kept open by the child
    )
    host = SshHost(folder, port, process)
    try:

        def answers() -> bool:
            if process.poll() is not None:
                raise AssertionError(
                    f"sshd exited: {(folder / 'sshd.log').read_text(errors='replace')}"
                )
            return host.run("true", timeout=10).returncode == 0

        wait_for(answers, "the private sshd to accept a login", timeout=30)
        yield host
    finally:
        host.drop()
        process.send_signal(signal.SIGCONT)  # a paused sshd would not see the SIGTERM
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
