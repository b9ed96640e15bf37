"""What the office knows about each agent while it runs (in memory; registry.json is
its published form). Secrets live only here and in the agent's environment."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

from hive_core.schema import AgentSpec, RegistryEntry, Status


@dataclass
class AgentState:
    spec: AgentSpec
    manager: bool
    secret: str = ""
    status: Status = "offline"
    session_id: str | None = None
    last_tool: str | None = None
    last_seen: str | None = None
    pid: int | None = None
    exit_status: int | None = None
    paused: bool = False
    halted: bool = False
    stop_blocks: int = 0
    # Message ids this session has already been told about (digests never repeat them).
    announced: set[str] = field(default_factory=set)
    # Of those, the ones told inside a turn (not just listed at SessionStart): the wake
    # path leaves these alone, since the agent was told while it could act.
    told_in_turn: set[str] = field(default_factory=set)
    # A hookless agent's unread summary, for its pane title (None: nothing to show).
    mail_title: str | None = None
    typed_at: float | None = None  # time.monotonic() of the person's last keystroke
    missing: str | None = None  # why the CLI could not start (not installed, ...)

    @property
    def id(self) -> str:
        return self.spec.id

    def new_secret(self) -> str:
        """One secret per start: a stale process from an earlier start is refused."""
        self.secret = secrets.token_urlsafe(24)
        return self.secret

    def typed(self) -> None:
        self.typed_at = time.monotonic()

    def typed_ago(self) -> float | None:
        return None if self.typed_at is None else time.monotonic() - self.typed_at

    def entry(self) -> RegistryEntry:
        spec = self.spec
        return RegistryEntry(
            id=spec.id,
            name=spec.name,
            role=spec.role,
            provider=spec.provider,
            manager=self.manager,
            web=spec.web,
            send_only=spec.send_only,
            status="archived" if spec.archived else self.status,
            paused=self.paused,
            session_id=self.session_id,
            last_tool=self.last_tool,
            last_seen=self.last_seen,
            pid=self.pid,
        )
