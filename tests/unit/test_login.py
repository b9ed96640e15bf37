"""Issue 23, a first start without a login (pure): what a claude desk will authenticate
with and whether it starts without asking, read from its environment and Claude Code's
files (facts of claude 2.1.197, hive_core/agents/login.py); the desk whose pane asks;
the sentences; the start-failure cause the screen groups by."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from hive_core.agents.login import (
    ClaudeLogin,
    Folder,
    LoginReader,
    approved_key_form,
    claude_login,
    claude_places,
    codex_login,
    demo_command,
    first_claude,
    gemini_login,
    office_sentence,
    waiting_notice,
)
from hive_core.desks.supervisor import start_failure, start_failure_cause
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec

HOME = Path("/home/pat")
KEY = "sk-ant-api03-0123456789abcdefghijklmnopqrstuvwxyz"
OAUTH = {"claudeAiOauth": {"accessToken": "sk-ant-oat01-x", "refreshToken": "r"}}


def login(
    env: Mapping[str, str],
    *,
    config: object = None,
    credentials: object = None,
    settings: object = None,
    platform: str = "linux",
    folder: Folder | None = None,
) -> ClaudeLogin:
    env = {"HOME": str(HOME), **env}
    places = claude_places(env)
    files = {
        places.config: None if config is None else json.dumps(config).encode(),
        places.credentials: None if credentials is None else json.dumps(credentials).encode(),
        places.settings[0]: None if settings is None else json.dumps(settings).encode(),
    }
    return claude_login(env, places, files, platform, folder)


DONE = {"hasCompletedOnboarding": True}


def test_nothing_is_no_login_and_the_first_desk_asks_for_one() -> None:
    found = login({})
    assert found == ClaudeLogin(source=None, ready=False, asks="a login")
    # Onboarding done without a login (the person logged out) is still no login.
    assert login({}, config=DONE).source is None
    # An emptied credential store (after /logout) is no login either.
    assert login({}, config=DONE, credentials={}).source is None


def test_the_stored_login_is_used_once_the_first_run_is_done() -> None:
    assert login({}, config=DONE, credentials=OAUTH) == ClaudeLogin(
        source="the login stored by /login", ready=True
    )
    # Logged in, but the first-run screens would still show (theme, ...): not ready.
    pending = login({}, credentials=OAUTH)
    assert (pending.source, pending.ready, pending.asks) == (
        "the login stored by /login",
        False,
        "its first-run questions",
    )
    # A Console login keeps its key in the global config.
    assert login({}, config={**DONE, "primaryApiKey": "sk"}).ready


def test_an_api_key_is_used_only_once_approved() -> None:
    new = login({"ANTHROPIC_API_KEY": KEY}, config=DONE)
    assert (new.source, new.ready, new.asks) == (
        "ANTHROPIC_API_KEY",
        False,
        "whether to use ANTHROPIC_API_KEY",
    )
    approved = {**DONE, "customApiKeyResponses": {"approved": [approved_key_form(KEY)]}}
    assert login({"ANTHROPIC_API_KEY": KEY}, config=approved).ready
    assert approved_key_form(KEY) == KEY[-20:]
    # Rejected: Claude Code passes over it to the stored login, or to none.
    rejected = {**DONE, "customApiKeyResponses": {"rejected": [KEY[-20:]]}}
    assert login({"ANTHROPIC_API_KEY": KEY}, config=rejected).source is None
    assert login({"ANTHROPIC_API_KEY": KEY}, config=rejected, credentials=OAUTH).ready
    # An empty variable is no key.
    assert login({"ANTHROPIC_API_KEY": ""}, config=DONE).source is None


def test_precedence_of_what_claude_code_reads() -> None:
    both = {"ANTHROPIC_AUTH_TOKEN": "t", "ANTHROPIC_API_KEY": KEY}
    assert login(both, config=DONE) == ClaudeLogin(source="ANTHROPIC_AUTH_TOKEN", ready=True)
    assert login({"CLAUDE_CODE_OAUTH_TOKEN": "t"}, config=DONE).ready
    assert login({"CLAUDE_CODE_USE_BEDROCK": "1"}, config=DONE).source == (
        "CLAUDE_CODE_USE_BEDROCK (the cloud provider's credentials)"
    )
    assert login({"CLAUDE_CODE_USE_VERTEX": "0"}, config=DONE).source is None
    helper = login({}, config=DONE, settings={"apiKeyHelper": "vault read key"})
    assert helper == ClaudeLogin(source="apiKeyHelper (Claude Code settings)", ready=True)
    # Settings' env applies like the environment's.
    via_settings = login({}, config=DONE, settings={"env": {"ANTHROPIC_AUTH_TOKEN": "t"}})
    assert via_settings.source == "ANTHROPIC_AUTH_TOKEN"


def test_macos_keeps_the_login_in_the_keychain() -> None:
    account = {**DONE, "oauthAccount": {"emailAddress": "pat@example.com"}}
    assert login({}, config=account, platform="darwin").ready
    # On Linux only the credential store counts.
    assert login({}, config=account, platform="linux").source is None


def test_unreadable_files_are_absent() -> None:
    env = {"HOME": str(HOME)}
    places = claude_places(env)
    files = {places.config: b"{not json", places.credentials: b"[1, 2]"}
    assert claude_login(env, places, files, "linux").source is None


def test_where_the_files_are() -> None:
    default = claude_places({"HOME": "/h"})
    assert default.config == Path("/h/.claude.json")
    assert default.credentials == Path("/h/.claude/.credentials.json")
    assert default.settings[0] == Path("/h/.claude/settings.json")
    moved = claude_places({"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"})
    assert (moved.config, moved.credentials) == (
        Path("/c/.claude.json"),
        Path("/c/.credentials.json"),
    )
    assert claude_places({"HOME": "/h"}, legacy_config_exists=True).config == Path(
        "/h/.claude/.config.json"
    )
    secure = claude_places(
        {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c", "CLAUDE_SECURESTORAGE_CONFIG_DIR": "/s"}
    )
    assert secure.credentials == Path("/s/.credentials.json")
    blank = claude_places(
        {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c", "CLAUDE_SECURESTORAGE_CONFIG_DIR": ""}
    )
    assert blank.credentials == Path("/h/.claude/.credentials.json")


def test_the_reader_sees_a_login_appear_and_go(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    read = LoginReader(platform="linux")
    assert read(env).source is None
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude.json").write_text(json.dumps(DONE))
    store = tmp_path / ".claude" / ".credentials.json"
    store.write_text(json.dumps(OAUTH))
    assert read(env) == ClaudeLogin(source="the login stored by /login", ready=True)
    store.write_text("{}")  # /logout empties it; the size differs from the cached one
    assert read(env).source is None
    # The legacy config in the config dir wins over ~/.claude.json.
    store.write_text(json.dumps(OAUTH))
    (tmp_path / ".claude" / ".config.json").write_text("{}")
    assert read(env).asks == "its first-run questions"


def spec(agent_id: str, **fields: object) -> AgentSpec:
    return AgentSpec(id=agent_id, name=agent_id.title(), **fields)  # type: ignore[arg-type]


def test_the_desk_that_asks_is_the_first_local_claude_desk_started() -> None:
    team = [spec("jim"), spec("michael"), spec("pam")]
    assert first_claude(team, "michael") == team[1]
    shell_manager = [spec("michael", provider="shell"), spec("jim"), spec("pam")]
    assert first_claude(shell_manager, "michael") == shell_manager[1]
    others = [
        spec("michael", host="box"),
        spec("jim", archived=True),
        spec("pam", send_only=True),
        spec("dwight", provider="codex"),
    ]
    assert first_claude(others, "michael") is None


def test_the_sentences_say_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HIVE_HOME", raising=False)
    none = ClaudeLogin(source=None, ready=False, asks="a login")
    assert office_sentence(none, "Michael", HivePaths(tmp_path)) == (
        "No Claude login: log in once in Michael's pane (/login; the other claude desks "
        "follow), or try `hive-office --demo`, or use shell desks "
        f'(provider = "shell" in {tmp_path}/office.toml).'
    )
    key = ClaudeLogin(source="ANTHROPIC_API_KEY", ready=False, asks="whether to use it")
    assert office_sentence(key, "Michael", HivePaths(tmp_path)) == (
        "Claude Code asks whether to use it once, in Michael's pane: answer it there and "
        "the other claude desks start by themselves."
    )
    assert waiting_notice(none, "Michael") == (
        "Waiting for a Claude login in Michael's pane; this desk starts by itself after."
    )
    # $HIVE_HOME set to this office: the demo would take it, so it is told its own.
    monkeypatch.setenv("HIVE_HOME", str(tmp_path))
    demo = demo_command(tmp_path)
    assert demo == f"hive-office --home {Path('~/.hive-office-demo').expanduser()} --demo"


def test_codex_and_gemini_keys() -> None:
    assert codex_login({"OPENAI_API_KEY": "k"}, stored=False) == "OPENAI_API_KEY"
    assert codex_login({}, stored=True) == "the login in its CODEX_HOME"
    assert codex_login({}, stored=False) is None
    assert gemini_login({"GEMINI_API_KEY": "k"}, stored=False) == "GEMINI_API_KEY"
    assert gemini_login({}, stored=False) is None
    assert gemini_login({}, stored=True) == "the Google sign-in the office's gemini desks share"


def test_a_start_failure_names_its_cause() -> None:
    text = start_failure(1, 0.94, "No Claude login: log in.")
    assert text == "exited (code 1) right after it started (0.9 s). No Claude login: log in."
    assert start_failure_cause(text) == "No Claude login: log in."
    assert start_failure_cause("could not be sent to box: no room") is None


def test_the_office_environment_reaches_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from hive_core.agents.login import desk_env

    monkeypatch.setenv("ANTHROPIC_API_KEY", "office")
    assert desk_env({"ANTHROPIC_API_KEY": "desk"})["ANTHROPIC_API_KEY"] == "desk"
    assert desk_env({})["ANTHROPIC_API_KEY"] == os.environ["ANTHROPIC_API_KEY"]


def test_a_waiting_desk_is_explained_as_not_started_yet() -> None:
    from hive_core.status import explain
    from tests.unit.test_status import T0, running

    notice = waiting_notice(ClaudeLogin(source=None, ready=False, asks="a login"), "Michael")
    held = explain(running(status="offline", alive=False, pid=None, missing=notice), T0)
    assert (held.kind, held.evidence) == ("offline", "start: held back")
    assert held.why == f"Its CLI has not started: {notice}"
    # A CLI that is not installed is still an exit, with its reason.
    gone = explain(running(status="exited", alive=False, missing="`claude` is not installed."), T0)
    assert gone.kind == "exited" and gone.evidence == "start: not installed"


def test_the_trust_answer_for_the_first_desks_folder_counts() -> None:
    repo = Folder(key=Path("/src/app"), path=Path("/home/pat/.hive-office/worktrees/jim"))
    ready = {**DONE, "customApiKeyResponses": {"approved": [KEY[-20:]]}}
    asked = login({"ANTHROPIC_API_KEY": KEY}, config=ready, folder=repo)
    assert (asked.ready, asked.asks) == (False, "whether to trust /src/app")
    trusted = {**ready, "projects": {"/src/app": {"hasTrustDialogAccepted": True}}}
    assert login({"ANTHROPIC_API_KEY": KEY}, config=trusted, folder=repo).ready
    # An answer for a folder above the desk's counts too; a "no" (absent) does not.
    above = {**ready, "projects": {"/home/pat": {"hasTrustDialogAccepted": True}}}
    assert login({"ANTHROPIC_API_KEY": KEY}, config=above, folder=repo).ready
    no = {**ready, "projects": {"/src/app": {"hasTrustDialogAccepted": False}}}
    assert not login({"ANTHROPIC_API_KEY": KEY}, config=no, folder=repo).ready
    # No login: that is what is asked first.
    assert login({}, config=trusted, folder=repo).asks == "a login"


def test_a_worktrees_trust_is_its_main_checkouts(tmp_path: Path) -> None:
    import subprocess

    from hive_core.agents.login import desk_folder

    main = tmp_path / "app"
    (main / "src").mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(main)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    tree = tmp_path / "worktrees" / "jim"
    subprocess.run([*git, "worktree", "add", "-q", str(tree)], check=True)
    assert desk_folder(tree).key == main
    assert desk_folder(main / "src").key == main
    plain = tmp_path / "plain"
    plain.mkdir()
    assert desk_folder(plain).key == plain


def test_hints_name_the_claude_that_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from hive_core.agents import claude
    from hive_core.agents.claude import NPM_INSTALL, ClaudeProvider, claude_command

    venv_claude = Path(sys.executable).parent / "claude"
    if not venv_claude.exists():
        pytest.skip("no pinned claude in this venv (run scripts/setup)")
    # After scripts/setup the venv's bin is not on PATH: the hint names the path.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert claude_command() == str(venv_claude)
    assert f"`{venv_claude}` (/login)" in ClaudeProvider().start_hint()
    monkeypatch.setenv("PATH", f"{venv_claude.parent}:/usr/bin:/bin")
    assert claude_command() == "claude"
    # In a checkout the setup script is named; installed as a tool, npm.
    assert f"{claude.CHECKOUT}/scripts/setup" in ClaudeProvider().install_hint()
    monkeypatch.setattr(claude, "CHECKOUT", tmp_path)
    assert ClaudeProvider().install_hint() == f"Install Claude Code with `{NPM_INSTALL}`."
