"""The app's one seam to an office (issue 11): what HiveApp needs of it, and nothing more.

`OfficeLink` is that seam; the app holds one and never an `Office`. Two kinds:

- `LocalLink` wraps an Office running in the app's own process, as a worker on the
  app's loop (the Pilot tests, `--demo`): the office's listeners call the app directly.
- `SocketLink` is a client of an office that runs on its own (`hive-office serve`, the
  detached office) over `run/client.sock` (hive_core/clients/protocol.py). One task
  reads the frames and hands each to the app as the office's listeners would; pane
  output and snapshots go to the pane at once.

Either way the app hears the office through `LinkEvents`, and sees each agent as an
`AgentView` (what the map, the pane titles and the alerts read). The panels read the
hive's files from disk themselves: a client runs on the office's machine as the
office's user (the socket admits no one else), so the files are the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hive_client.aio import VerbResult
from hive_client.aio import call as call_verb
from hive_core.clients.protocol import (
    PROTOCOL_VERSION,
    Action,
    ActionReply,
    AgentChanged,
    Agents,
    AgentView,
    Bye,
    Detach,
    Exited,
    FrameReader,
    Hello,
    Input,
    Notice,
    OfficeMessage,
    Output,
    ProtocolError,
    Refused,
    Snapshot,
    Typed,
    Visible,
    Welcome,
    agent_view,
    encode,
    office_reader,
)
from hive_core.config import ConfigError, load_office
from hive_core.cost import Sum
from hive_core.desks.state import AgentState
from hive_core.health import Problem
from hive_core.paths import HivePaths
from hive_core.routing.router import RouteStats
from hive_core.schema import ControlReply, ControlRequest, OfficeConfig

if TYPE_CHECKING:
    from hive_core.office import Office

Route = tuple[str, list[str]]
# What one read of the socket takes at most.
READ_CHUNK = 1 << 16
# How long a detach waits for the office's Bye.
DETACH_WAIT_S = 2.0


class LinkEvents(Protocol):
    """What the app hears from the office, on the app's loop."""

    def agent_changed(self, view: AgentView) -> None: ...
    def pane_output(self, agent_id: str, data: bytes) -> None: ...
    def pane_snapshot(self, agent_id: str, data: bytes) -> None:
        """The office's copy of the agent's whole terminal: it replaces the pane's."""

    def mail_routed(self, routes: list[Route], inboxes: set[str]) -> None: ...
    def hive_changed(self, paths: set[Path]) -> None: ...
    def health_changed(self, problems: list[Problem]) -> None: ...
    def cost_changed(self) -> None: ...


class OfficeLink(Protocol):
    paths: HivePaths
    config: OfficeConfig
    roster: list[str]
    """Agent ids on the floor when the app opens, in the office's order."""
    detachable: bool
    """The office outlives this app (a client): quitting may only detach."""

    def view(self, agent_id: str) -> AgentView: ...
    def costs(self) -> tuple[Mapping[str, Sum], Mapping[str, Sum]]:
        """What each agent and each task has cost so far."""

    def listen(self, events: LinkEvents) -> None: ...
    def close(self) -> None:
        """The app is going: nothing is told to it any more."""

    def write(self, agent_id: str, data: bytes) -> None: ...
    def typed(self, agent_id: str) -> None:
        """The person typed into the agent's pane (the office's typing guard)."""

    def resize(self, agent_id: str, rows: int, cols: int) -> None:
        """The pane's drawn interior is this size now."""

    def visible(self, agents: list[str]) -> None:
        """The panes the app shows now."""

    async def perform(self, req: ControlRequest) -> ControlReply: ...
    async def hive(self, argv: list[str], stdin: bytes = b"") -> VerbResult:
        """`hive ARGV` run by the office as the person: the verbs every caller has (mail,
        tasks, memory, merge), so the app does what a person's `hive` does, the same way."""

    async def run(self, stop: asyncio.Event) -> str | None:
        """Until `stop` is set or the office goes; why it went (None: stopped here)."""

    async def stop_office(self) -> None:
        """Stop the office itself (its agents, the last routing pass and commit)."""

    async def detach(self) -> None:
        """Leave the office running without this app."""


class LocalLink:
    """An Office in this process; the app's loop runs it (`run`)."""

    detachable = False

    def __init__(self, office: Office) -> None:
        self.office = office
        self.paths = office.paths
        self.config = office.config
        self.roster = [a.id for a in office.config.agents if not a.archived]
        self._events: LinkEvents | None = None
        self._stop: asyncio.Event | None = None
        self._done = asyncio.Event()

    def view(self, agent_id: str) -> AgentView:
        return agent_view(self.office.states[agent_id])

    def costs(self) -> tuple[Mapping[str, Sum], Mapping[str, Sum]]:
        return self.office.cost.agents, self.office.cost.tasks

    def listen(self, events: LinkEvents) -> None:
        self._events = events
        office = self.office
        office.listeners.agent.append(self._agent_changed)
        office.listeners.routed.append(self._routed)
        office.listeners.hive.append(events.hive_changed)
        office.listeners.health.append(events.health_changed)
        office.cost.listeners.append(events.cost_changed)
        office.supervisor.sinks.append(events.pane_output)

    def close(self) -> None:
        events = self._events
        if events is None:
            return
        self._events = None
        office = self.office
        office.listeners.agent.remove(self._agent_changed)
        office.listeners.routed.remove(self._routed)
        office.listeners.hive.remove(events.hive_changed)
        office.listeners.health.remove(events.health_changed)
        office.cost.listeners.remove(events.cost_changed)
        office.supervisor.sinks.remove(events.pane_output)

    def _agent_changed(self, state: AgentState) -> None:
        if self._events is not None:
            self._events.agent_changed(agent_view(state))

    def _routed(self, stats: RouteStats) -> None:
        if self._events is not None:
            self._events.mail_routed(stats.routes, stats.inboxes)

    def write(self, agent_id: str, data: bytes) -> None:
        # The person's key: the office's bulk work gives way (as for a client's Input).
        self.office.pace.typed()
        self.office.supervisor.write(agent_id, data)

    def typed(self, agent_id: str) -> None:
        self.office.states[agent_id].typed()

    def resize(self, agent_id: str, rows: int, cols: int) -> None:
        # In-process there is one screen: every pane's pty follows its pane, shown or
        # not (a hidden pane has the shown one's size: showing it needs no redraw).
        self.office.supervisor.resize(rows, cols, agent_id)

    def visible(self, agents: list[str]) -> None:
        pass  # the sizes are all the in-process office needs (`resize`)

    async def perform(self, req: ControlRequest) -> ControlReply:
        return await self.office.person.perform(req)

    async def hive(self, argv: list[str], stdin: bytes = b"") -> VerbResult:
        # Over the office's own control socket, as a client's: the verb runs on the
        # office's worker thread, never on this loop, which is the office's too.
        return await call_verb(str(self.paths.control_socket), argv, stdin=stdin)

    async def run(self, stop: asyncio.Event) -> str | None:
        self._stop = stop
        try:
            await self.office.run(stop)
        finally:
            self._done.set()
        return None

    async def stop_office(self) -> None:
        self.close()  # the screen is going: the office's shutdown must not call into it
        if self._stop is not None:
            self._stop.set()
            await self._done.wait()

    async def detach(self) -> None:
        await self.stop_office()  # nothing outlives this process's office


class LinkRefused(Exception):
    """The office would not take this client; the sentence says why."""


class SocketLink:
    """A client of an office over its socket. `connect` says Hello and reads the roster
    (blocking, before the app's loop exists); `run` then reads the live stream on the
    app's loop, handing each message to the app as it is decoded."""

    detachable = True

    def __init__(
        self,
        paths: HivePaths,
        config: OfficeConfig,
        sock: socket.socket,
        welcome: Welcome,
        views: list[AgentView],
        early: list[OfficeMessage],
        reader: FrameReader[OfficeMessage],
    ) -> None:
        self.paths = paths
        self.config = config
        self.office_pid = welcome.pid
        self.roster = list(welcome.roster)
        self._sock = sock
        self._views = {v.id: v for v in views}
        self._costs: tuple[Mapping[str, Sum], Mapping[str, Sum]] = ({}, {})
        # Decoded with the roster, before the app listened: told first.
        self._early = early
        self._reader = reader
        self._events: LinkEvents | None = None
        self._transport: asyncio.Transport | None = None
        self._outbox: list[bytes] = []  # written before the loop's transport exists
        self._sizes: dict[str, tuple[int, int]] = {}
        self._shown: list[str] = []
        self._visible_due = False
        self._replies: dict[int, asyncio.Future[ControlReply]] = {}
        self._next_id = 0
        self._gone: asyncio.Event | None = None
        self._why: str | None = None

    # --- attaching (blocking) ----------------------------------------------------------

    @classmethod
    def connect(cls, paths: HivePaths, *, timeout: float = 10.0) -> SocketLink:
        """Attach to the office of `paths`. Raises LinkRefused with the office's
        sentence, OSError when nothing listens there."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(str(paths.client_socket))
            cols, rows = _terminal_size()
            sock.sendall(
                encode(
                    Hello(version=PROTOCOL_VERSION, pid=os.getpid(), term_cols=cols, term_rows=rows)
                )
            )
            reader = office_reader()
            welcome: Welcome | None = None
            views: list[AgentView] | None = None
            early: list[OfficeMessage] = []
            while views is None:
                data = sock.recv(READ_CHUNK)
                if not data:
                    raise ConnectionError("the office closed the connection before its welcome")
                try:
                    messages = reader.feed(data)
                except ProtocolError as e:
                    raise ConnectionError(f"the office does not speak this protocol: {e}") from None
                for message in messages:
                    match message:
                        case Refused(why=why):
                            raise LinkRefused(why)
                        case Welcome():
                            welcome = message
                        case Agents(agents=agents) if views is None:
                            views = agents
                        case _:
                            early.append(message)
            if welcome is None:
                raise ConnectionError("the office sent its agents before its welcome")
            config = load_office(paths.office_toml)
            sock.settimeout(None)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return cls(paths, config, sock, welcome, views, early, reader)

    # --- what the app reads ------------------------------------------------------------

    def view(self, agent_id: str) -> AgentView:
        return self._views[agent_id]

    def costs(self) -> tuple[Mapping[str, Sum], Mapping[str, Sum]]:
        return self._costs

    def listen(self, events: LinkEvents) -> None:
        self._events = events

    def close(self) -> None:
        self._events = None

    # --- the app -> the office ---------------------------------------------------------

    def _send(self, frame: bytes) -> None:
        if self._transport is None:
            self._outbox.append(frame)
        elif not self._transport.is_closing():
            self._transport.write(frame)

    def write(self, agent_id: str, data: bytes) -> None:
        self._send(encode(Input(agent=agent_id, data=data)))

    def typed(self, agent_id: str) -> None:
        self._send(encode(Typed(agent=agent_id)))

    def resize(self, agent_id: str, rows: int, cols: int) -> None:
        self._sizes[agent_id] = (rows, cols)
        self._visible_soon()

    def visible(self, agents: list[str]) -> None:
        self._shown = list(agents)
        self._visible_soon()

    def _visible_soon(self) -> None:
        """One Visible for the sizes and panes a layout change sets, however many."""
        if not self._visible_due:
            self._visible_due = True
            asyncio.get_running_loop().call_soon(self._send_visible)

    def _send_visible(self) -> None:
        self._visible_due = False
        shown = [a for a in self._shown if a in self._sizes]
        self._send(encode(Visible(agents=shown, sizes={a: self._sizes[a] for a in shown})))

    async def perform(self, req: ControlRequest) -> ControlReply:
        if self._why is not None:
            raise ConnectionError(self._why)
        self._next_id += 1
        ident = self._next_id
        reply = self._replies[ident] = asyncio.get_running_loop().create_future()
        self._send(encode(Action(id=ident, req=req)))
        try:
            return await reply
        finally:
            self._replies.pop(ident, None)

    async def hive(self, argv: list[str], stdin: bytes = b"") -> VerbResult:
        return await call_verb(str(self.paths.control_socket), argv, stdin=stdin)

    # --- the office -> the app ---------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> str | None:
        loop = asyncio.get_running_loop()
        self._gone = asyncio.Event()
        transport, _ = await loop.create_unix_connection(lambda: _Reading(self), sock=self._sock)
        self._transport = transport
        for frame in self._outbox:
            transport.write(frame)
        self._outbox.clear()
        self._received(self._early)
        self._early = []
        stopping = asyncio.ensure_future(stop.wait())
        gone = asyncio.ensure_future(self._gone.wait())
        try:
            await asyncio.wait({stopping, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            gone.cancel()
            if not transport.is_closing():
                transport.close()
        return None if stop.is_set() else self._why

    def _data(self, data: bytes) -> None:
        try:
            messages = self._reader.feed(data)
        except ProtocolError as e:
            self._lost(f"the office sent what is not the client protocol ({e})")
            return
        self._received(messages)

    def _received(self, messages: list[OfficeMessage]) -> None:
        for message in messages:
            events = self._events
            match message:
                case Output(agent=agent, data=data):
                    if events is not None:
                        events.pane_output(agent, data)
                case Snapshot(agent=agent, data=data):
                    if events is not None:
                        events.pane_snapshot(agent, data)
                case AgentChanged(view=view):
                    if view.id not in self._views:
                        self._hired()
                    self._views[view.id] = view
                    if events is not None:
                        events.agent_changed(view)
                case Notice():
                    self._notice(message, events)
                case ActionReply(id=ident, reply=reply):
                    future = self._replies.get(ident)
                    if future is not None and not future.done():
                        future.set_result(reply)
                case Exited():
                    pass  # the AgentChanged to status exited that comes with it says it all
                case Bye(why=why):
                    self._lost(why)
                    return
                case Welcome() | Refused() | Agents():
                    self._lost(f"the office sent {type(message).__name__} after attaching")
                    return

    def _hired(self) -> None:
        """An agent hired after this client attached: the office wrote its office.toml
        entry before telling, and mail from the app to it is checked against the roster
        there (an in-process office's config is the office's own, hire and all)."""
        with contextlib.suppress(ConfigError):
            self.config = load_office(self.paths.office_toml)

    def _notice(self, notice: Notice, events: LinkEvents | None) -> None:
        if notice.kind == "cost":
            self._costs = (notice.agent_costs, notice.task_costs)
        if events is None:
            return
        match notice.kind:
            case "routed":
                events.mail_routed(notice.routes, set(notice.inboxes))
            case "hive":
                events.hive_changed({Path(p) for p in notice.paths})
            case "health":
                events.health_changed(notice.problems)
            case "cost":
                events.cost_changed()

    def _lost(self, why: str) -> None:
        if self._why is None:
            self._why = why
        for future in self._replies.values():
            if not future.done():
                future.set_exception(ConnectionError(f"the office went away: {self._why}"))
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
        if self._gone is not None:
            self._gone.set()

    # --- leaving -----------------------------------------------------------------------

    async def detach(self) -> None:
        """Say Detach and wait (briefly) for the office's Bye, so what was typed last
        reached it before the connection goes."""
        self.close()
        self._send(encode(Detach()))
        await self._wait_gone()

    async def stop_office(self) -> None:
        """The office stops as `hive-office stop` and SIGTERM stop it (agents stopped,
        mail routed, last commit); this client stays until its Bye."""
        self.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.office_pid, signal.SIGTERM)
        await self._wait_gone(timeout=None)

    async def _wait_gone(self, timeout: float | None = DETACH_WAIT_S) -> None:
        if self._gone is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._gone.wait(), timeout)


class _Reading(asyncio.Protocol):
    def __init__(self, link: SocketLink) -> None:
        self.link = link

    def data_received(self, data: bytes) -> None:
        self.link._data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.link._lost(f"the connection to the office was lost ({exc or 'closed'})")


def _terminal_size() -> tuple[int, int]:
    try:
        size = os.get_terminal_size()
    except OSError:
        return 80, 24
    return size.columns, size.lines
