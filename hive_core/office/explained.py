"""The office's side of the explained status (hive_core/status.py): gather each agent's
signals, decide, and publish the result through AgentStates when it changes.

It is decided again when an agent's state changes (a hook event, an exit, the person's
pause), and on a slow timer for what changes with time alone (a stall, a limit the CLI
printed). It also keeps what nobody else keeps: each pane's limit reports as its screen
showed them at its last hook event, so a rate or usage limit drawn since (a CLI that
retries) is told from one left over on screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from hive_core.agents.provider import Provider
from hive_core.desks.state import AgentState, AgentStates
from hive_core.desks.supervisor import Supervisor
from hive_core.events.unread import UnreadIndex
from hive_core.status import (
    SIGN_IN_OVERLAP,
    AgentStatus,
    Signals,
    WakeSeen,
    explain,
    limit_texts,
    new_limit_text,
    sign_in_drawn,
)
from hive_core.team.wake import Watchdog, wake_seen
from hive_core.text import one_line

# Time alone turns a working agent into a stalled one: looked at this often. One pass
# over 20 agents costs well under a millisecond.
STATUS_TICK_S = 2.0


class Screens(Protocol):
    def screen_text(self, agent_id: str) -> list[str]:
        """The agent's screen as the office keeps it, as text lines (clients/grids.py)."""
        ...


class StatusKeeper:
    def __init__(
        self,
        states: AgentStates,
        supervisor: Supervisor,
        providers: Mapping[str, Provider],
        inboxes: UnreadIndex,
        watchdog: Watchdog,
        screens: Screens,
        *,
        stall_after_s: float,
        cap_told: Callable[[str], frozenset[str]],
        log: Callable[[str, str], None],
        command: str = "hive-office",
    ) -> None:
        self.states = states
        self.supervisor = supervisor
        self.providers = providers
        self.inboxes = inboxes
        self.watchdog = watchdog
        self.stall_after_s = stall_after_s
        # The released ids someone was told about, per agent (the office's notices).
        self.cap_told = cap_told
        self.log = log
        # The office's `hive-office` command line, which the sentences of why name.
        self.command = command
        # The last failure logged per agent, so a lasting one is logged once.
        self.faults: dict[str, str] = {}
        self.screens = screens
        # The end of each pane's output, where a sign-in split across two chunks starts.
        self.tails: dict[str, bytes] = {}
        self.output_at: dict[str, float] = {}
        self.started_at: dict[str, tuple[int, float]] = {}
        # The limit text as last read from the screen; gone once the pane prints again.
        self._limit: dict[str, str | None] = {}
        # The limit reports each screen showed at the agent's last hook event.
        self._limits_before: dict[str, list[str]] = {}
        # Whether the pane last drew its CLI's sign-in since the last hook event.
        self._sign_ins: dict[str, bool] = {}
        supervisor.sinks.append(self.output)

    def output(self, agent_id: str, data: bytes) -> None:
        """A pane printed (the supervisor's sink): once per chunk, so only bookkeeping."""
        self.output_at[agent_id] = time.time()
        seen = self.tails.get(agent_id, b"") + data
        drawn = sign_in_drawn(seen)
        if drawn is not None:
            self._sign_ins[agent_id] = drawn
        self.tails[agent_id] = seen[-SIGN_IN_OVERLAP:]
        self._limit.pop(agent_id, None)

    def hook_event(self, agent_id: str) -> None:
        """What the pane drew before a hook event is older than what the hooks say."""
        self.tails.pop(agent_id, None)
        self._limits_before[agent_id] = limit_texts(self.screens.screen_text(agent_id))
        self._limit[agent_id] = None
        self._sign_ins[agent_id] = False
        self.refresh(agent_id)

    def signals(self, state: AgentState, now: float) -> Signals:
        session = self.supervisor.sessions.get(state.id)
        alive = session is not None and session.alive
        unread, ids = self.inboxes.snapshot(state.id)
        first = min(unread, key=lambda m: m.id) if unread else None
        hookless = self.providers[state.spec.provider].hookless
        # Why mail waits matters only at the prompt; the set operations below are the
        # costly part at 20k unread, so a busy agent's hook events skip them.
        held = alive and state.status == "idle" and not hookless and bool(ids)
        released = state.released & ids if held else frozenset()
        return Signals(
            id=state.id,
            status=state.status,
            hookless=hookless,
            send_only=state.spec.send_only,
            alive=alive,
            pid=state.pid,
            event=state.event,
            event_at=state.event_at,
            tool=state.last_tool,
            prompt=one_line(state.prompt, 160) if state.prompt else None,
            output_at=self.output_at.get(state.id),
            started_at=self._started(state, now),
            exit_status=state.exit_status,
            start_failed=state.start_failed,
            missing=state.missing,
            link=self.supervisor.links.get(state.id),
            uncontained=state.uncontained,
            paused=state.paused,
            halted=state.halted,
            unread=len(ids),
            first_unread=(
                f"{first.id} from {one_line(first.sender, 64)}: "
                f"{one_line(first.subject, 80) or '(no subject)'}"
                if first
                else None
            ),
            told=len(ids & state.told_in_turn) if held else 0,
            released=len(released),
            released_at=state.released_at,
            blocks=state.released_blocks,
            manager_told=bool(released & self.cap_told(state.id)),
            wake=wake_seen(
                self.watchdog.memory.get(state.id),
                self.watchdog.holds.get(state.id),
                ids,
                self.watchdog.nudged_at.get(state.id),
            )
            if held
            else WakeSeen(),
            failure=state.failure,
            limit_text=self._limit_text(state.id) if alive else None,
            sign_in=alive and self._sign_ins.get(state.id, False),
            stall_after_s=self.stall_after_s,
            command=self.command,
        )

    def _started(self, state: AgentState, now: float) -> float | None:
        """When its CLI started, wall-clock, fixed per process (so the evidence is)."""
        if state.pid is None:
            return None
        known = self.started_at.get(state.id)
        if known is None or known[0] != state.pid:
            since = self.supervisor.started_ago(state.id)
            known = (state.pid, now - since if since is not None else now)
            self.started_at[state.id] = known
        return known[1]

    def _limit_text(self, agent_id: str) -> str | None:
        if agent_id in self._limit:
            return self._limit[agent_id]
        found = new_limit_text(
            limit_texts(self.screens.screen_text(agent_id)),
            self._limits_before.get(agent_id, ()),
        )
        self._limit[agent_id] = found
        return found

    def explain(self, agent_id: str) -> AgentStatus:
        now = time.time()
        return explain(self.signals(self.states[agent_id], now), now)

    def refresh(self, agent_id: str) -> None:
        """Decide again; publish only a change (the edit announces it). Runs inside
        whoever changed the agent (a hook's reply): a failure here is logged, not raised."""
        try:
            status = self.explain(agent_id)
        except Exception as exc:
            if self.faults.get(agent_id) != repr(exc):
                self.faults[agent_id] = repr(exc)
                self.log(agent_id, f"its status could not be explained: {exc!r}")
            return
        self.faults.pop(agent_id, None)
        if status != self.states[agent_id].explained:
            with self.states.edit(agent_id) as state:
                state.explained = status

    def refresh_all(self) -> None:
        for agent_id in self.states:
            self.refresh(agent_id)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.refresh_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), STATUS_TICK_S)
