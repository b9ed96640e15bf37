"""A remote desk's launch and reconnects, pure: strings and numbers in, strings out.

The provider makes a local Launch (argv, env, cwd) as for any desk; this turns it into
what runs on the host (docs: /work/notes/remote-design.md, issue 17): the desk's private
folder (rdir), the environment the host gets (only what the office added, plus the
forwarded sockets), the files the launch names under the office home shipped into
<rdir>/files, and what crosses to the host in two parts: the command string ssh hands the
remote shell, which is an argv on both machines (any user there reads it with `ps`), so
it holds no value of the environment and no file's text; and the launch script, which
`prepare` receives on its stdin and keeps in a private file, and which the command
sources (and the script removes) before it execs the CLI. launch.py runs them.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hive_core.errors import OfficeError
from hive_core.remote.ssh import remote_path_word
from hive_core.schema import ENV_KEY_RE
from hive_core.text import stripped

# The command is one argv string on both ends, and Linux takes at most 128 KiB in one
# argv string (MAX_ARG_STRLEN): the command and the environment the CLI is exec'd with
# stay under COMMAND_MAX together, and the files the launch ships under SHIP_MAX.
COMMAND_MAX = 120 * 1024
SHIP_MAX = 96 * 1024
# Reconnect backoff: 1, 2, 4, ... seconds, capped; the manager hears of a host that
# failed this many attempts in a row (once, until it comes back).
BACKOFF_CAP_S = 60.0
TELL_AFTER = 3
# Variables the host always gets from the launch, whatever the office's own say: the
# pane's terminal is the office's emulator, not the office's terminal.
ALWAYS = ("TERM", "COLORTERM")
# The office's own: never sent (the host has no hive files; these point at the office's).
NOT_SENT = ("HIVE_HOME", "HIVE_SOCKET", "HIVE_CONTROL", "PATH")
# The launch script on the host, in the desk's private folder: written by prepare from
# its stdin, sourced by the launch command, removed by its own first line.
LAUNCH_FILE = "launch.sh"


class ShipError(OfficeError, ValueError):
    """The launch cannot be shipped to the host (too big, or not text)."""


def office_key(home: Path) -> str:
    """Two offices on one host do not share a folder there."""
    return hashlib.sha256(str(home).encode()).hexdigest()[:8]


# Everything the office keeps on a host, under the host's $HOME: not ~/.hive-office,
# which may be an office of that host's own. Desks and worktrees have folders of their
# own, so no agent id can name the other.
REMOTE_ROOT = ".hive-remote"


def rdir_relative(key: str, agent_id: str) -> str:
    """The desk's private folder on the host, relative to the remote $HOME."""
    return f"{REMOTE_ROOT}/{key}/desks/{agent_id}"


def remote_worktree_relative(key: str, agent_id: str) -> str:
    """A remote desk's worktree, relative to its host's $HOME."""
    return f"{REMOTE_ROOT}/{key}/worktrees/{agent_id}"


def rdir_of(remote_home: str, key: str, agent_id: str) -> str:
    return f"{remote_home.rstrip('/')}/{rdir_relative(key, agent_id)}"


# Prints the host's $HOME: the last line of prepare, and alone what learns it before
# the first start on a host (remote paths must be absolute).
HOME_COMMAND = "printf '%s\\n' \"$HOME\""


def prepare_command(key: str, agent_id: str) -> str:
    """Make the desk's folder private (umask 077), remove the sockets a dropped link left
    (ssh cannot bind over them), keep the launch script that arrives on stdin (a 0600
    file: it holds the secret, the environment and the shipped files, which no argv of
    either machine may), and print $HOME."""
    rdir = '"$HOME"/' + shlex.quote(rdir_relative(key, agent_id))
    return (
        f"umask 077 && mkdir -p {rdir}/files && chmod 700 {rdir} && "
        f"rm -f {rdir}/hook.sock {rdir}/control.sock && cat > {rdir}/{LAUNCH_FILE} && "
        + HOME_COMMAND
    )


def parse_home(stdout: str) -> str | None:
    """The remote $HOME from prepare's output: its last line, if it is an absolute path
    (a login banner may come first)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines or not lines[-1].startswith("/"):
        return None
    return lines[-1]


def remote_venv_bin(remote_venv: str, remote_home: str) -> str:
    """office.toml's remote_venv, absolute on the host, and its bin/."""
    if remote_venv == "~":
        venv = remote_home
    elif remote_venv.startswith("~/"):
        venv = f"{remote_home.rstrip('/')}/{remote_venv[2:]}"
    else:
        venv = remote_venv
    return f"{venv.rstrip('/')}/bin"


def remote_env(
    launch_env: Mapping[str, str],
    office_env: Mapping[str, str],
    rdir: str,
    roster_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """What the host's process gets besides its own login environment: what the office
    and the provider added or changed, what office.toml's `env` names for the agent
    (even where the office's own environment has the same value: the host's has not),
    the forwarded sockets, HIVE_REMOTE; never the office's HIVE_HOME or PATH (the
    command puts the remote venv first on the host's)."""
    named = roster_env or {}
    env = {
        k: v
        for k, v in launch_env.items()
        if k not in NOT_SENT and (k in ALWAYS or k in named or office_env.get(k) != v)
    }
    env.update(
        HIVE_SOCKET=f"{rdir}/hook.sock", HIVE_CONTROL=f"{rdir}/control.sock", HIVE_REMOTE="1"
    )
    return env


def named_files(words: Sequence[str], home: Path) -> list[str]:
    """Paths under the office home that the launch's words name (a whole word, or the
    value of `--opt=PATH` / `VAR=PATH`), in the order first named."""
    prefix = str(home).rstrip("/") + "/"
    found: dict[str, None] = {}
    for word in words:
        value = word.split("=", 1)[1] if "=" in word and not word.startswith(prefix) else word
        if value.startswith(prefix) and "\n" not in value:
            found[value] = None
    return list(found)


@dataclass(frozen=True)
class Shipped:
    """A file the host gets: where it goes there, and its text."""

    local: str
    remote: str
    content: str


def place_on_host(local: str, home: Path, rdir: str) -> str:
    """Where a path under the office home goes on the host: the same place under
    <rdir>/files."""
    prefix = str(home).rstrip("/") + "/"
    return f"{rdir}/files/{local[len(prefix) :]}"


def ship_plan(files: Mapping[str, bytes], home: Path, rdir: str) -> list[Shipped]:
    """Each local file (its path under the office home -> its bytes) at the same place
    under <rdir>/files; refused with a sentence if too big or not text."""
    total = sum(len(b) for b in files.values())
    if total > SHIP_MAX:
        raise ShipError(
            f"the launch names {total // 1024} KiB of files under the office home, more than "
            f"the {SHIP_MAX // 1024} KiB a remote desk can be sent; make its config smaller."
        )
    shipped = []
    for local, data in files.items():
        if b"\0" in data:
            raise ShipError(f"{local} is not a text file, so it cannot be sent to the host.")
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ShipError(
                f"{local} is not UTF-8 text, so it cannot be sent to the host."
            ) from None
        shipped.append(Shipped(local, place_on_host(local, home, rdir), text))
    return shipped


def rewrite(word: str, shipped: Sequence[Shipped]) -> str:
    """`word` with every shipped file's local path replaced by its place on the host
    (longest first, so a file inside a shipped folder is not cut in two)."""
    for item in sorted(shipped, key=lambda s: len(s.local), reverse=True):
        word = word.replace(item.local, item.remote)
    return word


@dataclass(frozen=True)
class RemoteStart:
    """A remote desk's start: `command`, what the host's login shell runs (an argv on
    both machines: names and paths only), and `script`, prepare's stdin (every value)."""

    command: str
    script: str


def remote_start(
    argv: Sequence[str],
    env: Mapping[str, str],
    rdir: str,
    cwd: str,
    shipped: Sequence[Shipped],
    venv_bin: str,
    folders: Sequence[Shipped] = (),
) -> RemoteStart:
    """The command sources the launch script (umask 077 first: what it writes is
    private), cds to the desk's cwd there and execs argv. The script removes itself,
    writes the shipped files, and exports env and PATH with the remote venv first, all
    with shell builtins, so no value is ever an argv there either. `folders`: the folders
    the launch names (a CODEX_HOME), made there and named by their place there (their
    files are among `shipped`)."""
    places = [*shipped, *folders]
    script = shlex.quote(f"{rdir}/{LAUNCH_FILE}")
    # First, so that whatever follows fails, the values are on the disk only while the
    # shell reads them (it keeps the file open; bash reads it whole).
    lines = [f"rm -f {script}"]
    made = dict.fromkeys(
        [*(s.remote.rsplit("/", 1)[0] for s in shipped), *(f.remote for f in folders)]
    )
    lines += [f"mkdir -p {shlex.quote(folder)}" for folder in made]
    lines += [
        f"printf %s {shlex.quote(item.content)} > {shlex.quote(item.remote)}" for item in shipped
    ]
    exported = {k: rewrite(v, places) for k, v in env.items()}
    for name, value in exported.items():
        # The roster's keys are checked so; the office's own additions are such names.
        if not ENV_KEY_RE.match(name):
            raise ShipError(f"{name!r} is not a variable name a shell can export; rename it.")
        lines.append(f"export {name}={shlex.quote(value)}")
    lines.append(f'export PATH={shlex.quote(venv_bin + ":")}"$PATH"')
    words = ["umask", "077", "&&", ".", script, "&&", "cd", remote_path_word(cwd)]
    words += ["&&", "exec", *(shlex.quote(rewrite(a, places)) for a in argv)]
    command = " ".join(words)
    size = len(command.encode()) + sum(len(f"{k}={v}".encode()) + 1 for k, v in exported.items())
    if size > COMMAND_MAX:
        raise ShipError(
            f"the launch is {size // 1024} KiB, more than the {COMMAND_MAX // 1024} KiB a "
            "remote desk's command and environment can carry; shorten the agent's prompt, "
            "config or env."
        )
    return RemoteStart(command=command, script=" &&\n".join(lines) + "\n")


def main_extra(rdir: str, ssh_log: str, hook_socket: str, control_socket: str) -> list[str]:
    """The desk's own connection: a terminal, its log, and the two forwarded sockets
    (the connection fails rather than run without them)."""
    return [
        "-tt",
        "-o", "ExitOnForwardFailure=yes",
        "-E", ssh_log,
        "-R", f"{rdir}/hook.sock:{hook_socket}",
        "-R", f"{rdir}/control.sock:{control_socket}",
    ]  # fmt: skip


# --- a dropped link -------------------------------------------------------------------


def link_reason(log_text: str, fallback: str) -> str:
    """Why the link dropped: the last meaningful line ssh wrote to its -E log."""
    for line in reversed(log_text.splitlines()):
        line = line.strip()
        if line and not line.startswith(("Warning: Permanently added", "debug")):
            return line[:300]
    return fallback


# What ssh itself says on the terminal when a link breaks (these go to the tty, not to
# the -E log): "Connection to H closed by remote host.", "client_loop: send disconnect:
# Broken pipe", "Timeout, server H not responding.".
_LINK_WORDS = ("Connection to ", "client_loop:", "Timeout, server ", "Connection reset")
TAIL_BYTES = 512  # how much of a remote desk's last output is kept to find that line


def tail_reason(tail: bytes) -> str | None:
    """ssh's own line about a broken link at the end of the desk's output, if any."""
    text = tail.decode(errors="replace")
    for line in reversed(re.split(r"[\r\n]+", text)):
        line = stripped(line, sequences=True)
        # From ssh's own words on: the shell's prompt may share the line.
        at = min((line.find(w) for w in _LINK_WORDS if w in line), default=-1)
        if at >= 0:
            return line[at:].strip()[:300]
    return None


@dataclass(frozen=True)
class Reconnect:
    delay: float  # seconds before the next attempt
    tell: bool  # tell the manager now (the host failed TELL_AFTER attempts in a row)


def reconnect_plan(failures: int, told: bool) -> Reconnect:
    """After `failures` failed links in a row (1 = the first drop): wait 1, 2, 4 ... s,
    capped at BACKOFF_CAP_S; tell the manager once a host has failed TELL_AFTER times,
    unless it was told already (and the host has not come back since)."""
    delay = min(BACKOFF_CAP_S, float(2 ** min(max(failures, 1) - 1, 16)))
    return Reconnect(delay=delay, tell=failures >= TELL_AFTER and not told)


def tell_text(host: str, agent_id: str, failures: int, reason: str) -> tuple[str, str]:
    """The manager's notice about a host that stays down: (subject, body)."""
    return (
        f"{host} is unreachable",
        f"The office cannot reach {host}, where {agent_id} runs: {failures} attempts in a "
        f"row failed ({reason}). Mail to it waits; the office keeps trying (every "
        f"{BACKOFF_CAP_S:g} s at most) and resumes its session when the host is back.",
    )
