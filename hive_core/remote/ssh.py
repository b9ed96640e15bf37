"""The ssh command lines the office runs for a remote desk (pure: argv in, argv out).

Every connection the office opens is non-interactive (BatchMode: a password prompt would
hang a desk; keys or an agent must be set up) and names the desk's ControlPath, so a
command for a desk whose connection is up (a diff, a merge) is multiplexed over that very
connection instead of logging in again; with no master there it connects on its own.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from hive_core.paths import SOCKET_PATH_MAX, HivePaths
from hive_core.schema import AgentSpec

# Options every office connection carries, before the person's ssh_args (ssh takes the
# first value it sees for an option, so a person's ssh_args cannot undo these).
# ssh makes a master's socket under a temporary name (the path, a dot and 16 random
# characters) before it renames it: that name must fit paths.SOCKET_PATH_MAX too.
MASTER_SUFFIX = 17

# ssh's own exit code when the connection failed (not the remote command).
SSH_FAILED = 255

BASE_OPTIONS = (
    "-o", "BatchMode=yes",
    "-o", "ConnectTimeout=10",
    "-o", "ServerAliveInterval=15",
    "-o", "ServerAliveCountMax=3",
)  # fmt: skip


def remote_path_word(path: str) -> str:
    """`path` as one word for the remote shell, with a leading `~/` left for it to expand."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def ssh_argv(
    spec: AgentSpec,
    paths: HivePaths,
    remote: str,
    *,
    master: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """`ssh ... DEST remote` for `spec`'s host. `master`: this connection is the desk's own
    (it becomes the ControlMaster others reuse); otherwise it reuses that one if it is up."""
    assert spec.host is not None, f"{spec.id} has no host"
    path = str(paths.ssh_master(spec.id))
    control = [
        "-o", f"ControlPath={path}",
        "-o", "ControlMaster=yes" if master else "ControlMaster=no",
        "-o", "ControlPersist=no",
    ]  # fmt: skip
    if len(path.encode()) + MASTER_SUFFIX > SOCKET_PATH_MAX:
        # ssh would refuse to start at all ("ControlPath too long"): without sharing,
        # every call opens its own connection, and the desk still works.
        control = ["-o", "ControlPath=none"]
    return ["ssh", *BASE_OPTIONS, *control, *extra, *spec.ssh_args, "--", spec.host, remote]
