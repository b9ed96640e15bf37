"""What the office knows about each agent while it runs (in memory; registry.json is
its published form). Secrets live only here and in the agent's environment.

`AgentStates` is the one owner: what others see of an agent (the registry, the app's
map and titles) changes only inside `AgentStates.edit`, which tells the listeners once
when the edit ends. Writing such a field outside an edit raises, so no writer can
forget to announce its change."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hive_core.errors import OfficeError
from hive_core.schema import AgentSpec, RegistryEntry, Status
from hive_core.status import AgentStatus, Failure


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
    # Its CLI exited as soon as it started: how, and what to do (None: it did not).
    start_failed: str | None = None
    # Why its CLI runs without the office's containment (desks/contain.py); None: it
    # is contained (or has not started).
    uncontained: str | None = None
    # The explained state (hive_core/status.py), kept current by the office.
    explained: AgentStatus | None = None
    # Signals only the explanation reads (set inside the event plane's edit): the last
    # hook event and its wall-clock time, a permission prompt's text, the CLI's report
    # of a failed turn (until the next turn starts), and the unread mail the Stop drain
    # let go at its cap (ids, when, after how many blocks).
    event: str | None = None
    event_at: float | None = None
    prompt: str | None = None
    failure: Failure | None = None
    released: frozenset[str] = frozenset()
    released_at: float | None = None
    released_blocks: int = 0

    def __post_init__(self) -> None:
        # From here on, what others see changes only inside AgentStates.edit.
        object.__setattr__(self, "_edits", 0)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SEEN and self.__dict__.get("_edits") == 0:
            raise AgentStateError(
                f"{self.spec.id}.{name} is seen by others: change it inside "
                "AgentStates.edit(), which announces the change"
            )
        object.__setattr__(self, name, value)

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
            state=self.explained.kind if self.explained else None,
            why=self.explained.why if self.explained else None,
            evidence=self.explained.evidence if self.explained else None,
        )


# What others see of an agent: the registry's fields and what the app shows.
SEEN = frozenset(
    {
        "status",
        "session_id",
        "last_tool",
        "last_seen",
        "pid",
        "exit_status",
        "paused",
        "halted",
        "mail_title",
        "missing",
        "start_failed",
        "uncontained",
        "explained",
    }
)


class AgentStateError(OfficeError, RuntimeError):
    """A field others see was written outside AgentStates.edit (a bug in the writer)."""


class AgentStates(Mapping[str, AgentState]):
    """Every agent's state, by id, and who is told when one changes."""

    def __init__(self, states: Iterable[AgentState]) -> None:
        self._states = {state.id: state for state in states}
        self.listeners: list[Callable[[AgentState], None]] = []

    def __getitem__(self, agent_id: str) -> AgentState:
        return self._states[agent_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def add(self, state: AgentState) -> None:
        """A hired agent joins (hive_core/team/hire.py); the listeners hear of it as of a
        change. A new dict, not an insert: a thread walking the old one is not disturbed."""
        if state.id in self._states:
            raise KeyError(f"{state.id} is already on the roster")
        self._states = {**self._states, state.id: state}
        for listener in self.listeners:
            listener(state)

    @contextlib.contextmanager
    def edit(self, agent_id: str) -> Iterator[AgentState]:
        """Change what others see of an agent; the listeners hear of it once, when the
        outermost edit ends (also if it ends by an exception: what changed, changed)."""
        state = self._states[agent_id]
        edits: int = state.__dict__["_edits"]
        object.__setattr__(state, "_edits", edits + 1)
        try:
            yield state
        finally:
            object.__setattr__(state, "_edits", edits)
            if edits == 0:
                for listener in self.listeners:
                    listener(state)
