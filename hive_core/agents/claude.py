"""Claude Code: hooks and permissions through a per-agent `--settings` file.

Nothing is written to the user's repo or ~/.claude: the settings file lives in
`<home>/agent-settings/<id>.json`, identity rides in `--append-system-prompt`, and the
user's own settings and permission rules still apply to everything else.

Facts from claude 2.1.197 (tests/e2e/test_claude_real.py pins them): every hook event
carries `hook_event_name`, `session_id` and `cwd`; a Stop reply
`{"decision": "block", "reason": R}` continues the turn with "Stop hook feedback: R";
a PreToolUse deny reaches the model as an error tool result with the reason;
`additionalContext` is shown to the model on SessionStart, UserPromptSubmit and
PostToolUse; a Notification with `notification_type: "permission_prompt"` means a
permission dialog is open; a `permissions.deny` rule `Edit(//abs/path/**)` refuses every
file-editing tool there before any hook runs, and the model reads "File is in a
directory that is denied by your permission settings." (tests/e2e/test_policy_claude.py).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

import cth_hook
from hive_core.agents.provider import (
    EVENT_NAMES,
    HOOK_TIMEOUT_S,
    CanonicalEvent,
    HookAnswer,
    HookDecision,
    Launch,
    LaunchContext,
    SummaryCommand,
    SummaryRequest,
    agent_cwd,
    claude_shaped_answer,
    office_env,
    program_argv,
    text_field,
    tool_path,
)
from hive_core.agents.usage import UsageSource, claude_files, claude_parser
from hive_core.fsio import READ_ONLY_MODE, atomic_write
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ProviderName

# The `hive` CLI and its MCP tools are how agents coordinate; they must never wait on a
# permission prompt. `mcp__hive` allows every tool of the server named hive (2.1.197).
ALLOW_RULES = ["Bash(hive:*)", "mcp__hive"]


class _Command(msgspec.Struct):
    command: str
    type: str = "command"
    timeout: int = HOOK_TIMEOUT_S


class _Matcher(msgspec.Struct):
    hooks: list[_Command]
    matcher: str = "*"


class _Permissions(msgspec.Struct):
    allow: list[str]
    deny: list[str]


class ClaudeSettings(msgspec.Struct):
    """The part of Claude Code's settings.json the office writes."""

    hooks: dict[str, list[_Matcher]]
    permissions: _Permissions


class _McpServer(msgspec.Struct):
    command: str
    args: list[str]
    type: str = "stdio"


class McpConfig(msgspec.Struct):
    """An `--mcp-config` file: `hive mcp` as the server named hive. Claude 2.1.197 ignores
    mcpServers in a --settings file. No env here: the server inherits the agent's
    HIVE_AGENT_ID and HIVE_SECRET from claude, and the secret never touches the disk."""

    mcpServers: dict[str, _McpServer]


NPM_INSTALL = "npm install -g @anthropic-ai/claude-code"
# The checkout this package runs from, if it is one (scripts/setup is next to it).
CHECKOUT = Path(__file__).resolve().parents[2]


def claude_command(program: str = "claude") -> str:
    """How a person runs the claude the office starts: its name if their PATH finds
    it, else its path (scripts/setup puts it in .venv/bin, which is not on PATH)."""
    if shutil.which(program):
        return program

    search = os.pathsep.join([*tool_path(), os.environ.get("PATH", "")])
    return shutil.which(program, path=search) or program


def mcp_config_for(hive_executable: str) -> McpConfig:
    return McpConfig(mcpServers={"hive": _McpServer(command=hive_executable, args=["mcp"])})


def deny_rules(locked: Iterable[Path]) -> list[str]:
    """Claude Code's own refusal to edit the office's files, behind the hook's (which
    gives the model a reason): it holds if a hook goes unanswered. An `Edit(...)` rule
    covers every built-in tool that edits files (Write, MultiEdit, NotebookEdit too);
    `Write(...)` rules with a path are ignored with a warning. `//` starts an absolute
    path; a path reached through a link is named both ways."""
    rules = []
    for path in locked:
        for form in dict.fromkeys((str(path), os.path.realpath(path))):
            rules += [f"Edit(/{form})", f"Edit(/{form}/**)"]
    return rules


def settings_for(hook_command: list[str], locked: Iterable[Path] = ()) -> ClaudeSettings:
    command = _Command(command=shlex.join(hook_command))
    return ClaudeSettings(
        hooks={name: [_Matcher(hooks=[command])] for name in EVENT_NAMES},
        permissions=_Permissions(allow=ALLOW_RULES, deny=deny_rules(locked)),
    )


class ClaudeProvider:
    name: ProviderName = "claude"
    hookless = False

    def executable(self, agent: AgentSpec) -> str:
        return agent.command[0] if agent.command else "claude"

    def install_hint(self, *, here: bool = True) -> str:
        setup = CHECKOUT / "scripts" / "setup"
        if here and setup.is_file():  # a checkout: its setup installs the version the office pins
            return (
                f"Run {setup} (it puts the pinned Claude Code in .venv/bin), or install "
                f"it with `{NPM_INSTALL}`."
            )
        return f"Install Claude Code with `{NPM_INSTALL}`."

    def start_hint(self) -> str:
        return f"Log in once with `{claude_command()}` (/login), or set ANTHROPIC_API_KEY."

    def settings_path(self, ctx: LaunchContext) -> Path:
        return ctx.paths.settings_file(ctx.agent.id)

    def prepare(self, ctx: LaunchContext) -> Launch:
        path = self.settings_path(ctx)
        path.parent.mkdir(parents=True, exist_ok=True)
        locked = ctx.paths.locked(Path(cth_hook.__file__).parent)
        settings = settings_for(ctx.hook_command, locked)
        # Read-only on disk too: no agent needs to change its settings.
        atomic_write(path, msgspec.json.format(msgspec.json.encode(settings)), mode=READ_ONLY_MODE)
        env = office_env(ctx)
        mcp = ctx.paths.settings_file(ctx.agent.id, ".mcp.json")
        # A remote desk's `hive` is in the host's venv (path_prepend), not on this PATH.
        hive = (
            f"{ctx.path_prepend[0]}/hive"
            if ctx.agent.host and ctx.path_prepend
            else shutil.which("hive", path=env["PATH"]) or "hive"
        )
        atomic_write(
            mcp, msgspec.json.format(msgspec.json.encode(mcp_config_for(hive))), mode=READ_ONLY_MODE
        )
        argv = [*program_argv(ctx.agent, self.executable(ctx.agent), env), "--settings", str(path)]
        # `--mcp-config` takes several values: the `=` form keeps it from swallowing the
        # next argument. Without --strict-mcp-config the user's own servers still load.
        argv += [f"--mcp-config={mcp}"]
        argv += ["--append-system-prompt", ctx.system_prompt]
        argv += ["--resume", ctx.session_id] if ctx.resume else ["--session-id", ctx.session_id]
        if ctx.agent.model:
            argv += ["--model", ctx.agent.model]
        if ctx.first_prompt:
            argv += ["--", ctx.first_prompt]
        return Launch(argv=argv, env=env, cwd=agent_cwd(ctx.agent))

    def canonical(self, raw: dict[str, Any]) -> CanonicalEvent | None:
        name = raw.get("hook_event_name")
        if name not in EVENT_NAMES:
            return None
        tool_input = raw.get("tool_input")
        return CanonicalEvent(
            name=name,
            session_id=text_field(raw.get("session_id")),
            tool_name=text_field(raw.get("tool_name")),
            tool_input=tool_input if isinstance(tool_input, dict) else {},
            prompt=text_field(raw.get("prompt")),
            stop_hook_active=raw.get("stop_hook_active") is True,
            notification_type=text_field(raw.get("notification_type")),
            # StopFailure carries the error text the person saw as its last message.
            message=text_field(raw.get("message") or raw.get("last_assistant_message")),
            cwd=text_field(raw.get("cwd")),
            error=text_field(raw.get("error")),
        )

    def summary_command(self, agent: AgentSpec, request: SummaryRequest) -> SummaryCommand:
        """Headless: `--tools=` leaves no tool but the StructuredOutput one that
        `--json-schema` adds, and no session is saved."""
        program = agent.command or [self.executable(agent)]
        argv = [*program, *(["--model", agent.model] if agent.model else [])]
        argv += ["-p", "--output-format=json", "--tools=", f"--json-schema={request.schema}"]
        argv += ["--no-session-persistence", f"--system-prompt={request.system_prompt}"]
        return SummaryCommand(argv=argv, answer=structured_output)

    def usage_source(
        self, agent: AgentSpec, paths: HivePaths, env: Mapping[str, str], sessions: Sequence[str]
    ) -> UsageSource:
        """The session transcripts (`<config dir>/projects/<cwd slug>/<session>.jsonl`):
        every assistant line carries the API's usage. The office does not set the config
        dir (the person's login lives there), so transcripts are found by session id."""
        home = Path(env.get("HOME") or Path.home())
        config_dir = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude").expanduser()
        return UsageSource(files=claude_files(config_dir, sessions), parser=claude_parser)

    def render(self, event: CanonicalEvent, decision: HookDecision) -> HookAnswer:
        return claude_shaped_answer(event, decision)


def structured_output(stdout: bytes) -> object:
    """The answer in `claude -p --output-format=json --json-schema=...` output: the
    model's StructuredOutput tool input, which the CLI returns as `structured_output`."""
    try:
        result = msgspec.json.decode(stdout)
    except msgspec.DecodeError as e:
        raise ValueError(f"the CLI printed no JSON result ({e})") from None
    if not isinstance(result, dict) or result.get("is_error"):
        raise ValueError(f"the CLI reported an error: {str(result)[:200]}")
    if "structured_output" not in result:
        raise ValueError("the model did not return the structured answer")
    return result["structured_output"]
