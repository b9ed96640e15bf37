"""An office of real claude agents pointed at scripted Messages APIs on 127.0.0.1 (shared by
the event-plane, app and tmux tests). Each agent gets its own scripted model, through
the roster's per-agent env."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hive_core.demo.claude_env import claude_environment, write_claude_config
from hive_core.demo.scripted_model import Scenario, ScriptedModel, Turn
from hive_core.mail import write_draft
from hive_core.paths import HivePaths
from hive_core.schema import Act, Draft
from tests.support import wait_for

BIN = Path(sys.executable).parent
CLAUDE = shutil.which("claude", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
# Longer than 20 characters on purpose: the CLI approves a key by its last 20.
API_KEY = "sk-ant-scripted-0123456789abcdefghijklmnop"
AGENTS = ("michael", "jim")


@dataclass
class ClaudeOffice:
    root: Path
    home: Path
    project: Path
    models: dict[str, ScriptedModel]
    env: dict[str, str]

    def registry(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads((self.home / "hive" / "registry.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return {a["id"]: a for a in data["agents"]}

    def log(self, agent: str | None = None) -> list[dict[str, Any]]:
        lines = (self.home / "hive" / "log.jsonl").read_text().splitlines()
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if agent is None or e.get("agent") == agent]

    def run(
        self, *args: str, agent: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "HIVE_HOME": str(self.home)}
        env.pop("HIVE_AGENT_ID", None)
        env.pop("HIVE_SECRET", None)
        if agent:
            # The person acts for a desk only while its agent is not running (control.py):
            # a running agent's secret read from its environment is refused.
            env["HIVE_AGENT_ID"] = agent
        result = subprocess.run(
            [str(BIN / args[0]), *args[1:]], env=env, capture_output=True, text=True, timeout=60
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result

    def post_as(self, agent: str, to: str, subject: str, body: str, act: Act = "inform") -> Path:
        """A draft in `agent`'s outbox, as its CLI's `hive send` leaves one: what a running
        agent sends, where the test's own process may not act as it (control.py)."""
        draft = Draft(to=to, subject=subject, body=body, act=act)
        return write_draft(HivePaths(self.home).mailbox(agent), draft)

    def inbox(self, who: str) -> list[dict[str, Any]]:
        folder = self.home / "hive" / ("human" if who == "human" else f"agents/{who}") / "inbox"
        return [json.loads(p.read_text()) for p in sorted(folder.glob("2*.json"))]

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.home / "hive"), *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def agent_pids(self) -> set[int]:
        """Every live process that carries this office's HIVE_HOME (agents and their children)."""
        marker = f"HIVE_HOME={self.home}".encode()
        found = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                found.add(int(entry))
        return found

    def close(self) -> None:
        for model in self.models.values():
            model.stop()


def make_claude_office(
    root: Path,
    scenarios: Mapping[str, Sequence[Turn]],
    *,
    agents: Sequence[str] = AGENTS,
    stop_block_cap: int = 3,
    options: Mapping[str, str] | None = None,
) -> ClaudeOffice:
    """Create (not start) an office whose agents are claude against scripted models.
    `options`: more TOML lines for an agent's roster entry, by id."""
    home, project, config_dir = root / "home", root / "project", root / "claude"
    project.mkdir(parents=True, exist_ok=True)
    write_claude_config(config_dir, API_KEY, trusted=[project])
    models = {
        a: ScriptedModel(Scenario(list(scenarios.get(a, [])), fallback="Noted.")) for a in agents
    }
    for model in models.values():
        model.start()
    roster = f'[office]\nmanager = "{agents[0]}"\nstop_block_cap = {stop_block_cap}\n'
    for agent in agents:
        roster += (
            f'\n[[agents]]\nid = "{agent}"\nname = "{agent.title()}"\nrole = "Engineer"\n'
            f'provider = "claude"\ncwd = "{project}"\n'
            f'env = {{ ANTHROPIC_BASE_URL = "{models[agent].base_url}" }}\n'
            f"{(options or {}).get(agent, '')}"
        )
    home.mkdir(parents=True, exist_ok=True)
    (home / "office.toml").write_text(roster)
    env = claude_environment(
        base_url=models[agents[0]].base_url, api_key=API_KEY, config_dir=config_dir
    )
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run(
        [str(BIN / "hive-office"), "init", "--home", str(home)],
        env=env,
        check=True,
        capture_output=True,
    )
    return ClaudeOffice(root, home, project, models, env)


@contextmanager
def serving(office: ClaudeOffice, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`hive-office serve` for the office, output to `log`, until every agent of it has
    started its session and is idle; stopped as the person stops it (SIGTERM), and the
    scripted models with it."""
    agents = list(office.models)
    proc = subprocess.Popen(
        [str(BIN / "hive-office"), "serve", "--home", str(office.home)],
        env=office.env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: all(
                office.registry().get(a, {}).get("session_id")
                and office.registry()[a]["status"] == "idle"
                for a in agents
            ),
            f"{', '.join(agents)}: SessionStart",
            timeout=90,
        )
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        office.close()
