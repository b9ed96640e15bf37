"""Office events -> Textual messages, at most one reload per panel every RELOAD_S.

The office tells the app through its link (hive_tui/link.py) on the app's loop (routing itself runs on the office's
route thread). The bridge only marks what changed; a frame after the first change it
posts one `MailRouted` with every message routed since, and reads what the dirty panels
show on a thread (one read in flight at a time), then posts one `HiveLoaded`. While
changes keep coming it does so again at most every RELOAD_S: a burst of 2,000 messages
costs a few reloads a second, none of them read on the loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from textual.app import App
from textual.message import Message as TextualMessage

from hive_core.logfile import LogFollower
from hive_core.mail import load_message, message_names
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Ledger, LogEvent, Message, Task
from hive_core.team.escalations import waiting
from hive_tui import FRAME_S
from hive_tui.panels.log import Run, log_runs

Route = tuple[str, tuple[str, ...]]
# A burst reports routing many times a second, and each flush makes the app redraw its
# tables, counts and map while the person types; changes are flushed a frame after the
# first and then at most this often (1 s / RELOAD_S reloads a second).
RELOAD_S = 0.25
# Where a change moves someone's unread count: their inbox, or the .done folder a read
# message goes to.
INBOX_KINDS = frozenset({"inbox", "done"})


@dataclass
class MailRouted(TextualMessage):
    """Messages the router delivered since the last frame, each exactly once."""

    routes: tuple[Route, ...]


@dataclass
class HiveLoaded(TextualMessage):
    """What the dirty panels show now; None (or empty) for what did not change."""

    board: str | None = None
    ledger: Ledger | None = None
    # New log lines, formatted for the Log tab.
    log: list[tuple[LogEvent, list[Run]]] = field(default_factory=list)
    # What waits for the person (escalations.waiting), newest first.
    inbox: list[Message] | None = None
    # Unread counts re-read for these agents only.
    unread: dict[str, int] = field(default_factory=dict)


@dataclass
class _Dirty:
    routes: list[Route] = field(default_factory=list)
    board: bool = False
    tasks: bool = False
    log: bool = False
    inbox: bool = False
    unread: set[str] = field(default_factory=set)

    def needs_read(self) -> bool:
        return self.board or self.tasks or self.log or self.inbox or bool(self.unread)

    def __bool__(self) -> bool:
        return bool(self.routes) or self.needs_read()


class Bridge:
    """Subscribe with `routed`, `hive_changed`; `everything()` asks for a full load."""

    def __init__(
        self, app: App[None], paths: HivePaths, *, manager: str, roster: list[str]
    ) -> None:
        self.app = app
        self.paths = paths
        self.manager = manager
        self.roster = roster
        self._dirty = _Dirty()
        self._timer: asyncio.TimerHandle | None = None
        # The loop's time before which the next flush waits (RELOAD_S after the last).
        self._next_flush = 0.0
        self._reading = False
        self._reads: set[asyncio.Task[None]] = set()
        # The live log from its start (rotation bounds it), then what is appended.
        self._log = LogFollower(paths, from_start=True)
        # Decoded once per file, by inbox and name: a reload after a burst reads only the
        # arrivals, and builds no Path for the thousands already known.
        self._mail: dict[Path, dict[str, Message]] = {}
        # The ledger's tasks as last read: their open questions wait for the person.
        self._tasks: list[Task] = []

    # --- on the loop: mark, then flush once a frame -------------------------------------

    def everything(self) -> None:
        d = self._dirty
        d.board = d.tasks = d.log = d.inbox = True
        d.unread.update(self.roster)
        self._schedule()

    def routed(self, routes: Iterable[tuple[str, Iterable[str]]], inboxes: set[str]) -> None:
        """One routing pass, as the router reported it: (sender, recipients) of each
        message routed, and whose inbox got a copy."""
        d = self._dirty
        d.routes.extend((sender, tuple(recipients)) for sender, recipients in routes)
        d.log = True
        d.unread.update(who for who in inboxes if who in self.roster)
        if HUMAN in inboxes or self.manager in inboxes:
            d.inbox = True
        self._schedule()

    def hive_changed(self, paths: set[Path]) -> None:
        """What the watcher saw (no routed deliveries: those came with `routed`)."""
        d = self._dirty
        p = self.paths
        d.board |= p.board in paths
        d.tasks |= p.tasks in paths
        d.log |= p.log in paths
        # A reader finished with mail (inbox -> .done): only the path can say whose.
        owners = {
            place.owner
            for path in paths
            if (place := p.locate(path)) is not None and place.kind in INBOX_KINDS and place.owner
        }
        d.unread.update(owners & set(self.roster))
        d.inbox |= HUMAN in owners or self.manager in owners
        if d:
            self._schedule()

    def _schedule(self) -> None:
        if self._timer is None and self._dirty:
            loop = asyncio.get_running_loop()
            wait = max(FRAME_S, self._next_flush - loop.time())
            self._timer = loop.call_later(wait, self._flush)

    def _flush(self) -> None:
        self._timer = None
        self._next_flush = asyncio.get_running_loop().time() + RELOAD_S
        if self._dirty.routes:
            self.app.post_message(MailRouted(tuple(self._dirty.routes)))
            self._dirty.routes = []
        if self._reading or not self._dirty.needs_read():
            return  # the read in flight schedules the next flush when it is done
        dirty, self._dirty = self._dirty, _Dirty()
        self._reading = True
        task = asyncio.create_task(self._read(dirty))
        self._reads.add(task)
        task.add_done_callback(self._reads.discard)

    async def _read(self, dirty: _Dirty) -> None:
        try:
            loaded = await asyncio.to_thread(self._load, dirty)
        except Exception as exc:  # an unreadable hive must not take the screen down
            self.app.notify(f"Could not read the hive: {exc!r}", severity="error")
        else:
            self.app.post_message(loaded)
        finally:
            self._reading = False
            self._schedule()

    # --- on a thread ----------------------------------------------------------------------

    def _load(self, dirty: _Dirty) -> HiveLoaded:
        loaded = HiveLoaded()
        if dirty.board:
            try:
                loaded.board = self.paths.board.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                loaded.board = ""
        if dirty.tasks:
            try:
                loaded.ledger = msgspec.json.decode(self.paths.tasks.read_bytes(), type=Ledger)
            except (FileNotFoundError, msgspec.DecodeError, msgspec.ValidationError):
                loaded.ledger = Ledger()
            self._tasks = loaded.ledger.tasks
        if dirty.log:
            loaded.log = [(event, log_runs(event)) for event in self._log_tail()]
        if dirty.inbox or dirty.tasks:  # a task question asked or answered
            loaded.inbox = self._inbox()
        for agent in sorted(dirty.unread):
            loaded.unread[agent] = len(message_names(self.paths.mailbox(agent).inbox))
        return loaded

    def _log_tail(self) -> list[LogEvent]:
        """What was appended to the log since last time (whole lines, across rotations)."""
        events = []
        for line in self._log.read():
            try:
                events.append(msgspec.json.decode(line, type=LogEvent))
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                continue
        return events

    def _inbox(self) -> list[Message]:
        """`Office.waiting_for_person`'s list (one rule: escalations.waiting), from the
        decoded-once cache; an escalation the person answered has a link in their .done."""
        human = self.paths.mailbox(HUMAN)
        flagged = [
            m for m in self._messages(self.paths.mailbox(self.manager).inbox) if m.needs_human
        ]
        answered = {m.id for m in flagged if os.path.lexists(human.done / f"{m.id}.json")}
        return waiting(self._messages(human.inbox), flagged, answered, self._tasks)

    def _messages(self, inbox: Path) -> list[Message]:
        cache = self._mail.setdefault(inbox, {})
        names = message_names(inbox)
        for gone in cache.keys() - set(names):
            del cache[gone]
        out = []
        for name in names:
            message = cache.get(name)
            if message is None:
                try:
                    message = cache[name] = load_message(inbox / name)
                except (OSError, msgspec.DecodeError, msgspec.ValidationError):
                    continue  # gone (read) or not a message yet: tried again next time
            out.append(message)
        return out
