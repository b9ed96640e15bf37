"""Google Gemini CLI: hooks, login and identity through a per-agent GEMINI_CLI_HOME.

Each agent runs with `GEMINI_CLI_HOME=<home>/agent-settings/gemini/<id>/`: Gemini takes
that folder for the home directory it keeps `.gemini/` in, so nothing is written to the
user's ~/.gemini or repo. The office writes, at every start:

- `.gemini/settings.json` (Gemini's user settings layer): a command hook running
  cth-hook for SessionStart, BeforeAgent, BeforeTool, AfterTool, AfterAgent,
  Notification and SessionEnd, hooks switched on, the update check off, the alternate screen unless the desk's
  settings say otherwise (see DEFAULTS), and, when a key is in the desk's
  environment, `security.auth.selectedType` for it (so Gemini's "How would you like to
  authenticate" screen never shows). The office's keys replace their old values; every
  other key Gemini wrote there (the person's sign-in choice, a model picked in /model)
  is kept.
- `.gemini/policies/hive-office.toml`: a policy rule that lets `hive` commands run
  without a confirmation.
- `.gemini/GEMINI.md`: the identity and protocol digest. Gemini loads the global
  GEMINI.md of its home as context ahead of the project's own. GEMINI_SYSTEM_MD was not
  used: it replaces Gemini's whole system prompt.

The agent also gets `GEMINI_CLI_TRUST_WORKSPACE=true`: the roster put it in that folder,
and Gemini runs no settings hooks in an untrusted folder.

Facts from Gemini CLI 0.61.0 (scripts/gemini-version; its bundle's code and
tests/e2e/test_gemini_desk.py):
- Hooks are read from the merged settings (system, user, workspace layers) and run only
  in a trusted folder. Only the system layer is skipped unless root owns it and every
  folder above it (google-gemini/gemini-cli PR #29115): a user layer in a per-agent
  home runs for an ordinary user.
- Hook stdin carries `session_id`, `transcript_path`, `cwd`, `hook_event_name`,
  `timestamp`, plus `source` (SessionStart), `prompt` (BeforeAgent), `tool_name`/
  `tool_input` (tool events), `stop_hook_active` (AfterAgent), `notification_type`/
  `message` (Notification; "ToolPermission" is a permission prompt).
- Replies: `{"decision": "deny", "reason"}` refuses a BeforeTool call (the model reads
  "Tool execution blocked: <reason>" as the call's error) and, at AfterAgent, sends the
  reason as the next prompt; `hookSpecificOutput.additionalContext` is added (as
  `<hook_context>`) at SessionStart, BeforeAgent and AfterTool.
- A hook command is one shell string. Settings values expand `${VAR}` from Gemini's own
  environment when loaded, while a hook's environment loses names matching SECRET,
  KEY, TOKEN... whenever variable redaction is on (a setting, or always under GitHub
  Actions). The command therefore names the office's variables as `${HIVE_*}`: their
  values are in the command Gemini builds, and never in the file.
- `--session-id` starts a session under the office's id; `--resume <id>` continues it.
- Each model answer is written to `.gemini/tmp/<project>/chats/session-*.jsonl` as a
  `"type": "gemini"` line with its id, model and the API's usage (`tokens`: input
  including cached, output, cached, thoughts, tool); the line is appended again when
  its usage arrives or a tool call is added to it.
- Without a key Gemini asks for a sign-in in the pane, and writes the choice to the
  desk's settings as soon as it is made. A Google login, or an API key typed into the
  pane, is kept in the system keychain when there is one, else in
  `.gemini/gemini-credentials.json` of its home: the office links that file of every
  desk to one shared file, and a desk started after someone signed in takes the same
  choice (sign_in_elsewhere), so it starts without the question.

What Gemini does not offer:
- Tools without a Claude Code counterpart (list_directory, read_many_files, MCP tools
  named `mcp_<server>_<tool>`, ...) keep their Gemini names, so rules keyed on Claude's
  names do not apply to them. Notification only reports permission prompts, never idle.
- The person's own ~/.gemini (settings, extensions, commands) is not loaded by a desk:
  its home is the office's. A project's `.gemini/settings.json` still is.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from hive_core.agents.claude import CHECKOUT
from hive_core.agents.provider import (
    CONTEXT_EVENTS,
    HOOK_TIMEOUT_S,
    CanonicalEvent,
    EventName,
    HookAnswer,
    HookDecision,
    Launch,
    LaunchContext,
    SummaryRequest,
    agent_cwd,
    office_env,
    program_argv,
    text_field,
)
from hive_core.agents.usage import LineParser, Tokens, UsageRecord, UsageSource
from hive_core.fsio import READ_ONLY_MODE, UnsafeFile, atomic_write, read_regular
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ProviderName

HOOK_NAME = "hive-office"
HOME_VAR = "GEMINI_CLI_HOME"
# Gemini's settings file is small; a bigger one is not the one Gemini wrote.
SETTINGS_MAX = 1024 * 1024
NPM_PACKAGE = "@google/gemini-cli"
# Where Gemini keeps a Google login or a typed API key when there is no system keychain
# (its FileKeychain, in `.gemini/` of its home), and the auth types of those sign-ins.
LOGIN_FILE = "gemini-credentials.json"
GOOGLE_SIGN_IN = "oauth-personal"
API_KEY_SIGN_IN = "gemini-api-key"

# Gemini's hook events the office listens to, and the office event each one is.
EVENTS: dict[str, EventName] = {
    "SessionStart": "SessionStart",
    "BeforeAgent": "UserPromptSubmit",
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "AfterAgent": "Stop",
    "Notification": "Notification",
    "SessionEnd": "SessionEnd",
}
# Gemini's built-in tools that have a Claude Code counterpart; their arguments already
# use the same names where the office looks (command, file_path).
TOOLS = {
    "run_shell_command": "Bash",
    "write_file": "Write",
    "replace": "Edit",
    "read_file": "Read",
    "glob": "Glob",
    "grep_search": "Grep",
    "search_file_content": "Grep",
    "web_fetch": "WebFetch",
    "google_web_search": "WebSearch",
    "write_todos": "TodoWrite",
}
NOTIFICATIONS = {"ToolPermission": "permission_prompt"}
# Spelled out in the hook command so they survive Gemini's environment redaction.
_FORWARDED = ("HIVE_HOME", "HIVE_AGENT_ID", "HIVE_SECRET", "HIVE_SOCKET")
# A user-tier rule of Gemini's policy engine (its `policies/*.toml`; `tools.allowed`
# does the same but is deprecated, with a warning in the pane): the `hive` CLI is how
# agents coordinate, it never waits on a confirmation. The prefix matches the word
# `hive` alone, and Gemini checks each command of a compound one.
POLICY = """# Written by hive-office at every start; edits are lost.
[[rule]]
toolName = "run_shell_command"
commandPrefix = "hive"
decision = "allow"
priority = 100
"""
POLICY_FILE = "hive-office.toml"


def gemini_home(paths: HivePaths, agent_id: str) -> Path:
    """The agent's GEMINI_CLI_HOME; Gemini keeps its files in `.gemini/` below it."""
    return paths.provider_home("gemini", agent_id)


def interactive_env(env: Mapping[str, str], named: Mapping[str, str]) -> dict[str, str]:
    """`env` without what makes Gemini take its terminal for a CI job (its UI framework's
    is-in-ci: CI, CONTINUOUS_INTEGRATION or any CI_* variable), where it answers one
    prompt and ends its session: a desk is an interactive pane, wherever the office was
    started. What the roster's `env` names for the agent is kept."""
    return {
        k: v
        for k, v in env.items()
        if k in named or not (k in ("CI", "CONTINUOUS_INTEGRATION") or k.startswith("CI_"))
    }


def settings_file(paths: HivePaths, agent_id: str) -> Path:
    """The desk's Gemini settings: the office's keys, and the person's choices (sign-in,
    model) that Gemini records there."""
    return gemini_home(paths, agent_id) / ".gemini" / "settings.json"


def shared_login(paths: HivePaths) -> Path:
    """The one Google sign-in every gemini desk of the office reads and refreshes (a dot
    name: never an agent's id)."""
    return paths.provider_home("gemini", ".login") / LOGIN_FILE


def share_login(paths: HivePaths, folder: Path) -> None:
    """Point the desk's login file (in `folder`, its `.gemini/`) at the office's shared
    one, so a sign-in made in any desk's pane serves them all. Gemini reads and rewrites
    the file in place (a write through the link reaches the shared file); a desk that
    kept a login of its own before the office shared one gives it to the others."""
    shared = shared_login(paths)
    shared.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    own = folder / LOGIN_FILE
    if own.is_symlink():
        return
    if own.exists():
        if shared.exists():
            return  # a login of its own, made before: left as it is
        os.replace(own, shared)
    own.symlink_to(shared)


def sign_in_elsewhere(paths: HivePaths, agent_id: str) -> str | None:
    """The sign-in another gemini desk of the office chose in its pane (Gemini writes
    the choice to that desk's settings, the login to the shared file), for this desk to
    take without asking: Google's (found in the shared file, or in the system keychain,
    which is this user's for every desk) or an API key typed into the pane (kept in the
    shared file only). None: nobody signed in that way."""
    stored = shared_login(paths).is_file()
    for settings in gemini_home(paths, agent_id).parent.glob("*/.gemini/settings.json"):
        if settings.parent.parent.name in (agent_id, ".login"):
            continue
        chosen = selected_type(read_settings(settings))
        if chosen == GOOGLE_SIGN_IN or (chosen == API_KEY_SIGN_IN and stored):
            return chosen
    return None


def selected_type(settings: Mapping[str, Any]) -> str | None:
    """`security.auth.selectedType` of a settings file, if it is there as Gemini writes it."""
    security = settings.get("security")
    auth = security.get("auth") if isinstance(security, dict) else None
    chosen = auth.get("selectedType") if isinstance(auth, dict) else None
    return chosen if isinstance(chosen, str) else None


def hook_shell_command(hook_command: list[str]) -> str:
    prefix = " ".join(f'{name}="${{{name}}}"' for name in _FORWARDED)
    return f"{prefix} {shlex.join(hook_command)}"


def auth_type(env: Mapping[str, str]) -> str | None:
    """The sign-in Gemini uses without asking, from the desk's environment (Gemini's own
    order: Vertex AI, then an API key); None: the environment holds none (Gemini keeps
    the person's answer from its own screen)."""
    if env.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() == "true":
        return "vertex-ai"
    return API_KEY_SIGN_IN if env.get("GEMINI_API_KEY") else None


def office_settings(
    hook_command: list[str], env: Mapping[str, str], sign_in: str | None = None
) -> dict[str, Any]:
    """The keys of Gemini's settings the office owns, nested as in the file; `sign_in`:
    the auth type to use when the environment names none (a login another desk made)."""
    hook = {
        "name": HOOK_NAME,
        "type": "command",
        "command": hook_shell_command(hook_command),
        "timeout": HOOK_TIMEOUT_S * 1000,  # Gemini counts milliseconds
    }
    settings: dict[str, Any] = {
        "hooksConfig": {"enabled": True},
        "hooks": {event: [{"hooks": [hook]}] for event in EVENTS},
        # The office pins the CLI: no update check, no nag in the pane.
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    }
    kind = auth_type(env) or sign_in
    if kind is not None:
        settings["security"] = {"auth": {"selectedType": kind}}
    return settings


# Keys the office sets only where the desk's settings have none (the person may change
# them in /settings). The alternate screen: Gemini's normal-buffer UI erases its last
# frame by line count, so a narrower pane (every desk starts at the office's default
# size, then takes its box's; zoom and grid change it again) leaves the old frame's
# rewrapped lines above the new one, in tmux as in the office; in the alternate screen
# it redraws whole (tests/e2e/test_gemini_desk.py, the parity test).
DEFAULTS: dict[str, Any] = {"ui": {"useAlternateBuffer": True}}


def with_defaults(kept: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`kept` with each of `defaults`' keys it lacks (objects are looked into)."""
    merged = dict(kept)
    for key, value in defaults.items():
        old = merged.get(key)
        if key not in merged:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(old, dict):
            merged[key] = with_defaults(old, value)
    return merged


def merge_settings(kept: Mapping[str, Any], office: Mapping[str, Any]) -> dict[str, Any]:
    """`kept` (what Gemini wrote) with the office's keys laid over it: objects merge
    key by key, anything else the office names replaces the old value."""
    merged = dict(kept)
    for key, value in office.items():
        old = merged.get(key)
        if isinstance(value, dict) and isinstance(old, dict) and key != "hooks":
            merged[key] = merge_settings(old, value)
        else:
            merged[key] = value
    return merged


def read_settings(path: Path) -> dict[str, Any]:
    """The settings Gemini last wrote; empty when absent or not a JSON object."""
    try:
        raw = read_regular(path, SETTINGS_MAX, follow=False)
        found = msgspec.json.decode(raw)
    except (OSError, UnsafeFile, msgspec.DecodeError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


class GeminiProvider:
    name: ProviderName = "gemini"
    hookless = False

    def executable(self, agent: AgentSpec) -> str:
        return agent.command[0] if agent.command else "gemini"

    def install_hint(self, *, here: bool = True) -> str:
        setup = CHECKOUT / "scripts" / "setup"
        if here and setup.is_file():
            return (
                f"Run {setup} (it puts the pinned Gemini CLI in .venv/bin), or install it "
                f"with `npm install -g {NPM_PACKAGE}`."
            )
        return f"Install Gemini CLI with `npm install -g {NPM_PACKAGE}`."

    def start_hint(self) -> str:
        return (
            "Set GEMINI_API_KEY (in the environment or the desk's `env` in office.toml), "
            "or sign in once in its pane."
        )

    def prepare(self, ctx: LaunchContext) -> Launch:
        home = gemini_home(ctx.paths, ctx.agent.id)
        path = settings_file(ctx.paths, ctx.agent.id)
        folder = path.parent
        folder.mkdir(parents=True, exist_ok=True)
        env = interactive_env(office_env(ctx), ctx.agent.env)
        # Read-only on disk: no agent needs to change what the office tells its CLI.
        atomic_write(folder / "GEMINI.md", ctx.system_prompt.encode(), mode=READ_ONLY_MODE)
        (folder / "policies").mkdir(exist_ok=True)
        atomic_write(folder / "policies" / POLICY_FILE, POLICY.encode(), mode=READ_ONLY_MODE)
        # Not read-only: Gemini records the person's choices (sign-in, model) there.
        kept = read_settings(path)
        share_login(ctx.paths, folder)
        sign_in = None if selected_type(kept) else sign_in_elsewhere(ctx.paths, ctx.agent.id)
        office = office_settings(ctx.hook_command, env, sign_in)
        settings = merge_settings(with_defaults(kept, DEFAULTS), office)
        atomic_write(path, msgspec.json.format(msgspec.json.encode(settings)))
        env[HOME_VAR] = str(home)
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
        argv = program_argv(ctx.agent, self.executable(ctx.agent), env)
        argv += ["--resume", ctx.session_id] if ctx.resume else ["--session-id", ctx.session_id]
        if ctx.agent.model:
            argv += ["--model", ctx.agent.model]
        if ctx.first_prompt:
            argv += ["--prompt-interactive", ctx.first_prompt]
        return Launch(argv=argv, env=env, cwd=agent_cwd(ctx.agent))

    def canonical(self, raw: dict[str, Any]) -> CanonicalEvent | None:
        name = EVENTS.get(text_field(raw.get("hook_event_name")) or "")
        if name is None:
            return None
        tool = text_field(raw.get("tool_name"))
        tool_input = raw.get("tool_input")
        kind = text_field(raw.get("notification_type"))
        return CanonicalEvent(
            name=name,
            session_id=text_field(raw.get("session_id")),
            tool_name=TOOLS.get(tool, tool) if tool else None,
            tool_input=tool_input if isinstance(tool_input, dict) else {},
            prompt=text_field(raw.get("prompt")),
            stop_hook_active=raw.get("stop_hook_active") is True,
            notification_type=NOTIFICATIONS.get(kind, kind) if kind else None,
            message=text_field(raw.get("message")),
            cwd=text_field(raw.get("cwd")),
        )

    def summary_command(self, agent: AgentSpec, request: SummaryRequest) -> None:
        """Gemini CLI has no structured headless answer the office has pinned; its
        notes are folded by rule."""
        return None

    def usage_source(
        self, agent: AgentSpec, paths: HivePaths, env: Mapping[str, str], sessions: Sequence[str]
    ) -> UsageSource:
        """The chat records under the agent's own GEMINI_CLI_HOME: all of them are its."""
        return UsageSource(files=gemini_files(gemini_home(paths, agent.id)), parser=gemini_parser)

    def render(self, event: CanonicalEvent, decision: HookDecision) -> HookAnswer:
        output: dict[str, Any] | None = None
        if decision.block is not None and event.name == "Stop":
            output = {"decision": "deny", "reason": decision.block}
        elif decision.deny is not None and event.name == "PreToolUse":
            output = {"decision": "deny", "reason": decision.deny}
        elif decision.rewrite is not None and event.name == "PreToolUse":
            # BeforeTool merges hookSpecificOutput.tool_input into the call's arguments.
            output = {"hookSpecificOutput": {"tool_input": decision.rewrite}}
        elif decision.context and event.name in CONTEXT_EVENTS:
            output = {"hookSpecificOutput": {"additionalContext": decision.context}}
        if output is None:
            return HookAnswer()
        return HookAnswer(stdout=msgspec.json.encode(output).decode())


# --- usage: <GEMINI_CLI_HOME>/.gemini/tmp/<project>/chats/session-*.jsonl -------------------


class _GeminiTokens(msgspec.Struct):
    input: int = 0
    output: int = 0
    cached: int = 0
    thoughts: int = 0
    tool: int = 0


class _GeminiLine(msgspec.Struct):
    type: str = ""
    id: str = ""
    timestamp: str = ""
    model: str = ""
    tokens: _GeminiTokens | None = None


_gemini_line = msgspec.json.Decoder(_GeminiLine)


def gemini_line(line: bytes) -> UsageRecord | None:
    """A model answer's usage. `input` counts the cached prompt too (the API's
    promptTokenCount), thoughts are billed as output; the message id is the key, so an
    answer appended again (its usage, its tool calls) counts once."""
    if b'"tokens"' not in line:
        return None
    try:
        parsed = _gemini_line.decode(line)
    except msgspec.DecodeError:
        return None
    t = parsed.tokens
    if parsed.type != "gemini" or t is None or not parsed.id:
        return None
    cached = min(t.cached, t.input)
    tokens = Tokens(
        input=t.input - cached + t.tool, output=t.output + t.thoughts, cache_read=cached
    )
    return UsageRecord(key=parsed.id, ts=parsed.timestamp, model=parsed.model, tokens=tokens)


def gemini_parser(_path: Path) -> LineParser:
    return gemini_line


def gemini_files(home: Path) -> list[Path]:
    return sorted((home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
