"""A plain shell: no hooks, so its mail shows in its pane title and the manager is told."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from hive_core.agents.provider import (
    CanonicalEvent,
    HookAnswer,
    HookDecision,
    Launch,
    LaunchContext,
    SummaryRequest,
    agent_cwd,
    office_env,
)
from hive_core.paths import HivePaths
from hive_core.schema import AgentSpec, ProviderName

DEFAULT_SHELL = "/bin/bash"


class ShellProvider:
    name: ProviderName = "shell"
    hookless = True

    def executable(self, agent: AgentSpec) -> str:
        return agent.command[0] if agent.command else os.environ.get("SHELL") or DEFAULT_SHELL

    def install_hint(self, *, here: bool = True) -> str:
        return "Set SHELL to an installed shell, or give the agent a `command` in office.toml."

    def start_hint(self) -> str:
        return "Check the agent's `command` in office.toml (or $SHELL); its pane shows why."

    def prepare(self, ctx: LaunchContext) -> Launch:
        env = office_env(ctx)
        # The person types into this one: interactive, whatever its stdin looks like.
        argv = ctx.agent.command or [ctx.base_env.get("SHELL") or DEFAULT_SHELL, "-i"]
        return Launch(argv=list(argv), env=env, cwd=agent_cwd(ctx.agent))

    def canonical(self, raw: dict[str, Any]) -> CanonicalEvent | None:
        return None

    def summary_command(self, agent: AgentSpec, request: SummaryRequest) -> None:
        """A shell has no model to summarise with; its notes are folded by rule."""
        return None

    def usage_source(
        self, agent: AgentSpec, paths: HivePaths, env: Mapping[str, str], sessions: Sequence[str]
    ) -> None:
        """A shell has no model: no usage."""
        return None

    def render(self, event: CanonicalEvent, decision: HookDecision) -> HookAnswer:
        return HookAnswer()
