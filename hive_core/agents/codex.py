"""OpenAI Codex CLI: hooks and identity through a per-agent CODEX_HOME.

Each agent runs with `CODEX_HOME=<home>/agent-settings/codex/<id>/`, so nothing is
written to ~/.codex or the user's repo. The office writes two files there at every
start (Codex writes its own sessions, logs and login next to them):

- `config.toml`: a command hook running cth-hook for SessionStart, UserPromptSubmit,
  PreToolUse, PermissionRequest, PostToolUse, Stop and SessionEnd; the agent's cwd
  marked trusted (no trust dialog on every start: the roster put the agent there);
  the agent's own hive folder as an extra writable root of the workspace-write sandbox,
  so `hive send`/`hive done` work from a sandboxed shell; `web_search = "disabled"`
  for agents without `web`; `model` when the roster names one.
- `AGENTS.md`: the identity and protocol digest. Codex reads AGENTS.md from CODEX_HOME
  as global guidance, ahead of the project's own AGENTS.md files.

A third file, `auth.json`, only when the desk's environment (the office's and the
roster's `env`) holds CODEX_API_KEY or OPENAI_API_KEY, or another codex desk holds an
API-key login the person entered in its pane: the key stored as the login Codex stores
for one (`{"auth_mode": "apikey", "OPENAI_API_KEY": ...}`, what `codex login
--with-api-key` writes), so the TUI opens without its sign-in screen. A login the person
made in the pane is never replaced, a ChatGPT login never copied (api_key_login).

Facts from Codex 0.169.0 (scripts/codex-version; its binary run against a generated
CODEX_HOME in tests/e2e/test_codex_desk.py, and the developers.openai.com pages "Hooks",
"Custom instructions with AGENTS.md" and "Config basics"):
- Its TUI shows "Choose how you want to use Codex" while CODEX_HOME holds no login,
  even with a key in the environment; with the stored key login it does not.
- It runs the session in a background app server it starts per CODEX_HOME and leaves
  running, unless started with `--no-daemon` (the office passes it: the session stays
  the pane's child and ends with the desk).
- SessionStart (`source` "startup" or "resume") runs when the first turn starts, not
  when the TUI opens: the office gives every start a first prompt (START_PROMPT, or
  the office's own first turn), else the desk would stay offline and never be woken.
- Its default model (gpt-6.1-sol) calls tools from a JavaScript `exec` tool; each
  shell command a script runs still reaches PreToolUse as `Bash`. The gpt-5.1-codex
  family calls `exec_command` directly and edits with an `apply_patch` heredoc through
  it, which Codex runs as its own edit but reports as `Bash` (read as an Edit here).
- Hooks from config.toml run only once trusted (a hash per hook, recorded by Codex's
  review screen). `--dangerously-bypass-hook-trust` runs enabled hooks without that
  record; the office passes it. It also waives review for hooks in a trusted
  project's own `.codex/` folder, which is the price of not reproducing Codex's
  internal hash (upstream calls that brittle).
- Hook stdin carries `session_id`, `cwd`, `hook_event_name`, `model`,
  `permission_mode`, plus `source` (SessionStart), `prompt` (UserPromptSubmit),
  `tool_name`/`tool_input` (tool events), `stop_hook_active` (Stop). Shell calls are
  `Bash` with `{"command"}`; file edits are `apply_patch` with the patch text in
  `command`; MCP tools are `mcp__<server>__<tool>`.
- Replies use Claude Code's shapes: PreToolUse `hookSpecificOutput.permissionDecision
  = "deny"` with `permissionDecisionReason`; Stop `{"decision": "block", "reason"}`;
  `hookSpecificOutput.additionalContext` on SessionStart, UserPromptSubmit and
  PostToolUse.

What Codex does not offer:
- No Notification event: PermissionRequest (an approval prompt is about to open) is
  mapped to Notification with `notification_type = "permission_prompt"`. Codex has no
  idle-prompt notification.
- No hook for its hosted web search: the office cannot deny it per call, so agents
  without `web` get web search switched off in config.toml instead.
- No way to choose a session id: a first start lets Codex mint one (a UUID reported in
  every hook's `session_id`); a restart runs `codex resume <id>`, so `ctx.session_id`
  must be the id the office recorded from SessionStart, not one it minted.
- The login is per CODEX_HOME: an agent uses OPENAI_API_KEY/CODEX_API_KEY from the
  environment (stored as its key login), or a login done in its pane (kept in its
  CODEX_HOME; an API key one is shared with the other desks, see api_key_login). The
  user's ~/.codex/auth.json is not shared: copies would fight over rotating refresh
  tokens.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from hive_core.agents.provider import (
    HOOK_TIMEOUT_S,
    CanonicalEvent,
    EventName,
    HookAnswer,
    HookDecision,
    Launch,
    LaunchContext,
    SummaryRequest,
    agent_cwd,
    claude_shaped_answer,
    office_env,
    program_argv,
    text_field,
)
from hive_core.agents.usage import UsageSource, codex_files, codex_parser
from hive_core.fsio import READ_ONLY_MODE, UnsafeFile, atomic_write, read_regular
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ProviderName

# (Codex clamps SessionEnd's hook to 3 s on its own, whatever HOOK_TIMEOUT_S says.)
BYPASS_HOOK_TRUST = "--dangerously-bypass-hook-trust"
# Codex 0.169 otherwise hands the session to a background app server it starts once per
# CODEX_HOME and leaves running: a process outside the desk's pane, carrying the desk's
# secret, that outlives the desk. In the foreground the session is the pane's child.
NO_DAEMON = "--no-daemon"
# The first turn of a desk the office gives none: it opens the session.
START_PROMPT = "You are at your desk. Act on any waiting mail the office showed you, then stop."
# The keys Codex takes from the environment, in its order (`codex login status`).
API_KEY_VARS = ("CODEX_API_KEY", "OPENAI_API_KEY")

# Codex's hook events the office listens to, and the office event each one is.
EVENTS: dict[str, EventName] = {
    "SessionStart": "SessionStart",
    "UserPromptSubmit": "UserPromptSubmit",
    "PreToolUse": "PreToolUse",
    "PermissionRequest": "Notification",
    "PostToolUse": "PostToolUse",
    "Stop": "Stop",
    "SessionEnd": "SessionEnd",
}
# Codex already calls its shell tool `Bash`; edits arrive as one patch over many files.
TOOLS = {"apply_patch": "Edit"}
_PATCH_PATH = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+?)\s*$", re.M)


def codex_home(paths: HivePaths, agent_id: str) -> Path:
    return paths.provider_home("codex", agent_id)


def config_toml(ctx: LaunchContext) -> str:
    """The agent's config.toml: keys first, then tables, as TOML requires."""
    agent = ctx.agent
    lines = [f"# Written by hive-office for agent {agent.id} at every start; edits are lost."]
    if agent.model:
        lines.append(f"model = {_tomltext_field(agent.model)}")
    if not agent.web:
        lines.append('web_search = "disabled"')
    roots = [_tomltext_field(str(ctx.paths.mailbox(agent.id).root))]
    lines += ["", "[sandbox_workspace_write]", f"writable_roots = [{', '.join(roots)}]"]
    # Codex keys trust by the resolved path of the folder it starts in.
    project = _tomltext_field(str(agent_cwd(agent).resolve()))
    lines += ["", f"[projects.{project}]", 'trust_level = "trusted"']
    command = _tomltext_field(shlex.join(ctx.hook_command))
    for event in EVENTS:
        lines += [
            "",
            f"[[hooks.{event}]]",
            f"[[hooks.{event}.hooks]]",
            'type = "command"',
            f"command = {command}",
            f"timeout = {HOOK_TIMEOUT_S}",
        ]
    return "\n".join(lines) + "\n"


class CodexProvider:
    name: ProviderName = "codex"
    hookless = False

    def executable(self, agent: AgentSpec) -> str:
        return agent.command[0] if agent.command else "codex"

    def install_hint(self, *, here: bool = True) -> str:
        return "Install the Codex CLI with `npm install -g @openai/codex`."

    def start_hint(self) -> str:
        # Its login lives in its own CODEX_HOME, not in ~/.codex (api_key_login).
        return (
            "Set OPENAI_API_KEY (or CODEX_API_KEY) in office.toml (an agent's env), or sign "
            "in in its pane: an API key entered there is shared with the other codex desks "
            "at their next start, a ChatGPT sign-in is needed in each desk's own pane."
        )

    def prepare(self, ctx: LaunchContext) -> Launch:
        home = codex_home(ctx.paths, ctx.agent.id)
        home.mkdir(parents=True, exist_ok=True)
        atomic_write(home / "config.toml", config_toml(ctx).encode())
        # AGENTS.md is read-only on disk (no agent needs to change it); config.toml is
        # not: Codex itself records choices there (trusted projects, the model).
        atomic_write(home / "AGENTS.md", ctx.system_prompt.encode(), mode=READ_ONLY_MODE)
        env = office_env(ctx)
        env["CODEX_HOME"] = str(home)
        others = sorted(p for p in home.parent.iterdir() if p != home)
        login = api_key_login(
            env, _read_auth(home / AUTH_FILE), [_read_auth(p / AUTH_FILE) for p in others]
        )
        if login is not None:
            atomic_write(home / AUTH_FILE, login, mode=0o600)
        argv = program_argv(ctx.agent, self.executable(ctx.agent), env)
        if ctx.resume:
            argv += ["resume", ctx.session_id]
        argv += [NO_DAEMON, BYPASS_HOOK_TRUST]
        # Codex starts its session (and runs SessionStart) with the first turn, not when
        # it opens: without a prompt the desk would stay offline, unreachable by mail.
        argv += ["--", ctx.first_prompt or START_PROMPT]
        return Launch(argv=argv, env=env, cwd=agent_cwd(ctx.agent))

    def canonical(self, raw: dict[str, Any]) -> CanonicalEvent | None:
        name = EVENTS.get(text_field(raw.get("hook_event_name")) or "")
        if name is None:
            return None
        tool = text_field(raw.get("tool_name"))
        raw_input = raw.get("tool_input")
        tool_input = dict(raw_input) if isinstance(raw_input, dict) else {}
        notification_type = message = None
        if name == "Notification":
            notification_type = "permission_prompt"
            message = text_field(tool_input.get("description")) or text_field(
                tool_input.get("command")
            )
        if tool == "Bash":
            folder = _shell_patch_folder(tool_input.get("command"))
            if folder is not None:
                # Codex runs a shell call that is an apply_patch heredoc as its own edit
                # (the gpt-5.1-codex family edits files so): an edit to the office too.
                tool = "apply_patch"
                tool_input.update(_patch_paths(tool_input.get("command"), folder))
        elif tool == "apply_patch":
            tool_input.update(_patch_paths(tool_input.get("command")))
        return CanonicalEvent(
            name=name,
            session_id=text_field(raw.get("session_id")),
            tool_name=TOOLS.get(tool, tool) if tool else None,
            tool_input=tool_input,
            prompt=text_field(raw.get("prompt")),
            stop_hook_active=raw.get("stop_hook_active") is True,
            notification_type=notification_type,
            message=message,
            cwd=text_field(raw.get("cwd")),
        )

    def summary_command(self, agent: AgentSpec, request: SummaryRequest) -> None:
        """Codex has no structured headless answer the office has pinned; its notes
        are folded by rule."""
        return None

    def usage_source(
        self, agent: AgentSpec, paths: HivePaths, env: Mapping[str, str], sessions: Sequence[str]
    ) -> UsageSource:
        """The rollout files under the agent's own CODEX_HOME: all of them are its."""
        return UsageSource(files=codex_files(codex_home(paths, agent.id)), parser=codex_parser)

    def render(self, event: CanonicalEvent, decision: HookDecision) -> HookAnswer:
        return claude_shaped_answer(event, decision)


AUTH_FILE = "auth.json"


class _StoredLogin(msgspec.Struct, omit_defaults=True):
    """The part of Codex's auth.json the office reads and writes: what
    `codex login --with-api-key` stores (`auth_mode = "apikey"` and the key)."""

    auth_mode: str | None = None
    OPENAI_API_KEY: str | None = None


def api_key_login(
    env: Mapping[str, str], stored: bytes | None, others: Sequence[bytes | None] = ()
) -> bytes | None:
    """The auth.json to write so Codex starts without its sign-in screen, or None to
    leave the file as it is. `stored`: this desk's auth.json; `others`: those of the
    office's other codex desks.

    Codex 0.169's TUI asks how to sign in whenever its CODEX_HOME holds no login, even
    with OPENAI_API_KEY or CODEX_API_KEY set; the login it then stores for a key is
    this file. So a key in the desk's environment is stored as that login, as the
    person would by answering. Without one, a desk with no login of its own takes the
    API-key login the person made in another codex desk's pane: a key does not change,
    so copies are safe. A ChatGPT login is never copied (each copy would refresh and
    rotate the same token, logging the others out): each desk signs in in its own pane.
    A login the person made (ChatGPT, or a file the office cannot read) is never
    replaced; a key login is kept current."""
    key = next((env[k] for k in API_KEY_VARS if env.get(k)), None)
    if key is None:
        if stored is not None:
            return None
        key = next(filter(None, map(_stored_key, others)), None)
        if key is None:
            return None
    if stored is not None:
        try:
            found = msgspec.json.decode(stored, type=_StoredLogin)
        except msgspec.DecodeError:
            return None
        if found.auth_mode != "apikey" or key == found.OPENAI_API_KEY:
            return None
    return msgspec.json.format(
        msgspec.json.encode(_StoredLogin(auth_mode="apikey", OPENAI_API_KEY=key))
    )


def _stored_key(stored: bytes | None) -> str | None:
    """The key of an API-key login, if `stored` is one."""
    if not stored:
        return None
    try:
        found = msgspec.json.decode(stored, type=_StoredLogin)
    except msgspec.DecodeError:
        return None
    return found.OPENAI_API_KEY if found.auth_mode == "apikey" else None


def _read_auth(path: Path) -> bytes | None:
    try:
        # The agent can write its own CODEX_HOME: never follow a link or wait on a FIFO.
        return read_regular(path, 1024 * 1024)
    except FileNotFoundError:
        return None
    except (OSError, UnsafeFile):
        return b""  # there, but not a file the office reads: left alone


def _patch_paths(patch: object, folder: str = "") -> dict[str, Any]:
    """`file_path` (the first file) and `file_paths` (all) of an apply_patch call, under
    `folder` (relative to the session's cwd) when the call named one.

    The tool policy reads `file_path` of an Edit; a patch touching several files also
    lists them all, so a check can look past the first.
    """
    if not isinstance(patch, str):
        return {}
    paths = [os.path.join(folder, p) for p in _PATCH_PATH.findall(patch)]
    return {"file_path": paths[0], "file_paths": paths} if paths else {}


# The shell forms Codex runs as apply_patch: `apply_patch <<'EOF'` and
# `cd DIR && apply_patch <<'EOF'`.
_SHELL_PATCH = re.compile(r"\A\s*(?:cd\s+(?P<folder>[^\s&;|]+)\s*&&\s*)?apply_patch\b")


def _shell_patch_folder(command: object) -> str | None:
    """The folder a shell call that is an apply_patch runs it in ("" for the cwd), or
    None if the call is not one."""
    if not isinstance(command, str):
        return None
    found = _SHELL_PATCH.match(command)
    if found is None:
        return None
    return (found.group("folder") or "").strip("'\"")


def _tomltext_field(value: str) -> str:
    # A JSON string is a TOML basic string, except that TOML also forbids a raw DEL.
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
