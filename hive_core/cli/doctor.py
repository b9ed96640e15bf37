"""`hive-office doctor`: what is installed, what runs, and what to fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pygit2

from hive_core.agents.provider import tool_path
from hive_core.agents.providers import providers
from hive_core.committer import COMMIT_COMPONENT, check_repo, held_lock
from hive_core.config import ConfigError, load_office
from hive_core.desks.supervisor import LOGIN_COMPONENT
from hive_core.health import read_health
from hive_core.hint import office_command
from hive_core.paths import SOCKET_PATH_MAX, HivePaths
from hive_core.schema import AgentSpec


@dataclass(frozen=True)
class Check:
    ok: bool
    what: str
    fix: str = ""


def run_checks(paths: HivePaths) -> list[Check]:
    checks: list[Check] = [Check(True, f"Python {sys.version.split()[0]} at {sys.executable}")]
    run_init = f"run `{office_command(paths.home, 'init')}`"
    if not paths.office_toml.exists():
        return [*checks, Check(False, f"no office in {paths.home}", run_init)]
    try:
        config = load_office(paths.office_toml)
    except ConfigError as e:
        return [*checks, Check(False, "office.toml is invalid", str(e))]
    checks.append(
        Check(True, f"office.toml: {len(config.agents)} agents, manager {config.office.manager}")
    )
    pid = _office_pid(paths)
    try:
        repo = pygit2.Repository(str(paths.hive))
    except pygit2.GitError:
        checks.append(Check(False, f"{paths.hive} is not a git repo", run_init))
    else:
        refusal = check_repo(repo)
        if refusal:
            checks.append(Check(False, refusal))
        else:
            head = "no commits yet" if repo.head_is_unborn else f"HEAD {str(repo.head.target)[:8]}"
            checks.append(Check(True, f"hive git repo at {paths.hive} ({head})"))
        # A running office holds the index's lock for each commit of its own: its health
        # says when a lock outlives that (committer.LOCK_REPORT_AFTER).
        lock = None if pid else held_lock(repo)
        if lock:
            checks.append(Check(False, lock))
    # A remote desk adds its own pair (its ssh master shares no connection when too long).
    desks = [
        paths.desk_socket(a.id, kind)
        for a in config.agents
        if a.host
        for kind in ("hook", "control")
    ]
    longest = max(
        paths.hook_socket,
        paths.control_socket,
        paths.kick_socket,
        *desks,
        key=lambda p: len(str(p)),
    )
    if len(str(longest)) > SOCKET_PATH_MAX:
        checks.append(
            Check(
                False,
                f"socket path {longest} is longer than {SOCKET_PATH_MAX} bytes",
                "use a shorter --home (e.g. ~/.hive-office)",
            )
        )
    checks.append(
        Check(
            True,
            f"office running (pid {pid})"
            if pid
            else f"office not running (`{office_command(paths.home)}` starts it)",
        )
    )
    if pid:
        checks.extend(_health_checks(paths, pid, config.office.prefix_key))
    checks.append(_semantic_check(paths))
    search = os.pathsep.join([*tool_path(), os.environ.get("PATH", "")])
    known = providers()
    # A desk on another machine runs its CLI in its working folder there: what this
    # machine has says nothing about it (_remote_checks asks the host).
    for agent in (a for a in config.agents if a.host is None):
        provider = known[agent.provider]
        program = provider.executable(agent)
        found = shutil.which(program, path=search)
        if found:
            checks.append(Check(True, f"{agent.id}: {agent.provider} -> {found}{_version(found)}"))
        else:
            checks.append(
                Check(False, f"{agent.id}: `{program}` not found", provider.install_hint())
            )
        cwd = Path(agent.cwd).expanduser()
        if not cwd.is_dir():
            checks.append(
                Check(
                    False,
                    f"{agent.id}: working folder {cwd} does not exist",
                    f"create it or change `cwd` for {agent.id} in office.toml",
                )
            )
    checks.extend(_login_checks(paths, config.agents, config.office.manager))
    checks.extend(_remote_checks(paths, config.agents, config.office.remote_venv))
    return checks


def _login_checks(paths: HivePaths, agents: list[AgentSpec], manager: str) -> list[Check]:
    """Whether each local desk finds a login, read from its environment and the files
    its CLI reads (hive_core/agents/login.py): no CLI is run, nothing goes out. Desks
    alike are one line. Only claude's is checked to the end (no login fails doctor);
    codex and gemini desks are told what they would use."""
    from hive_core.agents.claude import claude_command
    from hive_core.agents.codex import codex_home
    from hive_core.agents.gemini import shared_login
    from hive_core.agents.login import (
        ClaudeLogin,
        LoginReader,
        codex_login,
        desk_env,
        first_claude,
        gemini_login,
        office_sentence,
    )

    local = [a for a in agents if a.host is None and not a.archived and not a.send_only]
    read = LoginReader()
    claude: dict[ClaudeLogin, list[str]] = {}
    for agent in (a for a in local if a.provider == "claude"):
        claude.setdefault(read(desk_env(agent.env)), []).append(agent.id)
    first = first_claude(agents, manager)
    pane = first.name if first else "the manager"
    checks = []
    for login, ids in claude.items():
        who = ", ".join(ids)
        if login.source is None:
            fix = (
                f"log in once: run `{claude_command()}` and type /login (or set "
                "ANTHROPIC_API_KEY, in the environment or a desk's `env` in office.toml); "
                f"or open the office (`{office_command(paths.home)}`) and log in in {pane}'s "
                "pane, the other desks follow"
            )
            checks.append(Check(False, f"{who}: no Claude login", fix))
        else:
            then = "" if login.ready else f"; {office_sentence(login, pane, paths)}"
            checks.append(Check(True, f"{who}: Claude login {login.source}{then}"))
    for agent in local:
        env = desk_env(agent.env)
        if agent.provider == "codex":
            found = codex_login(env, (codex_home(paths, agent.id) / "auth.json").is_file())
        elif agent.provider == "gemini":
            found = gemini_login(env, shared_login(paths).is_file())
        else:
            continue
        checks.append(
            Check(
                True,
                f"{agent.id}: {agent.provider} login {found}"
                if found
                else f"{agent.id}: no {agent.provider} key or login yet; it asks in its pane",
            )
        )
    return checks


def _remote_checks(paths: HivePaths, agents: list[AgentSpec], remote_venv: str) -> list[Check]:
    """Each remote desk's host, over one ssh call: reachable, `hive` at this version,
    each agent's CLI and working folder there (hive_core/remote/check.py)."""
    from hive_core.remote import check

    known = providers()

    def program(agent: AgentSpec) -> str:
        return known[agent.provider].executable(agent)

    def hint(agent: AgentSpec) -> str:
        return known[agent.provider].install_hint(here=False)

    here = check.local_version()
    return [
        Check(f.ok, f.what, f.fix)
        for result in check.check_hosts(agents, paths, remote_venv, program)
        for f in check.findings(result, remote_venv, here, hint, program)
    ]


def _semantic_check(paths: HivePaths) -> Check:
    """Whether memory search can run in semantic and hybrid mode, told without loading
    the model (torch takes seconds to import): the extra's modules found, the weights'
    files in place, and with an office running, whether it has loaded the model. The
    extra is optional, so its absence is not a problem, only a way to enable it."""
    from hive_core.caller import CallerError
    from hive_core.memory import embed, served

    if absent := embed.missing():
        return Check(
            True,
            f"semantic memory search: not installed ({', '.join(absent)} missing); "
            "keyword search works",
            f"to enable it: {embed.INSTALL_HINT}",
        )
    if problem := embed.model_problem():
        return Check(
            False,
            f"semantic memory search: installed but cannot load ({problem})",
            f"reinstall it: {embed.INSTALL_HINT}",
        )
    what = f"semantic memory search: ready ({embed.MODEL_NAME}"
    try:
        stands = served.status(paths)
    except CallerError as exc:
        return Check(True, f"{what}; whether the office has it loaded is unknown: {exc})")
    if stands is None:
        return Check(True, f"{what}; the office loads it at the first semantic search)")
    if stands.state == "unavailable":
        return Check(
            False,
            f"semantic memory search: the office cannot load the model ({stands.why})",
            f"reinstall it: {embed.INSTALL_HINT}, then restart the office",
        )
    told = {
        "idle": "the office loads it at the first semantic search",
        "loading": "the office is loading it",
        "ready": f"loaded in the office (loads this run: {stands.loads})",
    }
    return Check(True, f"{what}; {told[stands.state]})")


def _health_checks(paths: HivePaths, pid: int, prefix: str) -> list[Check]:
    """What the running office says is wrong with it (hive_core/health.py)."""
    health = read_health(paths.health_file)
    if health is None or health.pid != pid:
        return [Check(False, "the running office has not published its health", "see `hive log`")]
    return [
        Check(
            False, f"{p.component}: {p.detail} (since {p.since})", _fix(paths, p.component, prefix)
        )
        for p in health.problems
    ]


def _fix(paths: HivePaths, component: str, prefix: str) -> str:
    kind, _, name = component.partition(":")
    if kind == "agent":
        # The detail already says what to do about the cause; this is how to retry.
        spawn = office_command(paths.home, "spawn", name)
        return f"then start it again: `{spawn}` ({prefix} r in the app)"
    if component in (LOGIN_COMPONENT, COMMIT_COMPONENT):
        return ""  # the detail is the sentence that says what to do
    return "see `hive log` for the cause"


def _office_pid(paths: HivePaths) -> int | None:
    try:
        pid = int(paths.pid_file.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return None


def _version(program: str) -> str:
    try:
        out = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    first = (out.stdout or out.stderr).strip().splitlines()
    return f" ({first[0]})" if first else ""
