"""An office with one real Codex CLI desk pointed at a scripted Responses API on
127.0.0.1, beside a shell desk as its manager (shared by the codex end-to-end tests; the
liveness bench configures its codex desk the same way).

The desk is configured as a person would: its key in the roster's `env`, the stand-in as
a model provider of Codex's own settings (`-c model_providers...` on its `command`), and
by default a model of the gpt-5.1-codex family (whose tools are plain functions a script
can call; see hive_core/demo/scripted_model/responses.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from hive_core.demo.scripted_model import Scenario, Turn
from hive_core.demo.scripted_model.responses import MODEL, ScriptedResponses
from tests.claude_office import BIN, ClaudeOffice
from tests.support import wait_for

CODEX = shutil.which("codex", path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
API_KEY = "sk-scripted-codex-0123456789abcdef"
MANAGER = "michael"
DESK = "dwight"


def make_codex_office(
    root: Path,
    turns: Sequence[Turn],
    *,
    stop_block_cap: int = 3,
    options: str = "",
    office_options: str = "",
    model: str | None = MODEL,
) -> ClaudeOffice:
    """Create (not start) the office. `options`: more TOML lines for the codex desk's
    roster entry; `office_options`: for [office]; `model` None: Codex's default."""
    home, project = root / "home", root / "project"
    project.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    api = ScriptedResponses(Scenario(list(turns), fallback="Noted."))
    api.start()
    # A provider of the desk's own (Codex's built-in one tries a WebSocket first) that
    # still takes the login Codex stores: the sign-in screen shows unless it has one.
    provider = [
        'model_provider="standin"',
        'model_providers.standin.name="stand-in"',
        f'model_providers.standin.base_url="{api.base_url}/v1"',
        "model_providers.standin.requires_openai_auth=true",
        "model_providers.standin.supports_websockets=false",
        # Codex's bubblewrap sandbox cannot start in an unprivileged container ("bwrap:
        # setting up uid map: Permission denied"): commands run unsandboxed here. The
        # office's own policy is its PreToolUse hook, which runs either way.
        'sandbox_mode="danger-full-access"',
    ]
    command = ", ".join(json.dumps(a) for c in provider for a in ("-c", c))
    roster = (
        f'[office]\nmanager = "{MANAGER}"\nstop_block_cap = {stop_block_cap}\n{office_options}\n'
        f'[[agents]]\nid = "{MANAGER}"\nname = "Michael"\nrole = "Manager"\n'
        f'provider = "shell"\ncwd = "{project}"\n'
        f'\n[[agents]]\nid = "{DESK}"\nname = "Dwight"\nrole = "Engineer"\n'
        f'provider = "codex"\n{f"model = {json.dumps(model)}" if model else ""}\n'
        f'cwd = "{project}"\n'
        f'command = ["codex", {command}]\n'
        f'env = {{ OPENAI_API_KEY = "{API_KEY}" }}\n{options}'
    )
    home.mkdir(parents=True, exist_ok=True)
    (home / "office.toml").write_text(roster)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HIVE_", "OPENAI_", "CODEX_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run(
        [str(BIN / "hive-office"), "init", "--home", str(home)],
        env=env,
        check=True,
        capture_output=True,
    )
    return ClaudeOffice(root, home, project, {DESK: api}, env)


def model_of(office: ClaudeOffice) -> ScriptedResponses:
    model = office.models[DESK]
    assert isinstance(model, ScriptedResponses)
    return model


@contextmanager
def serving_codex(
    office: ClaudeOffice, log: Path, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`hive-office serve` until the codex desk reported its session and its first
    turn (the one that opens the session) is over."""
    proc = subprocess.Popen(
        [str(BIN / "hive-office"), "serve", "--home", str(office.home)],
        env={**office.env, **(env or {})},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: (
                office.registry().get(DESK, {}).get("session_id")
                and office.registry()[DESK]["status"] == "idle"
                and any(e["detail"].startswith("Stop: turn ended") for e in office.log(DESK))
            ),
            f"{DESK}: SessionStart and the end of its first turn",
            timeout=120,
        )
        yield proc
    finally:
        stop_serving(proc)


def stop_serving(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
