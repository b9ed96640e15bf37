"""The private sshd the remote-desk tests rely on: a login, a forwarded Unix socket, a drop."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.sshd_support import running_sshd
from tests.support import wait_for


def test_login_runs_a_command_and_drop_cuts_the_connection(short_tmp: Path) -> None:
    with running_sshd(short_tmp / "ssh") as host:
        done = host.run("echo hello-$((40+2))")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "hello-42"

        # A Unix socket forwarded from "the remote side" back to a local listener.
        local = short_tmp / "local.sock"
        remote = short_tmp / "remote.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(local))
        server.listen()
        link = subprocess.Popen(
            ["ssh", *host.ssh_args, "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
             "-N", "-R", f"{remote}:{local}", host.alias],
            stderr=subprocess.PIPE,
        )  # fmt: skip

        def connected() -> socket.socket | None:
            # sshd binds the socket (the file appears) before it listens: a connect in
            # between is refused (once in CI), so the wait is for a connection.
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect(str(remote))
            except (FileNotFoundError, ConnectionRefusedError):
                client.close()
                return None
            return client

        client = wait_for(connected, "a connection to the forwarded socket on the remote side")
        client.sendall(b"ping")
        conn, _ = server.accept()
        assert conn.recv(4) == b"ping"
        assert host.drop(), "sshd held no connection to drop"
        assert link.wait(timeout=30) == 255  # ssh's own failure code: the link went down
        for s in (client, conn, server):
            s.close()
