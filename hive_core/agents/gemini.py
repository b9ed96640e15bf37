"""Google Gemini CLI: hooks and identity through a per-agent system settings file.

Each agent runs with `GEMINI_CLI_SYSTEM_SETTINGS_PATH=<home>/agent-settings/gemini/<id>/
settings.json`, so nothing is written to ~/.gemini or the user's repo. System settings
take precedence over the user's and the project's; `hooks` arrays are concatenated
across layers, so the user's own hooks still run. The office writes, at every start:

- `settings.json`: a command hook running cth-hook for SessionStart, BeforeAgent,
  BeforeTool, AfterTool, AfterAgent, Notification and SessionEnd, hooks switched on,
  and `context.includeDirectories` naming the folder below.
- `context/GEMINI.md`: the identity and protocol digest. Gemini loads GEMINI.md files
  from every workspace directory (includeDirectories among them) as instructional
  context. GEMINI_SYSTEM_MD was not used: it replaces Gemini's whole system prompt.

The agent also gets `GEMINI_CLI_TRUST_WORKSPACE=true`: the roster put it in that folder,
and an untrusted folder loads no workspace context (so no identity).

Facts from Gemini CLI 0.61.0 (its bundled docs "Hooks reference", "Gemini CLI hooks",
"Configuration", "System Prompt Override", "Provide context with GEMINI.md files",
"Tools reference", and its code):
- Hook stdin carries `session_id`, `cwd`, `hook_event_name`, `timestamp`, plus
  `source` (SessionStart), `prompt` (BeforeAgent), `tool_name`/`tool_input` (tool
  events), `stop_hook_active` (AfterAgent), `notification_type`/`message`
  (Notification; "ToolPermission" is a permission prompt).
- Replies: `{"decision": "deny", "reason"}` refuses a BeforeTool call (the reason goes
  to the model as the tool's error) and, at AfterAgent, rejects the answer and sends
  the reason as the next prompt; `hookSpecificOutput.additionalContext` is added at
  SessionStart, BeforeAgent and AfterTool.
- A hook command is one shell string. Settings values expand `${VAR}` from Gemini's own
  environment when loaded, while a hook's environment loses names matching SECRET,
  KEY, TOKEN... whenever variable redaction is on (a setting, or always under GitHub
  Actions). The command therefore names the office's variables as `${HIVE_*}`: their
  values are in the command Gemini builds, and never in the file.

What Gemini does not offer:
- Since google-gemini/gemini-cli PR #29115 a system settings file is skipped, with a
  "Security Warning", unless the file and every folder above it are owned by root and
  not writable by group or others. Checked on 0.61.0: a settings file owned by a user,
  or anywhere under /tmp, is ignored. So for an office home owned by a normal user
  these hooks do not run, and the agent is effectively hookless; a per-agent
  GEMINI_CLI_HOME (a whole private ~/.gemini, login included) is the way around it.
- Tools without a Claude Code counterpart (list_directory, read_many_files, MCP tools
  named `mcp_<server>_<tool>`, ...) keep their Gemini names, so rules keyed on Claude's
  names do not apply to them. Notification only reports permission prompts, never idle.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from hive_core.agents.provider import (
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
from hive_core.fsio import READ_ONLY_MODE, atomic_write
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec

# Milliseconds Gemini waits for one hook; the shim gives up well before this.
HOOK_TIMEOUT_MS = 10_000
HOOK_NAME = "hive-office"
SETTINGS_PATH_VAR = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"

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
_CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")
# Spelled out in the hook command so they survive Gemini's environment redaction.
_FORWARDED = ("HIVE_HOME", "HIVE_AGENT_ID", "HIVE_SECRET", "HIVE_SOCKET")


def settings_dir(paths: HivePaths, agent_id: str) -> Path:
    return paths.provider_home("gemini", agent_id)


def hook_shell_command(hook_command: list[str]) -> str:
    prefix = " ".join(f'{name}="${{{name}}}"' for name in _FORWARDED)
    return f"{prefix} {shlex.join(hook_command)}"


def settings_for(hook_command: list[str], context_dir: Path) -> dict[str, Any]:
    hook = {
        "name": HOOK_NAME,
        "type": "command",
        "command": hook_shell_command(hook_command),
        "timeout": HOOK_TIMEOUT_MS,
    }
    return {
        "hooksConfig": {"enabled": True},
        "hooks": {event: [{"hooks": [hook]}] for event in EVENTS},
        "context": {"includeDirectories": [str(context_dir)]},
    }


class GeminiProvider:
    name = "gemini"
    hookless = False

    def executable(self, agent: AgentSpec) -> str:
        return agent.command[0] if agent.command else "gemini"

    def install_hint(self, *, here: bool = True) -> str:
        return "Install Gemini CLI with `npm install -g @google/gemini-cli`."

    def start_hint(self) -> str:
        return "Log in with `gemini` once, or set GEMINI_API_KEY."

    def prepare(self, ctx: LaunchContext) -> Launch:
        folder = settings_dir(ctx.paths, ctx.agent.id)
        context_dir = folder / "context"
        context_dir.mkdir(parents=True, exist_ok=True)
        # Read-only on disk: no agent needs to change what the office tells its CLI.
        atomic_write(context_dir / "GEMINI.md", ctx.system_prompt.encode(), mode=READ_ONLY_MODE)
        settings = settings_for(ctx.hook_command, context_dir)
        atomic_write(
            folder / "settings.json",
            msgspec.json.format(msgspec.json.encode(settings)),
            mode=READ_ONLY_MODE,
        )
        env = office_env(ctx)
        env[SETTINGS_PATH_VAR] = str(folder / "settings.json")
        env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
        argv = program_argv(ctx.agent, self.executable(ctx.agent), env)
        argv += ["--resume", ctx.session_id] if ctx.resume else ["--session-id", ctx.session_id]
        if ctx.agent.model:
            argv += ["--model", ctx.agent.model]
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
    ) -> None:
        """Gemini CLI's usage records are not read (yet): its cost is not shown."""
        return None

    def render(self, event: CanonicalEvent, decision: HookDecision) -> HookAnswer:
        output: dict[str, Any] | None = None
        if decision.block is not None and event.name == "Stop":
            output = {"decision": "deny", "reason": decision.block}
        elif decision.deny is not None and event.name == "PreToolUse":
            output = {"decision": "deny", "reason": decision.deny}
        elif decision.rewrite is not None and event.name == "PreToolUse":
            # BeforeTool merges hookSpecificOutput.tool_input into the call's arguments.
            output = {"hookSpecificOutput": {"tool_input": decision.rewrite}}
        elif decision.context and event.name in _CONTEXT_EVENTS:
            output = {"hookSpecificOutput": {"additionalContext": decision.context}}
        if output is None:
            return HookAnswer()
        return HookAnswer(stdout=msgspec.json.encode(output).decode())
