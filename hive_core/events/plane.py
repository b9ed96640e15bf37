"""The event plane's effects: turn an authenticated hook frame into a reply and a state change.

The hook server hands over (agent id, raw event); this module maps the event through
the agent's provider, takes the agent's unread mail from the office's index (unread.py),
asks `decide()` what to do, applies the outcome to the agent's state, logs it, and
renders the reply for that CLI.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec

import cth_hook
from hive_core.agents.provider import Provider
from hive_core.desks.state import AgentStates
from hive_core.events.policy import AgentView, OfficeFacts, decide
from hive_core.events.unread import UnreadIndex
from hive_core.fsio import append_line
from hive_core.ids import utc_now_iso
from hive_core.paths import HivePaths
from hive_core.schema import HookReply, LogEvent, OfficeConfig
from hive_core.status import Failure
from hive_core.team.leases import LeaseView, Repositories

_encode = msgspec.json.Encoder().encode


class EventPlane:
    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        states: AgentStates,
        providers: Mapping[str, Provider],
        *,
        touch: Callable[..., object],
    ) -> None:
        self.paths = paths
        self.states = states
        self.providers = providers
        self.touch = touch
        self.inboxes = UnreadIndex(paths, skipped=self._skipped)
        # Who else wants to know an event arrived (the wake path: UserPromptSubmit).
        self.on_event: list[Callable[[str, str], None]] = []
        self.memory_budget = config.office.memory_budget
        # The tool policy compares paths as the kernel opens them: links followed, for
        # the office's own folders as for every path it judges.
        home = Path(os.path.realpath(paths.home))
        self.facts = OfficeFacts(
            office=config.office.name,
            home=home,
            hive=HivePaths(home).hive,
            manager=config.office.manager,
            stop_block_cap=config.office.stop_block_cap,
            roster=[(a.id, a.name, a.role) for a in config.agents if not a.archived],
            web_agents=[a.id for a in config.agents if a.web and not a.archived],
            hook_program=Path(os.path.realpath(Path(cth_hook.__file__).parent)),
            resolve=os.path.realpath,
            repo_place=Repositories().place,
        )
        self.leases = LeaseView(paths)

    def secret_of(self, agent_id: str) -> str | None:
        state = self.states.get(agent_id)
        return state.secret if state and state.secret else None

    def rejected(self, agent_id: str, why: str) -> None:
        self.log(
            LogEvent(
                ts=utc_now_iso(), kind="hook", agent=agent_id, detail=f"refused a hook frame: {why}"
            )
        )

    def failed(self, agent_id: str, exc: BaseException) -> None:
        self.log(
            LogEvent(
                ts=utc_now_iso(),
                kind="hook",
                agent=agent_id,
                detail=f"a hook went unanswered (the shim fails open): {exc!r}"[:500],
            )
        )

    def _skipped(self, agent_id: str, name: str, why: str) -> None:
        self.log(
            LogEvent(
                ts=utc_now_iso(),
                kind="office",
                agent=agent_id,
                detail=f"left out of the unread view: inbox/{name[:100]}: {why}"[:500],
            )
        )

    async def handle(self, agent_id: str, raw: dict[str, Any]) -> HookReply:
        state = self.states[agent_id]
        provider = self.providers[state.spec.provider]
        event = provider.canonical(raw)
        if event is None:
            return HookReply()
        unread, ids = self.inboxes.snapshot(agent_id)
        view = AgentView(
            id=agent_id,
            name=state.spec.name,
            role=state.spec.role,
            manager=state.manager,
            web=state.spec.web,
            paused=state.paused,
            halted=state.halted,
            stop_blocks=state.stop_blocks,
            announced=state.announced,
            typed_ago=state.typed_ago(),
            memory=self._memory_of(agent_id) if event.name == "SessionStart" else "",
            host=state.spec.host,
        )
        facts = self.facts
        if event.name == "PreToolUse" and (held := self.leases.live(time.time())):
            facts = dataclasses.replace(facts, leases=held)
        outcome = decide(event, view, unread, facts, ids)
        before = state.status
        with self.states.edit(agent_id):
            # What the explained status reads (hive_core/status.py).
            state.event, state.event_at = event.name, time.time()
            if event.name == "SessionStart":
                state.announced.clear()
                state.told_in_turn.clear()
                state.released, state.failure = frozenset(), None
            elif event.name == "UserPromptSubmit":
                # Whatever the person was typing has been submitted: the Stop drain may
                # act again.
                state.typed_at = None
                state.failure = None
            elif event.name == "StopFailure":
                text = " ".join((event.message or "").split())[:200]
                state.failure = Failure(
                    error=event.error or "unknown", text=text, at=state.event_at
                )
            if event.name == "Notification" and outcome.status == "waiting":
                state.prompt = event.message
            if outcome.released:
                state.released = outcome.released
                state.released_at = state.event_at
                state.released_blocks = outcome.stop_blocks
            if outcome.status is not None:
                state.status = outcome.status
            if outcome.session_id:
                state.session_id = outcome.session_id
            if outcome.last_tool:
                state.last_tool = outcome.last_tool
            state.stop_blocks = outcome.stop_blocks
            # A Stop drain announces every unread id each time: a subset test is a third
            # of the cost of the union at 20k.
            if not outcome.announce <= state.announced:
                state.announced |= outcome.announce
            if event.name != "SessionStart" and not outcome.announce <= state.told_in_turn:
                state.told_in_turn |= outcome.announce
            state.last_seen = utc_now_iso()
            if outcome.note or state.status != before:
                transition = (
                    f"{before} -> {state.status}" if state.status != before else state.status
                )
                note = f"{event.name}: {outcome.note}" if outcome.note else event.name
                self.log(
                    LogEvent(
                        ts=state.last_seen,
                        kind="agent",
                        agent=agent_id,
                        detail=f"{note} [{transition}]",
                    )
                )
        for listener in self.on_event:
            listener(agent_id, event.name)
        answer = provider.render(event, outcome.decision)
        return HookReply(exit=answer.exit, stdout=answer.stdout, stderr=answer.stderr)

    def _memory_of(self, agent_id: str) -> str:
        """memory.md, cut at the budget (the tidy keeps it there; a hand edit may not)."""
        try:
            data = self.paths.mailbox(agent_id).memory.read_bytes()
        except FileNotFoundError:
            return ""
        return data[: self.memory_budget].decode("utf-8", errors="ignore")

    def log(self, event: LogEvent) -> None:
        append_line(self.paths.log, _encode(event))
        self.touch(self.paths.log)
