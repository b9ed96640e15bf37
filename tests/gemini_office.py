"""An office of a shell manager (michael, hookless) and jim, a real Gemini CLI desk
pointed at the scripted Gemini API on 127.0.0.1 (its streamGenerateContent speaks the
real SSE protocol and records what Gemini sent), shared by the gemini end-to-end tests.
Jim's roster `env` holds GEMINI_API_KEY (unless asked not to) and GOOGLE_GEMINI_BASE_URL;
the person's environment holds no Gemini key or login and an empty HOME."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hive_core.demo.scripted_model import Scenario, Turn
from hive_core.demo.scripted_model.gemini import ScriptedGemini
from tests.support import wait_for

BIN = Path(sys.executable).parent
GEMINI = shutil.which("gemini", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
API_KEY = "AIza-scripted-0123456789abcdefghijkl"


@dataclass
class GeminiFloor:
    root: Path
    home: Path
    project: Path
    model: ScriptedGemini
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    # --- the office -----------------------------------------------------------------

    def serve(self) -> None:
        """Start `hive-office serve` and wait for jim's SessionStart."""
        log = (self.root / "serve.log").open("ab")
        self.procs.append(
            subprocess.Popen(
                [str(BIN / "hive-office"), "serve", "--home", str(self.home)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        wait_for(
            lambda: self.jim().get("session_id") and self.jim().get("status") == "idle",
            "jim's SessionStart",
            timeout=90,
        )

    def stop(self) -> None:
        """Stop the office as the person does (SIGTERM), and wait for it."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()

    def registry(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads((self.home / "hive" / "registry.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return {a["id"]: a for a in data["agents"]}

    def jim(self) -> dict[str, Any]:
        return self.registry().get("jim", {})

    def run(self, *args: str, agent: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "HIVE_HOME": str(self.home)}
        if agent:
            env["HIVE_AGENT_ID"] = agent
        result = subprocess.run(
            [str(BIN / args[0]), *args[1:]], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        return result

    def type(self, text: str) -> None:
        self.run("hive-office", "type", "--home", str(self.home), "jim", text)

    def why(self) -> dict[str, Any]:
        out = self.run("hive-office", "why", "--home", str(self.home), "jim", "--json").stdout
        data: dict[str, Any] = json.loads(out)
        return data

    def log(self) -> list[str]:
        lines = (self.home / "hive" / "log.jsonl").read_text().splitlines()
        return [e["detail"] for e in map(json.loads, lines) if e.get("agent") == "jim"]

    def inbox(self, who: str) -> list[dict[str, Any]]:
        folder = self.home / "hive" / ("human" if who == "human" else f"agents/{who}") / "inbox"
        return [json.loads(p.read_text()) for p in sorted(folder.glob("2*.json"))]

    def mail_jim(self, subject: str) -> str:
        """A message from the person to jim; its id once delivered."""
        before = {m["id"] for m in self.inbox("jim")}
        self.run("hive", "send", "--to", "jim", "--subject", subject, "--body", "please answer")
        new = wait_for(
            lambda: [m["id"] for m in self.inbox("jim") if m["id"] not in before], "delivery"
        )
        return str(new[0])

    # --- what Gemini did ------------------------------------------------------------

    @property
    def gemini_home(self) -> Path:
        return self.home / "agent-settings" / "gemini" / "jim"

    def chats(self) -> list[Path]:
        return sorted((self.gemini_home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))


def make_gemini_floor(
    root: Path,
    jim: Sequence[Turn],
    *,
    jim_options: str = "",
    more: str = "",
    office_options: str = "",
    key: bool = True,
) -> GeminiFloor:
    """Create (not start) the office under `root`. `jim_options`: more TOML lines for
    jim's roster entry; `more`: roster text after it; `office_options`: for [office];
    `key`: whether jim's `env` holds GEMINI_API_KEY."""
    home, project, user_home = root / "home", root / "project", root / "user"
    for folder in (home, project, user_home):
        folder.mkdir(parents=True, exist_ok=True)
    model = ScriptedGemini(Scenario(list(jim), fallback="Noted."))
    model.start()
    (home / "office.toml").write_text(
        f'[office]\nmanager = "michael"\n{office_options}'
        '\n[[agents]]\nid = "michael"\nname = "Michael"\nrole = "Manager"\n'
        f'provider = "shell"\ncwd = "{project}"\n'
        '\n[[agents]]\nid = "jim"\nname = "Jim"\nrole = "Engineer"\n'
        f'provider = "gemini"\ncwd = "{project}"\n'
        + (f'env = {{ GEMINI_API_KEY = "{API_KEY}", ' if key else "env = { ")
        + f'GOOGLE_GEMINI_BASE_URL = "{model.base_url}" }}\n'
        + jim_options
        + more
    )
    # The person's environment: no Gemini key or login of its own, an empty HOME
    # (which must stay so: the desk's Gemini home is the office's).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GEMINI_", "GOOGLE_", "HIVE_", "TMUX"))
    }
    env.update(HOME=str(user_home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    subprocess.run(
        [str(BIN / "hive-office"), "init", "--home", str(home)],
        env=env,
        check=True,
        capture_output=True,
    )
    return GeminiFloor(root, home, project, model, env)
