"""The codex provider's sign-in and first turn: a key in the desk's environment is stored
as the login Codex 0.169 itself stores for a key (`codex login --with-api-key`), in the
desk's own CODEX_HOME, so its TUI opens without the sign-in screen; a login the person
made is never replaced. (tests/e2e/test_codex_desk.py runs the real binary on it.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import pytest

from hive_core.agents.codex import AUTH_FILE, START_PROMPT, CodexProvider, api_key_login, codex_home
from hive_core.agents.provider import LaunchContext
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec

CODEX = shutil.which("codex", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def ctx_for(
    tmp_path: Path,
    env: dict[str, str],
    roster_env: dict[str, str] | None = None,
    first_prompt: str | None = None,
) -> LaunchContext:
    (tmp_path / "repo").mkdir(parents=True, exist_ok=True)
    agent = AgentSpec(
        id="jim", name="Jim", provider="codex", cwd=str(tmp_path / "repo"), env=roster_env or {}
    )
    return LaunchContext(
        paths=HivePaths(tmp_path / "home"),
        agent=agent,
        secret="s3cret",
        session_id=str(uuid4()),
        resume=False,
        system_prompt="You are Jim.",
        hook_command=["/abs/cth-hook"],
        path_prepend=["/abs/venv/bin"],
        base_env={"PATH": "/usr/bin", "HOME": str(tmp_path / "userhome"), **env},
        first_prompt=first_prompt,
    )


def stored(tmp_path: Path) -> dict[str, str] | None:
    path = codex_home(HivePaths(tmp_path / "home"), "jim") / AUTH_FILE
    return json.loads(path.read_text()) if path.exists() else None


def test_a_key_in_the_roster_env_is_stored_as_codexs_own_key_login(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, {}, roster_env={"OPENAI_API_KEY": "sk-roster"})
    CodexProvider().prepare(ctx)
    assert stored(tmp_path) == {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-roster"}
    path = codex_home(ctx.paths, "jim") / AUTH_FILE
    assert path.stat().st_mode & 0o777 == 0o600  # a secret: the desk's user only
    assert not (tmp_path / "userhome").exists()  # never ~/.codex


def test_codex_api_key_comes_first_and_a_new_key_replaces_the_stored_one(tmp_path: Path) -> None:
    CodexProvider().prepare(ctx_for(tmp_path, {"OPENAI_API_KEY": "sk-office"}))
    assert stored(tmp_path) == {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-office"}
    both = {"OPENAI_API_KEY": "sk-office", "CODEX_API_KEY": "sk-codex"}
    CodexProvider().prepare(ctx_for(tmp_path, both))
    assert stored(tmp_path) == {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-codex"}


def test_without_a_key_nothing_is_stored_and_codex_asks_in_the_pane(tmp_path: Path) -> None:
    CodexProvider().prepare(ctx_for(tmp_path, {}))
    assert stored(tmp_path) is None


def test_a_login_the_person_made_is_never_replaced(tmp_path: Path) -> None:
    chatgpt = b'{"auth_mode": "chatgpt", "tokens": {"refresh_token": "r"}}'
    assert api_key_login({"OPENAI_API_KEY": "sk-x"}, chatgpt) is None
    assert api_key_login({"OPENAI_API_KEY": "sk-x"}, b"not json") is None
    same = b'{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-x"}'
    assert api_key_login({"OPENAI_API_KEY": "sk-x"}, same) is None  # no rewrite needed
    assert api_key_login({}, None) is None
    # On disk: the ChatGPT login survives a start with a key set.
    home = codex_home(HivePaths(tmp_path / "home"), "jim")
    home.mkdir(parents=True)
    (home / AUTH_FILE).write_bytes(chatgpt)
    CodexProvider().prepare(ctx_for(tmp_path, {"OPENAI_API_KEY": "sk-x"}))
    assert (home / AUTH_FILE).read_bytes() == chatgpt


def test_a_link_planted_as_auth_json_is_not_followed(tmp_path: Path) -> None:
    home = codex_home(HivePaths(tmp_path / "home"), "jim")
    home.mkdir(parents=True)
    target = tmp_path / "elsewhere.json"
    target.write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "old"}')
    (home / AUTH_FILE).symlink_to(target)
    CodexProvider().prepare(ctx_for(tmp_path, {"OPENAI_API_KEY": "sk-new"}))
    assert json.loads(target.read_text())["OPENAI_API_KEY"] == "old"


def test_every_start_opens_the_session_with_a_first_turn(tmp_path: Path) -> None:
    plain = CodexProvider().prepare(ctx_for(tmp_path / "a", {}))
    assert plain.argv[-2:] == ["--", START_PROMPT]
    told = CodexProvider().prepare(ctx_for(tmp_path / "b", {}, first_prompt="-do the standup"))
    # After `--`, a prompt that starts with a dash is not read as an option.
    assert told.argv[-2:] == ["--", "-do the standup"]


@pytest.mark.skipif(CODEX is None, reason="codex CLI not found (run scripts/setup)")
def test_the_real_codex_reads_the_stored_login(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, {"OPENAI_API_KEY": "sk-scripted-key"})
    CodexProvider().prepare(ctx)
    home = codex_home(ctx.paths, "jim")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "userhome"), "CODEX_HOME": str(home)}
    status = subprocess.run(
        [str(CODEX), "login", "status"], env=env, capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 0, status.stderr
    assert "API key configured" in status.stdout + status.stderr


PATCH = (
    "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Add File: b.py\n+z\n*** End Patch"
)


def pre_tool(command: str) -> dict[str, object]:
    return {
        "hook_event_name": "PreToolUse",
        "session_id": "s",
        "cwd": "/repo",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }


def test_a_shell_call_codex_runs_as_apply_patch_is_an_edit_of_every_file_it_names() -> None:
    provider = CodexProvider()
    plain = provider.canonical(pre_tool(f"apply_patch <<'EOF'\n{PATCH}\nEOF"))
    assert plain is not None and plain.tool_name == "Edit"
    assert plain.tool_input["file_paths"] == ["src/a.py", "b.py"]
    assert plain.tool_input["file_path"] == "src/a.py"
    moved = provider.canonical(pre_tool(f"cd pkg && apply_patch <<'EOF'\n{PATCH}\nEOF"))
    assert moved is not None and moved.tool_input["file_paths"] == ["pkg/src/a.py", "pkg/b.py"]
    # Any other shell call stays a shell call, checked as one.
    other = provider.canonical(pre_tool("echo apply_patch > notes.txt"))
    assert other is not None and other.tool_name == "Bash" and "file_path" not in other.tool_input


def test_a_key_signed_in_at_one_desk_is_shared_and_a_chatgpt_login_is_not(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path / "home")
    pam = codex_home(paths, "pam")
    pam.mkdir(parents=True)
    # What Codex writes when the person enters a key in pam's pane.
    (pam / AUTH_FILE).write_text('{"auth_mode": "apikey", "OPENAI_API_KEY": "sk-typed"}')
    CodexProvider().prepare(ctx_for(tmp_path, {}))
    assert stored(tmp_path) == {"auth_mode": "apikey", "OPENAI_API_KEY": "sk-typed"}
    # A ChatGPT login elsewhere is never copied: its refresh token rotates.
    chatgpt = b'{"auth_mode": "chatgpt", "tokens": {"refresh_token": "r"}}'
    assert api_key_login({}, None, [chatgpt, None, b"junk"]) is None
    # A desk's own login stands: nothing shared over it.
    own = b'{"auth_mode": "chatgpt"}'
    assert api_key_login({}, own, [(pam / AUTH_FILE).read_bytes()]) is None
