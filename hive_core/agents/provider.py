"""The provider seam: what the office needs from each agent CLI (claude, codex, gemini, shell).

A provider turns an agent's roster entry into a launch (argv, environment, config files
it writes under the office home, never in the user's repo or home config), maps the
CLI's own hook events onto the office's canonical events (Claude's names), and renders
the office's canonical decision back into the reply that CLI understands.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import msgspec

import cth_hook
from hive_core.agents.usage import UsageSource
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ProviderName

# The office's event names (Claude Code's); other providers' events are mapped onto them.
EventName = Literal[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Notification",
    "Stop",
    "StopFailure",
    "SessionEnd",
]
EVENT_NAMES: tuple[EventName, ...] = get_args(EventName)
# Seconds a CLI waits for one run of the office's hook command before it gives up on it
# (each vendor's settings take it in its own unit); the shim's own deadline is shorter,
# so this only matters if the shim itself is stuck.
HOOK_TIMEOUT_S = 10


@dataclass(frozen=True)
class CanonicalEvent:
    """A hook event in the office's terms, whatever CLI sent it."""

    name: EventName
    session_id: str | None = None
    tool_name: str | None = None  # Claude's tool names: Bash, Write, Edit, WebFetch, ...
    tool_input: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None
    stop_hook_active: bool = False
    notification_type: str | None = None  # "permission_prompt" means: waiting for the person
    message: str | None = None
    cwd: str | None = None
    # StopFailure: the API error that ended the turn (rate_limit, billing_error, ...).
    error: str | None = None


# The events whose answer can carry extra text for the model, in every CLI the office runs.
CONTEXT_EVENTS: tuple[EventName, ...] = ("SessionStart", "UserPromptSubmit", "PostToolUse")


@dataclass(frozen=True)
class HookDecision:
    """What the office wants the CLI to do; each provider renders it its own way."""

    context: str | None = None  # extra text for the model (CONTEXT_EVENTS)
    deny: str | None = None  # PreToolUse: refuse the tool, with a reason the model can act on
    # PreToolUse: run the tool with this input instead (the CI-log rewrite, hive_core/ci/rewrite.py).
    rewrite: dict[str, Any] | None = None
    block: str | None = None  # Stop: keep going, with this as the next instruction


@dataclass(frozen=True)
class HookAnswer:
    """The shim's exit code and output, as the CLI expects them."""

    exit: int = 0
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True)
class LaunchContext:
    paths: HivePaths
    agent: AgentSpec
    secret: str
    session_id: str  # a UUID: new on first start, the previous one on restart
    resume: bool  # True when the CLI should resume `session_id`
    system_prompt: str  # identity + protocol digest
    hook_command: list[str]  # argv that runs cth-hook (absolute paths)
    path_prepend: list[str]  # folders to put first on PATH so `hive` and `cth-hook` resolve
    base_env: dict[str, str]  # the environment to start from (TMUX and friends removed)
    # The first turn, given to the CLI as its initial prompt (never typed into the pane).
    first_prompt: str | None = None


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path


@dataclass(frozen=True)
class SummaryRequest:
    """What the office asks an agent's CLI once, headless, to summarise (the memory tidy):
    a system prompt, and the JSON Schema (as text) its answer must match. The prompt
    itself goes on stdin: it can outgrow an argv string."""

    system_prompt: str
    schema: str


@dataclass(frozen=True)
class SummaryCommand:
    """How a CLI answers a SummaryRequest: `argv` runs it with no tools and no session
    kept, reading the prompt on stdin; `answer` takes what it printed and returns the
    structured answer, or raises ValueError saying what is wrong with the output."""

    argv: list[str]
    answer: Callable[[bytes], object]


class Provider(Protocol):
    name: ProviderName
    # A hookless CLI cannot drain mail at the end of a turn: the office shows its mail
    # in its pane title instead and tells the manager.
    hookless: bool

    def executable(self, agent: AgentSpec) -> str:
        """The program the agent runs (for `doctor` and the "install it" message)."""
        ...

    def install_hint(self, *, here: bool = True) -> str:
        """One sentence: how to install this CLI; `here` False: on another host (a remote
        desk's), where this machine's checkout and paths mean nothing."""
        ...

    def start_hint(self) -> str:
        """One sentence: what to do when this CLI exits as soon as it starts (no login,
        no key, a bad `command`)."""
        ...

    def prepare(self, ctx: LaunchContext) -> Launch:
        """Write the agent's per-agent config under the office home and return the launch."""
        ...

    def canonical(self, raw: dict[str, Any]) -> CanonicalEvent | None:
        """Map the CLI's hook event onto the office's; None for events the office ignores."""
        ...

    def summary_command(self, agent: AgentSpec, request: SummaryRequest) -> SummaryCommand | None:
        """How the agent's own CLI answers `request` headless, without tools; None if it
        cannot be trusted to (the tidy then folds by rule)."""
        ...

    def render(self, event: CanonicalEvent, decision: HookDecision) -> HookAnswer:
        """The reply this CLI understands for `decision`."""
        ...

    def usage_source(
        self, agent: AgentSpec, paths: HivePaths, env: Mapping[str, str], sessions: Sequence[str]
    ) -> UsageSource | None:
        """The CLI's own records of the agent's token usage (files and how to read them),
        given the agent's environment (the office's and the roster's `env`) and the
        sessions the office saw it run; None if it keeps none the office can read."""
        ...


# Variables an agent must not inherit: it is not inside the person's tmux, and the
# person's own Claude/Anthropic login must not leak into a scripted or separate setup.
_NOT_INHERITED = ("TMUX", "TMUX_PANE", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "HIVE_HOOK_TIMEOUT")


def office_env(ctx: LaunchContext) -> dict[str, str]:
    """The environment every agent process gets, whatever its provider."""
    env = {k: v for k, v in ctx.base_env.items() if k not in _NOT_INHERITED}
    env.update(ctx.agent.env)  # the roster's env first: it may not override the office's
    env.update(
        HIVE_HOME=str(ctx.paths.home),
        HIVE_AGENT_ID=ctx.agent.id,
        HIVE_SECRET=ctx.secret,
        HIVE_SOCKET=str(ctx.paths.hook_socket),
        TERM="xterm-256color",
        COLORTERM="truecolor",
        PATH=":".join([*ctx.path_prepend, env.get("PATH", "/usr/bin:/bin")]),
    )
    return env


def agent_cwd(agent: AgentSpec) -> Path:
    return Path(agent.cwd).expanduser()


def program_argv(agent: AgentSpec, default: str, env: dict[str, str]) -> list[str]:
    """The roster's `command` (or the provider's default program), its first word
    resolved on the agent's own PATH so the office's PATH does not decide."""
    program = agent.command or [default]
    return [shutil.which(program[0], path=env["PATH"]) or program[0], *program[1:]]


def claude_shaped_answer(event: CanonicalEvent, decision: HookDecision) -> HookAnswer:
    """`decision` as the JSON on stdout that Claude Code's hooks read, and Codex's, which
    copied them: a Stop block, a PreToolUse deny or rewrite, or context for the model."""
    output: dict[str, Any] | None = None
    if decision.block is not None and event.name == "Stop":
        output = {"decision": "block", "reason": decision.block}
    elif decision.deny is not None and event.name == "PreToolUse":
        output = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": decision.deny,
            }
        }
    elif decision.rewrite is not None and event.name == "PreToolUse":
        # Only an "allow" applies updatedInput; the CLI's own deny and ask rules still
        # run on the rewritten call.
        output = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "read from the office's CI-log cache",
                "updatedInput": decision.rewrite,
            }
        }
    elif decision.context and event.name in CONTEXT_EVENTS:
        output = {
            "hookSpecificOutput": {
                "hookEventName": event.name,
                "additionalContext": decision.context,
            }
        }
    if output is None:
        return HookAnswer()
    return HookAnswer(stdout=msgspec.json.encode(output).decode())


def text_field(value: object) -> str | None:
    """A hook payload field, if it is a string (payloads come from another program)."""
    return value if isinstance(value, str) else None


def hook_command() -> list[str]:
    """How agent CLIs run the shim: the venv's interpreter on the shim's file, isolated
    (-I: no PYTHON* variables or user site) and without site start-up (-S), which
    makes a hook about 10 ms faster than the console-script wrapper."""
    return [sys.executable, "-I", "-S", str(Path(cth_hook.__file__).parent / "__main__.py")]


def tool_path() -> list[str]:
    """Folders that must come first on an agent's PATH so `hive` and `cth-hook` resolve."""
    return [str(Path(sys.executable).parent)]
