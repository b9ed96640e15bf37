"""What `hive-office doctor` learns about each remote desk's host: one ssh call per host.

For every distinct (host, ssh_args) among the agents with a `host`, one ssh connection
runs a small POSIX sh probe (`probe_script`) that prints machine-readable lines; the
parse (`parse_probe`), the reading of ssh's failures (`classify_ssh_failure`) and the
findings (`findings`) are pure, so they are tested without a host.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

from hive_core.paths import HivePaths
from hive_core.remote.ssh import SSH_FAILED, remote_path_word, ssh_argv
from hive_core.schema import AgentSpec

# Every line the probe means is tagged: a login shell's rc files may print lines of
# their own, and those are not the probe's.
TAG = "hive-probe"
# The whole probe (login, a few `--version`s) finishes well within this on a live host.
PROBE_TIMEOUT_S = 90.0
# One `--version` that hangs must not hold the probe up past this (where the host has
# coreutils' `timeout`).
VERSION_TIMEOUT_S = 15


def local_version() -> str:
    try:
        return version("hive-office")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Cli:
    """An agent's CLI on the host: where `command -v` found it (None: not found)."""

    path: str | None
    version: str = ""


@dataclass(frozen=True)
class Probe:
    """What the probe printed. `hive`: the first line of `<venv>/bin/hive --version`, or
    None when there is no such program."""

    home: str | None
    hive: str | None
    cth_hook: bool
    clis: dict[str, Cli] = field(default_factory=dict)
    cwd_missing: frozenset[str] = frozenset()


@dataclass(frozen=True)
class HostResult:
    """One host's check: the probe's answer, or why there is none (a sentence)."""

    host: str
    ssh_args: tuple[str, ...]
    agents: tuple[AgentSpec, ...]
    probe: Probe | None
    error: str | None = None


@dataclass(frozen=True)
class Finding:
    ok: bool
    what: str
    fix: str = ""


def _field(text: str) -> str:
    return shlex.quote(text)


def probe_script(remote_venv: str, agents: Sequence[tuple[str, str, str]]) -> str:
    """The sh probe for one host. `agents`: (id, program, cwd) of each agent there.

    Lines printed, tab-separated, each starting with TAG:
        home <$HOME>
        hive <first line of --version> | hive-missing
        cth-hook yes | cth-hook no
        cli <id> <path> <first line of --version> | cli-missing <id>
        cwd-missing <id>
    The venv's bin/ comes first on PATH, as on the desk itself.
    """
    t = TAG
    lines = [
        f"venv={remote_path_word(remote_venv)}",
        'PATH="$venv/bin:$PATH"; export PATH',
        # One line, no tabs or carriage returns: the parse splits on them.
        "v() { if command -v timeout >/dev/null 2>&1; then "
        f'timeout {VERSION_TIMEOUT_S} "$1" --version; else "$1" --version; fi </dev/null 2>&1 '
        "| head -n 1 | tr -d '\\t\\r'; }",
        f"printf '{t}\\thome\\t%s\\n' \"$HOME\"",
        'if [ -x "$venv/bin/hive" ]; then '
        f'printf \'{t}\\thive\\t%s\\n\' "$(v "$venv/bin/hive")"; '
        f"else printf '{t}\\thive-missing\\n'; fi",
        'if [ -x "$venv/bin/cth-hook" ]; then '
        f"printf '{t}\\tcth-hook\\tyes\\n'; else printf '{t}\\tcth-hook\\tno\\n'; fi",
    ]
    for agent_id, program, cwd in agents:
        a = _field(agent_id)
        lines += [
            f"p=$(command -v {_field(program)} 2>/dev/null)",
            'if [ -n "$p" ]; then '
            f'printf \'{t}\\tcli\\t%s\\t%s\\t%s\\n\' {a} "$p" "$(v "$p")"; '
            f"else printf '{t}\\tcli-missing\\t%s\\n' {a}; fi",
            f"[ -d {remote_path_word(cwd)} ] || printf '{t}\\tcwd-missing\\t%s\\n' {a}",
        ]
    return "\n".join(lines) + "\n"


def remote_command(script: str) -> str:
    """The probe as the one string ssh hands the login shell, whatever shell that is."""
    return f"exec sh -c {shlex.quote(script)}"


def parse_probe(stdout: str) -> Probe | None:
    """The probe's lines in `stdout` (others ignored); None if it printed none."""
    home: str | None = None
    hive: str | None = None
    cth_hook = False
    clis: dict[str, Cli] = {}
    cwd_missing: set[str] = set()
    seen = False
    for line in stdout.splitlines():
        words = line.rstrip("\r").split("\t")
        if len(words) < 2 or words[0] != TAG:
            continue
        seen = True
        kind, rest = words[1], words[2:]
        if kind == "home" and rest:
            home = rest[0]
        elif kind == "hive":
            hive = rest[0] if rest else ""
        elif kind == "cth-hook" and rest:
            cth_hook = rest[0] == "yes"
        elif kind == "cli" and len(rest) >= 2:
            clis[rest[0]] = Cli(rest[1], rest[2] if len(rest) > 2 else "")
        elif kind == "cli-missing" and rest:
            clis[rest[0]] = Cli(None)
        elif kind == "cwd-missing" and rest:
            cwd_missing.add(rest[0])
    if not seen:
        return None
    return Probe(home, hive, cth_hook, clis, frozenset(cwd_missing))


def version_of(line: str) -> str:
    """The version in a `--version` line: click's "hive, version 0.1.0" -> "0.1.0"."""
    found = re.search(r"version\s+(\S+)", line)
    if found:
        return found.group(1)
    words = line.split()
    return words[-1] if words else ""


def classify_ssh_failure(host: str, stderr: str) -> str:
    """What to do about an ssh that exited 255, read from what it said (a sentence)."""
    text = stderr.lower()
    if "host key verification failed" in text or "remote host identification" in text:
        return (
            f"ssh does not know or no longer trusts the host key of {host}: connect once with "
            f"`ssh {host}` and check the key, or fix its line in ~/.ssh/known_hosts."
        )
    if "permission denied" in text:
        return (
            f"{host} refused the login: the office logs in with keys only (no password prompt), "
            f"so put your public key on it (`ssh-copy-id {host}`) or load the key into ssh-agent."
        )
    if "connection refused" in text:
        return (
            f"nothing accepts ssh connections at {host}: start sshd there, or give the right "
            'port in the agent\'s ssh_args (e.g. ["-p", "2222"]).'
        )
    if "could not resolve hostname" in text or "name or service not known" in text:
        return (
            f"ssh cannot resolve the name {host}: fix `host` in office.toml or give it a "
            "HostName in ~/.ssh/config."
        )
    if "timed out" in text or "no route to host" in text or "network is unreachable" in text:
        return (
            f"{host} did not answer: check that it is up and reachable from here "
            "(network, VPN, firewall)."
        )
    last = [line.strip() for line in stderr.splitlines() if line.strip()]
    if last:
        return f"ssh to {host} failed: {last[-1]}"
    return f"ssh to {host} failed without saying why: try `ssh -v {host} true` to see."


def _groups(agents: Sequence[AgentSpec]) -> dict[tuple[str, tuple[str, ...]], list[AgentSpec]]:
    groups: dict[tuple[str, tuple[str, ...]], list[AgentSpec]] = {}
    for agent in agents:
        if agent.host is not None:
            groups.setdefault((agent.host, tuple(agent.ssh_args)), []).append(agent)
    return groups


def check_host(
    agents: Sequence[AgentSpec],
    paths: HivePaths,
    remote_venv: str,
    program: Callable[[AgentSpec], str],
) -> HostResult:
    """Run the probe on the host of `agents` (all on one host with the same ssh_args)."""
    first = agents[0]
    assert first.host is not None
    script = probe_script(remote_venv, [(a.id, program(a), a.cwd) for a in agents])
    argv = ssh_argv(first, paths, remote_command(script), extra=("-T",))
    result = HostResult(first.host, tuple(first.ssh_args), tuple(agents), None)
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        return _with_error(result, "there is no `ssh` here: install the OpenSSH client.")
    except subprocess.TimeoutExpired:
        return _with_error(
            result,
            f"the check on {first.host} did not finish within {PROBE_TIMEOUT_S:.0f} s: "
            f"see whether `ssh {first.host} true` logs in.",
        )
    if done.returncode == SSH_FAILED:
        return _with_error(result, classify_ssh_failure(first.host, done.stderr))
    probe = parse_probe(done.stdout)
    if probe is None:
        last = [line for line in done.stderr.splitlines() if line.strip()]
        said = f": {last[-1].strip()}" if last else ""
        return _with_error(
            result,
            f"the check on {first.host} printed nothing it could read (exit {done.returncode}"
            f"{said}); the host needs a POSIX sh.",
        )
    return HostResult(result.host, result.ssh_args, result.agents, probe)


def _with_error(result: HostResult, error: str) -> HostResult:
    return HostResult(result.host, result.ssh_args, result.agents, None, error)


def check_hosts(
    agents: Sequence[AgentSpec],
    paths: HivePaths,
    remote_venv: str,
    program: Callable[[AgentSpec], str],
) -> list[HostResult]:
    """One probe per distinct (host, ssh_args) among `agents`, run side by side (a host
    that does not answer costs its connect timeout, not everyone's)."""
    groups = list(_groups(agents).values())
    if not groups:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(groups))) as pool:
        return list(pool.map(lambda g: check_host(g, paths, remote_venv, program), groups))


def findings(
    result: HostResult,
    remote_venv: str,
    here: str,
    install_hint: Callable[[AgentSpec], str],
    program: Callable[[AgentSpec], str],
) -> list[Finding]:
    """What doctor says about one host: reachable, `hive` and `cth-hook` in the remote
    venv at this machine's version (`here`), each agent's CLI and working folder."""
    host = result.host
    names = ", ".join(a.id for a in result.agents)
    setup = f"run `hive-office remote-setup {host}`"
    if result.probe is None:
        return [Finding(False, f"{host} (for {names}): not reachable over ssh", result.error or "")]
    probe = result.probe
    out = [Finding(True, f"{host} (for {names}): reachable over ssh, $HOME {probe.home}")]
    if probe.hive is None:
        out.append(
            Finding(
                False,
                f"{host}: `hive` is not installed in {remote_venv}",
                f"{setup} to install it there",
            )
        )
    else:
        there = version_of(probe.hive)
        if there != here:
            out.append(
                Finding(
                    False,
                    f"{host}: hive {there or '(no version)'} in {remote_venv}, "
                    f"but this machine has {here}",
                    f"{setup} to install this version there",
                )
            )
        else:
            out.append(Finding(True, f"{host}: hive {there} in {remote_venv}"))
        if not probe.cth_hook:
            out.append(
                Finding(
                    False,
                    f"{host}: `cth-hook` is missing from {remote_venv}",
                    f"{setup} to install it again",
                )
            )
    for agent in result.agents:
        cli = probe.clis.get(agent.id)
        name = program(agent)
        if cli is None or cli.path is None:
            out.append(
                Finding(
                    False,
                    f"{agent.id}: `{name}` not found on {host}",
                    f"on {host}: {install_hint(agent)}",
                )
            )
        else:
            shown = f" ({cli.version})" if cli.version else ""
            out.append(
                Finding(True, f"{agent.id}: {agent.provider} on {host} -> {cli.path}{shown}")
            )
        if agent.id in probe.cwd_missing:
            out.append(
                Finding(
                    False,
                    f"{agent.id}: working folder {agent.cwd} does not exist on {host}",
                    f"create it on {host} or change `cwd` for {agent.id} in office.toml",
                )
            )
    return out
