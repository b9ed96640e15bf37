"""codex, gemini and shell providers: generated configuration against each CLI's documented format.

The payloads below are the documented shapes (Codex's: captured from codex 0.171.0 running
a generated CODEX_HOME; Gemini's: its "Hooks reference" for 0.61.0, and its chat records
as gemini 0.61.0 wrote them against the scripted Gemini API).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest

from hive_core.agents.codex import (
    BYPASS_HOOK_TRUST,
    NO_DAEMON,
    START_PROMPT,
    CodexProvider,
    codex_home,
)
from hive_core.agents.gemini import (
    GeminiProvider,
    gemini_files,
    gemini_home,
    gemini_line,
    hook_shell_command,
    shared_login,
)
from hive_core.agents.provider import (
    CanonicalEvent,
    EventName,
    HookAnswer,
    HookDecision,
    LaunchContext,
    Provider,
)
from hive_core.agents.shell import ShellProvider
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ProviderName

HOOK_COMMAND = ["/abs/python", "-I", "-S", "/abs/cth_hook/__main__.py"]
HIVE_VARS = ("HIVE_HOME", "HIVE_AGENT_ID", "HIVE_SECRET", "HIVE_SOCKET")


def make_ctx(
    tmp_path: Path, provider: ProviderName, *, resume: bool = False, **agent: Any
) -> LaunchContext:
    (tmp_path / "userhome").mkdir(parents=True, exist_ok=True)
    return LaunchContext(
        paths=HivePaths(tmp_path / "home"),
        agent=AgentSpec(
            id="jim", name="Jim", provider=provider, cwd=str(tmp_path / "repo"), **agent
        ),
        secret="s3cret",
        session_id=str(uuid4()),
        resume=resume,
        system_prompt="You are Jim.",
        hook_command=HOOK_COMMAND,
        path_prepend=["/abs/venv/bin"],
        base_env={"PATH": "/usr/bin", "HOME": str(tmp_path / "userhome"), "SHELL": "/bin/zsh"},
    )


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's HOME, as the office process sees it too: it must stay empty."""
    home = tmp_path / "userhome"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def assert_office_env(env: dict[str, str], ctx: LaunchContext) -> None:
    assert env["HIVE_HOME"] == str(ctx.paths.home)
    assert env["HIVE_AGENT_ID"] == "jim"
    assert env["HIVE_SECRET"] == "s3cret"
    assert env["HIVE_SOCKET"] == str(ctx.paths.hook_socket)
    assert env["PATH"].startswith("/abs/venv/bin:")


def assert_only_office_home_written(tmp_path: Path, before: set[Path]) -> None:
    written = files_under(tmp_path) - before
    home = tmp_path / "home"
    assert written and all(p.is_relative_to(home) for p in written), written
    assert files_under(tmp_path / "userhome") == set()


@pytest.mark.parametrize("provider", [CodexProvider(), GeminiProvider(), ShellProvider()])
def test_every_provider_fits_the_seam(provider: Provider) -> None:
    assert provider.executable(AgentSpec(id="a", name="A", command=["/opt/x", "--y"])) == "/opt/x"
    hint = provider.install_hint()
    assert hint.endswith(".") and "\n" not in hint


# --- codex --------------------------------------------------------------------------

CODEX_EVENTS = {
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Stop",
    "SessionEnd",
}
# The config.toml keys the office writes, each a documented Codex setting.
CODEX_KEYS = {"model", "web_search", "sandbox_workspace_write", "projects", "hooks"}


def codex_config(ctx: LaunchContext) -> dict[str, Any]:
    return tomllib.loads((codex_home(ctx.paths, "jim") / "config.toml").read_text())


def test_codex_config_toml_has_a_hook_for_every_event(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "codex")
    CodexProvider().prepare(ctx)
    config = codex_config(ctx)
    assert set(config) <= CODEX_KEYS
    assert set(config["hooks"]) == CODEX_EVENTS
    for groups in config["hooks"].values():
        # One matcher group, no matcher (every tool), one command handler.
        assert groups == [
            {"hooks": [{"type": "command", "command": shlex.join(HOOK_COMMAND), "timeout": 10}]}
        ]


def test_codex_trusts_the_cwd_and_lets_the_sandbox_write_the_agents_own_folder(
    tmp_path: Path,
) -> None:
    ctx = make_ctx(tmp_path, "codex")
    CodexProvider().prepare(ctx)
    config = codex_config(ctx)
    cwd = str((tmp_path / "repo").resolve())
    assert config["projects"] == {cwd: {"trust_level": "trusted"}}
    roots = config["sandbox_workspace_write"]["writable_roots"]
    assert roots == [str(ctx.paths.home / "hive" / "agents" / "jim")]


def test_codex_web_search_is_off_without_web_and_model_follows_the_roster(tmp_path: Path) -> None:
    plain = make_ctx(tmp_path / "a", "codex")
    CodexProvider().prepare(plain)
    assert codex_config(plain)["web_search"] == "disabled"
    assert "model" not in codex_config(plain)
    webby = make_ctx(tmp_path / "b", "codex", web=True, model="gpt-5.2-codex")
    CodexProvider().prepare(webby)
    assert "web_search" not in codex_config(webby)
    assert codex_config(webby)["model"] == "gpt-5.2-codex"


def test_codex_toml_strings_survive_quotes_backslashes_and_unicode(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "codex", model='we"ird\\mødel\x7f')
    ctx = LaunchContext(**{**ctx.__dict__, "hook_command": ['/p a/th"on', "-c", "print('é')"]})
    CodexProvider().prepare(ctx)
    config = codex_config(ctx)
    assert config["model"] == 'we"ird\\mødel\x7f'
    command = config["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert shlex.split(command) == ['/p a/th"on', "-c", "print('é')"]


def test_codex_launch_identity_env_and_argv(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "codex")
    before = files_under(tmp_path)
    launch = CodexProvider().prepare(ctx)
    home = codex_home(ctx.paths, "jim")
    assert home == tmp_path / "home" / "agent-settings" / "codex" / "jim"
    assert (home / "AGENTS.md").read_text() == "You are Jim."
    assert_office_env(launch.env, ctx)
    assert launch.env["CODEX_HOME"] == str(home)
    assert launch.argv[1:] == [NO_DAEMON, BYPASS_HOOK_TRUST, "--", START_PROMPT]
    assert Path(launch.argv[0]).name == "codex"
    assert launch.cwd == tmp_path / "repo"
    assert_only_office_home_written(tmp_path, before)


def test_codex_resume_names_the_session(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "codex", resume=True, command=["/opt/codex", "--search"])
    launch = CodexProvider().prepare(ctx)
    assert launch.argv == [
        "/opt/codex",
        "--search",
        "resume",
        ctx.session_id,
        NO_DAEMON,
        BYPASS_HOOK_TRUST,
        "--",
        START_PROMPT,
    ]


CODEX_BASE = {
    "session_id": "01a22be3-d5cf-71e2-b50e-e8913e8b43d7",
    "transcript_path": "/h/sessions/rollout.jsonl",
    "cwd": "/repo",
    "model": "gpt-5.2-codex",
    "permission_mode": "default",
}
PATCH = """*** Begin Patch
*** Update File: src/app.py
@@
-a
+b
*** Add File: /hive/agents/pam/inbox/x.json
+{}
*** End Patch
"""


def codex_event(name: str, **fields: Any) -> CanonicalEvent | None:
    return CodexProvider().canonical({**CODEX_BASE, "hook_event_name": name, **fields})


def test_codex_lifecycle_events_map_onto_the_office_names() -> None:
    start = codex_event("SessionStart", source="startup")
    assert start == CanonicalEvent(
        name="SessionStart", session_id=CODEX_BASE["session_id"], cwd="/repo"
    )
    prompt = codex_event("UserPromptSubmit", turn_id="t1", prompt="hi")
    assert prompt is not None and (prompt.name, prompt.prompt) == ("UserPromptSubmit", "hi")
    stop = codex_event("Stop", turn_id="t1", stop_hook_active=True, last_assistant_message="done")
    assert stop is not None and stop.name == "Stop" and stop.stop_hook_active
    end = codex_event("SessionEnd", reason="exit")
    assert end is not None and end.name == "SessionEnd"
    assert codex_event("PreCompact", trigger="auto") is None
    assert CodexProvider().canonical({"tool_name": "Bash"}) is None


def test_codex_tool_events_keep_bash_and_turn_patches_into_edits() -> None:
    bash = codex_event(
        "PreToolUse", tool_name="Bash", tool_use_id="c1", tool_input={"command": "ls"}
    )
    assert bash is not None and (bash.tool_name, bash.tool_input) == ("Bash", {"command": "ls"})
    patch = codex_event(
        "PreToolUse", tool_name="apply_patch", tool_use_id="c2", tool_input={"command": PATCH}
    )
    assert patch is not None and patch.tool_name == "Edit"
    assert patch.tool_input["file_path"] == "src/app.py"
    assert patch.tool_input["file_paths"] == ["src/app.py", "/hive/agents/pam/inbox/x.json"]
    assert patch.tool_input["command"] == PATCH
    mcp = codex_event(
        "PostToolUse",
        tool_name="mcp__fs__read",
        tool_input={"path": "a"},
        tool_response={"ok": True},
    )
    assert mcp is not None and (mcp.name, mcp.tool_name) == ("PostToolUse", "mcp__fs__read")


def test_codex_permission_request_means_waiting_for_the_person() -> None:
    event = codex_event(
        "PermissionRequest",
        tool_name="Bash",
        tool_input={"command": "rm -rf build", "description": "clean the build"},
    )
    assert event is not None
    assert (event.name, event.notification_type) == ("Notification", "permission_prompt")
    assert event.message == "clean the build" and event.tool_name == "Bash"


def reply(provider: Provider, name: EventName, decision: HookDecision) -> dict[str, Any] | None:
    answer = provider.render(CanonicalEvent(name=name), decision)
    assert (answer.exit, answer.stderr) == (0, "")
    return json.loads(answer.stdout) if answer.stdout else None


def test_codex_replies_in_its_documented_shapes() -> None:
    codex = CodexProvider()
    assert reply(codex, "PreToolUse", HookDecision(deny="not yours")) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "not yours",
        }
    }
    assert reply(codex, "Stop", HookDecision(block="read your mail")) == {
        "decision": "block",
        "reason": "read your mail",
    }
    for name in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
        assert reply(codex, name, HookDecision(context="2 unread")) == {
            "hookSpecificOutput": {"hookEventName": name, "additionalContext": "2 unread"}
        }
    assert reply(codex, "Notification", HookDecision(context="x")) is None
    assert reply(codex, "PostToolUse", HookDecision(deny="x", block="y")) is None
    assert reply(codex, "Stop", HookDecision()) is None


# --- gemini -------------------------------------------------------------------------

# Gemini CLI's hook events ("Gemini CLI hooks", 0.61.0) and the documented fields of a
# hook definition and of a hook configuration ("Hooks reference").
GEMINI_ALL_EVENTS = {
    "SessionStart",
    "SessionEnd",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "BeforeTool",
    "AfterTool",
    "PreCompress",
    "Notification",
}
GEMINI_DEFINITION_FIELDS = {"matcher": str, "sequential": bool, "hooks": list}
GEMINI_HOOK_FIELDS = {"type": str, "command": str, "name": str, "timeout": int, "description": str}


def gemini_settings(ctx: LaunchContext) -> dict[str, Any]:
    path = gemini_home(ctx.paths, "jim") / ".gemini" / "settings.json"
    settings: dict[str, Any] = json.loads(path.read_text())
    return settings


def test_gemini_settings_follow_the_hooks_reference(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "gemini")
    GeminiProvider().prepare(ctx)
    settings = gemini_settings(ctx)
    assert set(settings) == {"hooksConfig", "hooks", "general", "ui"}
    assert settings["ui"] == {"useAlternateBuffer": True}
    assert settings["hooksConfig"] == {"enabled": True}
    assert settings["general"] == {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}
    assert set(settings["hooks"]) == {
        "SessionStart",
        "BeforeAgent",
        "BeforeTool",
        "AfterTool",
        "AfterAgent",
        "Notification",
        "SessionEnd",
    }
    assert set(settings["hooks"]) <= GEMINI_ALL_EVENTS
    for definitions in settings["hooks"].values():
        assert len(definitions) == 1
        for definition in definitions:
            assert "hooks" in definition
            assert all(isinstance(definition[k], GEMINI_DEFINITION_FIELDS[k]) for k in definition)
            for hook in definition["hooks"]:
                assert {"type", "command"} <= set(hook) and hook["type"] == "command"
                assert all(isinstance(hook[k], GEMINI_HOOK_FIELDS[k]) for k in hook)
                assert hook["timeout"] == 10_000 and hook["name"] == "hive-office"
                assert hook["command"] == hook_shell_command(HOOK_COMMAND)


def test_hive_commands_are_allowed_by_a_user_policy_rule(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "gemini")
    GeminiProvider().prepare(ctx)
    policy = gemini_home(ctx.paths, "jim") / ".gemini" / "policies" / "hive-office.toml"
    assert tomllib.loads(policy.read_text()) == {
        "rule": [
            {
                "toolName": "run_shell_command",
                "commandPrefix": "hive",
                "decision": "allow",
                "priority": 100,
            }
        ]
    }
    assert policy.stat().st_mode & 0o777 == 0o400
    GeminiProvider().prepare(ctx)  # rewritten at the next start, read-only or not


def test_a_gemini_desk_started_from_a_ci_job_is_still_interactive(tmp_path: Path) -> None:
    """Gemini ends its session after one answer when it sees CI variables (is-in-ci): they
    are left out of its desk's environment, unless the roster names one for it."""
    ctx = make_ctx(tmp_path, "gemini", env={"CI_TOKEN": "named"})
    ci = {"CI": "true", "CONTINUOUS_INTEGRATION": "1", "CI_JOB_ID": "7", "CI_TOKEN": "x"}
    ctx = LaunchContext(**{**ctx.__dict__, "base_env": {**ctx.base_env, **ci}})
    env = GeminiProvider().prepare(ctx).env
    assert not {"CI", "CONTINUOUS_INTEGRATION", "CI_JOB_ID"} & set(env)
    assert env["CI_TOKEN"] == "named" and env["SHELL"] == "/bin/zsh"


def test_gemini_identity_is_the_global_context_file_of_its_home(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "gemini")
    GeminiProvider().prepare(ctx)
    identity = gemini_home(ctx.paths, "jim") / ".gemini" / "GEMINI.md"
    assert identity.read_text() == "You are Jim."
    assert identity.stat().st_mode & 0o777 == 0o400


@pytest.mark.parametrize(
    ("env", "selected"),
    [
        ({"GEMINI_API_KEY": "k"}, "gemini-api-key"),
        ({"GOOGLE_GENAI_USE_VERTEXAI": "true", "GOOGLE_API_KEY": "k"}, "vertex-ai"),
        ({"GOOGLE_GENAI_USE_VERTEXAI": "false", "GEMINI_API_KEY": "k"}, "gemini-api-key"),
        ({"GEMINI_API_KEY": ""}, None),
        ({}, None),
    ],
)
def test_a_key_in_the_desks_env_selects_its_sign_in(
    tmp_path: Path, env: dict[str, str], selected: str | None
) -> None:
    ctx = make_ctx(tmp_path, "gemini", env=env)
    GeminiProvider().prepare(ctx)
    security = gemini_settings(ctx).get("security")
    assert security == ({"auth": {"selectedType": selected}} if selected else None)


def test_what_gemini_wrote_in_its_settings_is_kept_and_the_office_keys_renewed(
    tmp_path: Path,
) -> None:
    ctx = make_ctx(tmp_path, "gemini")
    GeminiProvider().prepare(ctx)
    path = gemini_home(ctx.paths, "jim") / ".gemini" / "settings.json"
    # The person signed in with Google in the pane and picked a model; an agent
    # switched its hooks off and added one of its own.
    written = json.loads(path.read_text())
    written["security"] = {"auth": {"selectedType": "oauth-personal"}}
    written["model"] = {"name": "gemini-2.5-pro"}
    written["ui"] = {"useAlternateBuffer": False, "theme": "ANSI"}
    written["hooksConfig"] = {"enabled": False, "notifications": True}
    written["hooks"] = {"BeforeTool": [{"hooks": [{"type": "command", "command": "true"}]}]}
    path.write_text(json.dumps(written))
    GeminiProvider().prepare(ctx)
    again = gemini_settings(ctx)
    assert again["security"] == {"auth": {"selectedType": "oauth-personal"}}
    assert again["model"] == {"name": "gemini-2.5-pro"}
    assert again["ui"] == {"useAlternateBuffer": False, "theme": "ANSI"}  # a default, not a rule
    assert again["hooksConfig"] == {"enabled": True, "notifications": True}
    assert len(again["hooks"]) == 7 and "true" not in json.dumps(again["hooks"])
    # A key in the environment wins over a stored choice.
    keyed = make_ctx(tmp_path, "gemini", env={"GEMINI_API_KEY": "k"})
    GeminiProvider().prepare(keyed)
    assert gemini_settings(keyed)["security"] == {"auth": {"selectedType": "gemini-api-key"}}
    # A settings file that is not Gemini's JSON is replaced by the office's keys alone.
    path.write_text("{not json")
    GeminiProvider().prepare(ctx)
    assert gemini_settings(ctx)["hooksConfig"] == {"enabled": True}


def test_a_google_sign_in_made_in_one_desk_serves_every_gemini_desk(tmp_path: Path) -> None:
    jim = make_ctx(tmp_path, "gemini")
    pam = dataclasses.replace(jim, agent=msgspec.structs.replace(jim.agent, id="pam"))
    GeminiProvider().prepare(jim)
    shared = shared_login(jim.paths)
    own = gemini_home(jim.paths, "jim") / ".gemini" / "gemini-credentials.json"
    assert own.is_symlink() and own.resolve() == shared.resolve() and not shared.exists()
    assert shared.parent.stat().st_mode & 0o777 == 0o700
    # Jim signs in with Google in his pane: Gemini writes the login through the link and
    # its choice into his settings, as it does after its sign-in screen.
    own.write_text("encrypted login")
    path = gemini_home(jim.paths, "jim") / ".gemini" / "settings.json"
    path.write_text(
        json.dumps(
            {**gemini_settings(pam), "security": {"auth": {"selectedType": "oauth-personal"}}}
        )
    )
    # Pam starts after: the same login, and the same choice, so no question in her pane.
    GeminiProvider().prepare(pam)
    hers = gemini_home(pam.paths, "pam") / ".gemini"
    assert (hers / "gemini-credentials.json").read_text() == "encrypted login"
    settings = json.loads((hers / "settings.json").read_text())
    assert settings["security"] == {"auth": {"selectedType": "oauth-personal"}}


def test_an_api_key_typed_in_one_desks_pane_is_shared_only_once_stored(tmp_path: Path) -> None:
    jim = make_ctx(tmp_path, "gemini")
    pam = dataclasses.replace(jim, agent=msgspec.structs.replace(jim.agent, id="pam"))
    GeminiProvider().prepare(jim)
    path = gemini_home(jim.paths, "jim") / ".gemini" / "settings.json"
    chosen = {**gemini_settings(jim), "security": {"auth": {"selectedType": "gemini-api-key"}}}
    path.write_text(json.dumps(chosen))
    # Chosen, but the key not typed yet (Gemini writes the choice first): not shared.
    GeminiProvider().prepare(pam)
    hers = gemini_home(jim.paths, "pam") / ".gemini" / "settings.json"
    assert "security" not in json.loads(hers.read_text())
    (gemini_home(jim.paths, "jim") / ".gemini" / "gemini-credentials.json").write_text("key")
    GeminiProvider().prepare(pam)
    assert json.loads(hers.read_text())["security"] == {"auth": {"selectedType": "gemini-api-key"}}


def test_a_desks_own_earlier_login_becomes_the_shared_one(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "gemini")
    folder = gemini_home(ctx.paths, "jim") / ".gemini"
    folder.mkdir(parents=True)
    (folder / "gemini-credentials.json").write_text("jim's login")
    GeminiProvider().prepare(ctx)
    assert shared_login(ctx.paths).read_text() == "jim's login"
    assert (folder / "gemini-credentials.json").is_symlink()
    # A second desk with a login of its own keeps it: the office never overwrites one.
    pam = dataclasses.replace(ctx, agent=msgspec.structs.replace(ctx.agent, id="pam"))
    hers = gemini_home(ctx.paths, "pam") / ".gemini"
    hers.mkdir(parents=True)
    (hers / "gemini-credentials.json").write_text("pam's login")
    GeminiProvider().prepare(pam)
    assert (hers / "gemini-credentials.json").read_text() == "pam's login"
    assert not (hers / "gemini-credentials.json").is_symlink()
    assert shared_login(ctx.paths).read_text() == "jim's login"


def test_gemini_launch_env_and_argv(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "gemini")
    before = files_under(tmp_path)
    launch = GeminiProvider().prepare(ctx)
    assert_office_env(launch.env, ctx)
    assert launch.env["GEMINI_CLI_HOME"] == str(
        tmp_path / "home" / "agent-settings" / "gemini" / "jim"
    )
    assert "GEMINI_CLI_SYSTEM_SETTINGS_PATH" not in launch.env
    assert launch.env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert Path(launch.argv[0]).name == "gemini"
    assert launch.argv[1:] == ["--session-id", ctx.session_id]
    assert launch.cwd == tmp_path / "repo"
    assert_only_office_home_written(tmp_path, before)


def test_gemini_install_hint_names_the_pinned_cli_here_and_npm_elsewhere() -> None:
    gemini = GeminiProvider()
    assert "scripts/setup (it puts the pinned Gemini CLI in .venv/bin)" in gemini.install_hint()
    assert gemini.install_hint(here=False) == (
        "Install Gemini CLI with `npm install -g @google/gemini-cli`."
    )


def test_gemini_resume_model_and_first_prompt(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "gemini", resume=True, model="gemini-2.5-pro", command=["/opt/gemini"])
    launch = GeminiProvider().prepare(ctx)
    assert launch.argv == ["/opt/gemini", "--resume", ctx.session_id, "--model", "gemini-2.5-pro"]
    first = dataclasses.replace(make_ctx(tmp_path, "gemini"), first_prompt="Read your mail.")
    argv = GeminiProvider().prepare(first).argv
    assert argv[-2:] == ["--prompt-interactive", "Read your mail."]


# Lines as gemini 0.61.0 wrote them into .gemini/tmp/<project>/chats/session-*.jsonl
# against the scripted Gemini API (usageMetadata: 1200 prompt of which 200 cached, 30
# output, 5 thoughts): the answer is appended again once its tool call is recorded.
GEMINI_CHAT = [
    b'{"sessionId":"5f0c","projectHash":"dec1","startTime":"2026-12-05T16:27:14.638Z","kind":"main"}',
    b'{"id":"e4ec","timestamp":"2026-12-05T16:27:14.776Z","type":"user","content":[{"text":"hi"}]}',
    b'{"id":"3c98","timestamp":"2026-12-05T16:27:14.852Z","type":"gemini","content":"On it.",'
    b'"thoughts":[],"tokens":{"input":1200,"output":30,"cached":200,"thoughts":5,"tool":0,'
    b'"total":1235},"model":"gemini-3-flash"}',
    b'{"$set":{"lastUpdated":"2026-12-05T16:27:14.852Z"}}',
    b'{"id":"3c98","timestamp":"2026-12-05T16:27:14.852Z","type":"gemini","content":"On it.",'
    b'"toolCalls":[{"id":"t1","name":"run_shell_command"}],"tokens":{"input":1200,"output":30,'
    b'"cached":200,"thoughts":5,"tool":0,"total":1235},"model":"gemini-3-flash"}',
    b'{"id":"77aa","timestamp":"2026-12-05T16:27:15.001Z","type":"gemini","content":"Done.",'
    b'"model":"gemini-3-flash"}',
]


def test_gemini_usage_is_read_from_its_chat_records(tmp_path: Path) -> None:
    records = [r for r in map(gemini_line, GEMINI_CHAT) if r is not None]
    assert {r.key for r in records} == {"3c98"}  # one answer, however often written
    record = records[-1]
    assert record.model == "gemini-3-flash" and record.ts == "2026-12-05T16:27:14.852Z"
    assert (record.tokens.input, record.tokens.cache_read, record.tokens.output) == (1000, 200, 35)
    assert gemini_line(b'{"type":"gemini","id":"x","tokens":') is None
    # Every chat of the agent's own home is its, whatever the project.
    ctx = make_ctx(tmp_path, "gemini")
    home = gemini_home(ctx.paths, "jim")
    chats = [
        home / ".gemini/tmp/repo/chats/session-a.jsonl",
        home / ".gemini/tmp/x/chats/session-b.jsonl",
    ]
    for chat in chats:
        chat.parent.mkdir(parents=True)
        chat.write_bytes(b"\n".join(GEMINI_CHAT) + b"\n")
    (home / ".gemini/tmp/repo/logs.json").write_text("[]")
    assert gemini_files(home) == sorted(chats)
    source = GeminiProvider().usage_source(ctx.agent, ctx.paths, {}, [])
    assert source.files == sorted(chats) and source.parser(chats[0]) is gemini_line


def _gemini_expand(command: str, env: dict[str, str]) -> str:
    """What Gemini does to settings strings when it loads them (`$VAR`, `${VAR}`)."""

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return env.get(name, m.group(0))

    return re.sub(r"\$(?:(\w+)|\{([^}]+?)\})", value, command)


def test_gemini_hook_command_reaches_the_shim_with_the_office_variables(tmp_path: Path) -> None:
    probe = [
        sys.executable,
        "-c",
        "import os, json; print(json.dumps({k: os.environ.get(k) for k in "
        f"{list(HIVE_VARS)!r}}}))",
    ]
    office = {
        "HIVE_HOME": "/h o/me",
        "HIVE_AGENT_ID": "jim",
        "HIVE_SECRET": "s3cret-_x",
        "HIVE_SOCKET": "/h o/me/run/hook.sock",
    }
    command = hook_shell_command(probe)
    base = {"PATH": os.environ["PATH"]}
    # Redaction off: the hook inherits the variables.
    direct = subprocess.run(
        ["sh", "-c", command], env={**base, **office}, capture_output=True, text=True, check=True
    )
    assert json.loads(direct.stdout) == office
    # Redaction on: the hook's environment lost them, but Gemini expanded the command.
    redacted = subprocess.run(
        ["sh", "-c", _gemini_expand(command, office)],
        env=base,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(redacted.stdout) == office


GEMINI_BASE = {
    "session_id": "s-1",
    "transcript_path": "/t.json",
    "cwd": "/repo",
    "timestamp": "2026-01-01T00:00:00Z",
}


def gemini_event(name: str, **fields: Any) -> CanonicalEvent | None:
    return GeminiProvider().canonical({**GEMINI_BASE, "hook_event_name": name, **fields})


@pytest.mark.parametrize(
    ("gemini_tool", "claude_tool"),
    [
        ("run_shell_command", "Bash"),
        ("write_file", "Write"),
        ("replace", "Edit"),
        ("read_file", "Read"),
        ("web_fetch", "WebFetch"),
        ("google_web_search", "WebSearch"),
        ("glob", "Glob"),
        ("grep_search", "Grep"),
        ("list_directory", "list_directory"),
        ("mcp_fs_read", "mcp_fs_read"),
    ],
)
def test_gemini_tools_map_onto_claude_names(gemini_tool: str, claude_tool: str) -> None:
    event = gemini_event("BeforeTool", tool_name=gemini_tool, tool_input={"file_path": "a.py"})
    assert event is not None
    assert (event.name, event.tool_name, event.tool_input) == (
        "PreToolUse",
        claude_tool,
        {"file_path": "a.py"},
    )


def test_gemini_lifecycle_events_map_onto_the_office_names() -> None:
    start = gemini_event("SessionStart", source="startup")
    assert start == CanonicalEvent(name="SessionStart", session_id="s-1", cwd="/repo")
    prompt = gemini_event("BeforeAgent", prompt="hi")
    assert prompt is not None and (prompt.name, prompt.prompt) == ("UserPromptSubmit", "hi")
    after = gemini_event(
        "AfterTool",
        tool_name="run_shell_command",
        tool_input={"command": "ls"},
        tool_response={"llmContent": "x"},
    )
    assert after is not None and (after.name, after.tool_name) == ("PostToolUse", "Bash")
    stop = gemini_event("AfterAgent", prompt="hi", prompt_response="done", stop_hook_active=True)
    assert stop is not None and stop.name == "Stop" and stop.stop_hook_active
    note = gemini_event(
        "Notification",
        notification_type="ToolPermission",
        message="Allow write_file?",
        details={"tool": "write_file"},
    )
    assert note is not None and (note.name, note.notification_type, note.message) == (
        "Notification",
        "permission_prompt",
        "Allow write_file?",
    )
    end = gemini_event("SessionEnd", reason="exit")
    assert end is not None and end.name == "SessionEnd"
    assert gemini_event("BeforeModel", llm_request={}) is None
    assert gemini_event("PreCompress", trigger="auto") is None


def test_gemini_replies_in_its_documented_shapes() -> None:
    gemini = GeminiProvider()
    assert reply(gemini, "PreToolUse", HookDecision(deny="not yours")) == {
        "decision": "deny",
        "reason": "not yours",
    }
    assert reply(gemini, "Stop", HookDecision(block="read your mail")) == {
        "decision": "deny",
        "reason": "read your mail",
    }
    for name in ("SessionStart", "UserPromptSubmit", "PostToolUse"):
        assert reply(gemini, name, HookDecision(context="2 unread")) == {
            "hookSpecificOutput": {"additionalContext": "2 unread"}
        }
    assert reply(gemini, "Notification", HookDecision(context="x")) is None
    assert reply(gemini, "Stop", HookDecision(deny="x")) is None


# --- shell --------------------------------------------------------------------------


def test_shell_runs_the_users_shell_interactively_without_hooks(tmp_path: Path) -> None:
    shell = ShellProvider()
    assert shell.hookless
    ctx = make_ctx(tmp_path, "shell")
    before = files_under(tmp_path)
    launch = shell.prepare(ctx)
    assert launch.argv == ["/bin/zsh", "-i"]
    assert launch.cwd == tmp_path / "repo"
    assert_office_env(launch.env, ctx)
    assert files_under(tmp_path) == before
    assert shell.canonical({"hook_event_name": "Stop"}) is None
    assert shell.render(CanonicalEvent(name="Stop"), HookDecision(block="x")) == HookAnswer()


def test_shell_defaults_to_bash_and_honours_a_roster_command(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "shell")
    bare = LaunchContext(**{**ctx.__dict__, "base_env": {"PATH": "/usr/bin"}})
    assert ShellProvider().prepare(bare).argv == ["/bin/bash", "-i"]
    fish = make_ctx(tmp_path, "shell", command=["/usr/bin/fish", "-l"])
    assert ShellProvider().prepare(fish).argv == ["/usr/bin/fish", "-l"]
