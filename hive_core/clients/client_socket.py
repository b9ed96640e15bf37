"""The socket the app attaches to (run/client.sock): the office as a server, as tmux's.

A client is the person: only the office's own user may connect (SO_PEERCRED), and not
from inside an agent's session nor from a stray an agent left behind (the control
socket's rule, control.py: an agent does not act as the person). It says Hello with its protocol version; it gets Welcome, every agent,
and from then on the live stream (protocol.py), with a Snapshot of every pane following
one a turn of the office's loop, those the client shows first.

A client never slows the agents or the other clients. Each has its own transport
buffer; past OUTPUT_QUEUE_MAX pending bytes the pane output meant for it is dropped
and the pane marked stale, and once the buffer drains below a quarter of that it gets
a fresh Snapshot of each stale pane instead of the bytes it missed (the snapshots of
an attach are paced the same way). At most conncap.CONNECTIONS_MAX connections are
held: past it the oldest that has not said Hello is dropped for room. Small messages
(agent changes, notices, replies) still queue while it is behind; a client that lets
HELD_MAX of them pile up has stopped reading and is dropped.

A pane's pty size is the smallest (rows and cols apart) among the attached clients
that show it, as tmux's default; shown by none, it keeps its last size. A client that
shows a pane at another size gets a Snapshot of it, which carries the pty's size: its
pane is that size, and the room a larger client has beyond it is marked, as tmux marks
a window smaller than its client.

Everything here runs on the office's loop; nothing in it blocks.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path

import msgspec

from hive_core import listen
from hive_core.clients.grids import PaneGrids
from hive_core.clients.protocol import (
    Action,
    ActionReply,
    AgentChanged,
    Agents,
    Bye,
    ClientMessage,
    Detach,
    Exited,
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
    client_reader,
    encode,
    version_refusal,
)
from hive_core.conncap import ConnectionCap
from hive_core.control import STRAY, Here, Peer, ancestry, attribute
from hive_core.cost import Sum
from hive_core.desks.state import AgentState, AgentStates
from hive_core.desks.supervisor import Supervisor
from hive_core.fsio import atomic_write
from hive_core.health import Problem
from hive_core.routing.router import RouteStats
from hive_core.schema import ControlReply, ControlRequest

# Pane output pending for one client before it is dropped for a resync.
OUTPUT_QUEUE_MAX = 4 << 20
# Other messages that may pile up for a client that does not read before it is dropped.
HELD_MAX = 1 << 20
# A pane side a client may ask for: beyond this it is a broken client, not a screen.
SIDE_MAX = 1000
# A connection that has not said Hello by then is not a client.
HELLO_TIMEOUT_S = 10.0
# Processes refused remembered so that each is logged once (then forgotten all at once).
REFUSED_KEPT = 1024


Size = tuple[int, int]


class ClientsFile(msgspec.Struct, kw_only=True):
    """run/clients.json: the office's pid (a file left by a dead office says so) and
    how many clients are attached."""

    pid: int
    clients: int


def pane_sizes(shown: Iterable[Mapping[str, Size]], agents: Iterable[str]) -> dict[str, Size]:
    """The pty size each of `agents` should have: the smallest rows and the smallest
    cols among the clients that show it. An agent no client shows is left out (it
    keeps the size it has)."""
    sizes: dict[str, Size] = {}
    views = list(shown)
    for agent in agents:
        seen = [view[agent] for view in views if agent in view]
        if seen:
            sizes[agent] = (min(r for r, _ in seen), min(c for _, c in seen))
    return sizes


def resync_order(agents: Iterable[str], stale: Iterable[str], visible: Iterable[str]) -> list[str]:
    """The stale panes a client gets snapshots of, in order: those it shows first, then
    the rest, each in the office's order (`agents`); a pane of no agent is left out."""
    missing, shown = set(stale), set(visible)
    ordered = [a for a in agents if a in missing]
    return [a for a in ordered if a in shown] + [a for a in ordered if a not in shown]


def admit(
    peer: Peer,
    own_uid: int,
    leaders: Mapping[int, str],
    chain: Callable[[int], list[tuple[int, int]]],
    here: Here | None = None,
) -> str | None:
    """Why this peer may not attach (None: it may): another user, a process of an
    agent's session, or a stray below the office `here`."""
    who = attribute(peer, own_uid, leaders, chain, here)
    if isinstance(who, ControlReply):
        return who.error or "refused."
    if who.stray:
        return f"refused: attaching to the office is the person's to do; {STRAY}."
    if who.owner is not None:
        return (
            f"refused: this process belongs to {who.owner}'s session; attaching to the "
            "office is the person's to do."
        )
    return None


class _Client(asyncio.Protocol):
    """One attached client: its transport, what it shows, and how far behind it is."""

    def __init__(self, server: ClientServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.reader = client_reader()
        self.pid = 0
        self.hello: Hello | None = None
        self.visible: dict[str, Size] = {}
        self.behind = False  # the transport buffer passed OUTPUT_QUEUE_MAX
        self.stale: set[str] = set()  # panes whose output was dropped while behind
        self.held = 0  # bytes of other messages written while behind
        self.closed = False

    # --- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=OUTPUT_QUEUE_MAX, low=OUTPUT_QUEUE_MAX // 4)
        self.server.connected(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            messages = self.reader.feed(data)
        except ProtocolError as e:
            self.server.drop(self, f"sent what is not the client protocol ({e})")
            return
        for message in messages:
            if self.closed:
                return
            self.server.received(self, message)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.server.drop(self, f"went away ({exc or 'closed'})")

    def pause_writing(self) -> None:
        self.behind = True

    def resume_writing(self) -> None:
        self.behind = False
        self.held = 0
        self.server.resync(self)

    # --- writing -----------------------------------------------------------------------

    def send(self, message: OfficeMessage) -> None:
        if self.closed or self.transport is None:
            return
        frame = encode(message)
        if self.behind:
            self.held += len(frame)
            if self.held > HELD_MAX:
                self.server.drop(self, "stopped reading (its queue is full)")
                return
        self.transport.write(frame)

    def output(self, agent_id: str, frame: bytes) -> None:
        """An encoded Output frame of `agent_id`, or the pane marked stale (one still
        stale gets it in the snapshot on its way)."""
        if self.behind:
            self.stale.add(agent_id)
        elif agent_id in self.stale:
            pass
        elif self.transport is not None and not self.closed:
            self.transport.write(frame)


class ClientServer:
    def __init__(
        self,
        path: Path,
        clients_file: Path,
        *,
        states: AgentStates,
        supervisor: Supervisor,
        grids: PaneGrids,
        perform: Callable[[ControlRequest], Awaitable[ControlReply]],
        welcome: Callable[[], Welcome],
        problems: Callable[[], list[Problem]],
        costs: Callable[[], tuple[dict[str, Sum], dict[str, Sum]]],
        log: Callable[[str], None],
        typed: Callable[[], None],
    ) -> None:
        """`typed`: told of each key a client sends a pane (the office's bulk work then
        gives way, pace.py)."""
        self.path = path
        self._clients_file = clients_file
        self._states = states
        self._supervisor = supervisor
        self._grids = grids
        self._perform = perform
        self._welcome = welcome
        self._problems = problems
        self._costs = costs
        self._log = log
        self._typed = typed
        self._listening = listen.Listening(
            path, lambda: listen.listen_protocol(path, lambda: _Client(self))
        )
        self._clients: set[_Client] = set()  # attached: Welcome sent
        self._pending: set[_Client] = set()  # connected, no Hello yet
        self._exited: dict[str, bool] = {}
        self._known = set(states)
        self._tasks: set[asyncio.Task[None]] = set()
        # Processes whose connections were refused or dropped before attaching, told in
        # the log already (_first_from).
        self._refused: set[int] = set()
        # Attached clients are being served; one that has not said Hello yet is silent.
        self._cap: ConnectionCap[_Client] = ConnectionCap(
            path.name,
            # Quietly: the cap tells of the flood once, not a line a connection.
            evict=lambda client: self._close(client, flush=False),
            told=log,
        )

    @property
    def attached(self) -> int:
        return len(self._clients)

    # --- the socket --------------------------------------------------------------------

    async def start(self) -> None:
        await self._listening.start()
        self._publish()

    async def stop(self) -> None:
        for client in list(self._clients | self._pending):
            client.send(Bye(why="the office is stopping"))
            self._close(client, flush=not client.behind)
        await self._listening.close()
        for task in list(self._tasks):
            task.cancel()
        self.path.unlink(missing_ok=True)
        self._clients_file.unlink(missing_ok=True)

    async def ensure(self) -> bool:
        """Listen again if the socket file is gone or replaced (the attached clients keep
        their connections, and the clients file is written again). True if it had to."""
        if not await self._listening.ensure():
            return False
        self._publish()
        return True

    # --- clients -----------------------------------------------------------------------

    def connected(self, client: _Client) -> None:
        assert client.transport is not None
        # Counted before anything is asked of the kernel about it: a flood costs no
        # /proc walk past the cap.
        if not self._cap.admit(client):
            client.send(
                Refused(why=f"refused: the office holds {self._cap.limit} clients already.")
            )
            self._close(client)
            return
        caller = listen.peer(client.transport.get_extra_info("socket"))
        why: str | None = "refused: the office cannot see who is connecting."
        if caller is not None:
            client.pid = caller.pid
            leaders = {s.pid: s.id for s in self._states.values() if s.pid is not None}
            here = Here(os.getpid(), os.getsid(0))
            why = admit(caller, os.getuid(), leaders, ancestry, here)
        if why is not None:
            if self._first_from(client.pid):
                self._log(f"client (pid {client.pid}) refused: {why}")
            client.send(Refused(why=why))
            self._close(client)
            return
        self._pending.add(client)
        asyncio.get_running_loop().call_later(HELLO_TIMEOUT_S, self._hello_due, client)

    def _first_from(self, pid: int) -> bool:
        """Whether this is the first refused or dropped connection of `pid` that was
        never attached: told once a process, since one that connects in a loop must not
        be a line a connection."""
        if pid in self._refused:
            return False
        if len(self._refused) >= REFUSED_KEPT:
            self._refused.clear()
        self._refused.add(pid)
        return True

    def _hello_due(self, client: _Client) -> None:
        if client in self._pending:
            self.drop(client, f"said no hello within {HELLO_TIMEOUT_S:g} s")

    def received(self, client: _Client, message: ClientMessage) -> None:
        if client.hello is None:
            if not isinstance(message, Hello):
                self.drop(client, f"spoke before saying hello ({type(message).__name__})")
                return
            self._hello(client, message)
            return
        match message:
            case Input(agent=agent, data=data):
                if agent in self._states:
                    self._typed()
                    self._supervisor.write(agent, data)
            case Typed(agent=agent):
                if agent in self._states:
                    self._states[agent].typed()
            case Visible(agents=agents, sizes=sizes):
                self._visible(client, agents, sizes)
            case Action(id=ident, req=req):
                task = asyncio.get_running_loop().create_task(self._act(client, ident, req))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            case Detach():
                client.send(Bye(why="detached"))
                self.drop(client, "detached", flush=True)
            case Hello():
                self.drop(client, "said hello twice")

    def _hello(self, client: _Client, hello: Hello) -> None:
        why = version_refusal(hello.version)
        if why is not None:
            self._log(f"client (pid {client.pid}) refused: {why}")
            client.send(Refused(why=why))
            self._close(client)
            return
        client.hello = hello
        self._cap.spoke(client)
        self._pending.discard(client)
        self._clients.add(client)
        client.send(self._welcome())
        client.send(Agents(agents=[agent_view(s) for s in self._states.values()]))
        client.send(Notice(kind="health", problems=self._problems()))
        agents, tasks = self._costs()
        client.send(Notice(kind="cost", agent_costs=agents, task_costs=tasks))
        # The panes follow, one a turn of the loop: the roster reaches the client now
        # and its first frame (map and names) need not wait for 50 screens, nor the
        # office's loop for their making; the panes it shows come first (`resync`).
        # Paced by the client too: what does not fit its queue follows as it drains.
        client.stale.update(self._states)
        self._resync_soon(client)
        self._log(f"client attached (pid {client.pid}); {self.attached} attached")
        self._publish()

    async def _act(self, client: _Client, ident: int, req: ControlRequest) -> None:
        try:
            reply = await self._perform(req)
        except Exception as e:  # the person's action failing must not take the server down
            reply = ControlReply(ok=False, error=f"the office failed to do it: {e!r}")
        client.send(ActionReply(id=ident, reply=reply))

    def _visible(self, client: _Client, agents: list[str], sizes: dict[str, Size]) -> None:
        if any(not (0 < r <= SIDE_MAX and 0 < c <= SIDE_MAX) for r, c in sizes.values()):
            self.drop(client, f"asked for a pane size beyond 1..{SIDE_MAX}")
            return
        touched = set(client.visible) | set(agents)
        client.visible = {a: sizes[a] for a in agents if a in sizes and a in self._states}
        self._apply_sizes(touched)
        # Shown larger than its pty (another client shows it smaller): the pty's size.
        shown_larger = {a for a, size in client.visible.items() if self._grids.size(a) != size}
        if shown_larger:
            client.stale |= shown_larger
            self.resync(client)

    def _apply_sizes(self, agents: Iterable[str]) -> None:
        wanted = pane_sizes((c.visible for c in self._clients), agents)
        for agent_id, (rows, cols) in wanted.items():
            if self._grids.size(agent_id) != (rows, cols):
                self._supervisor.resize(rows, cols, agent_id)
                # Every client showing it follows the pty's new size.
                for client in list(self._clients):
                    if agent_id in client.visible:
                        client.stale.add(agent_id)
                        self.resync(client)

    def resync(self, client: _Client) -> None:
        """A fresh screen of each pane it missed bytes of (or has none of yet), as long
        as its queue takes them; the rest wait for the queue to drain again. The panes
        it shows first, in the office's order, then the others."""
        for agent_id in resync_order(self._states, client.stale, client.visible):
            if client.behind or client.closed:
                return
            client.stale.discard(agent_id)
            rows, cols, data = self._grids.snapshot(agent_id)
            client.send(Snapshot(agent=agent_id, rows=rows, cols=cols, data=data))

    def _resync_soon(self, client: _Client) -> None:
        """`resync` one pane a turn of the loop: a client attaching to many panes
        holds neither the loop (each snapshot is a whole screen made) nor its own
        first frame; a Visible it sends meanwhile puts its shown panes first."""
        if client.closed or client.behind or not client.stale:
            return  # resume_writing resyncs the rest
        agent_id = next(iter(resync_order(self._states, client.stale, client.visible)), None)
        if agent_id is None:
            client.stale.clear()  # panes of agents the office no longer has
            return
        client.stale.discard(agent_id)
        rows, cols, data = self._grids.snapshot(agent_id)
        client.send(Snapshot(agent=agent_id, rows=rows, cols=cols, data=data))
        asyncio.get_running_loop().call_soon(self._resync_soon, client)

    def drop(self, client: _Client, why: str, *, flush: bool = False) -> None:
        """Let the client go; what is queued for it is thrown away unless `flush` (a
        client that stopped reading would otherwise hold its queue until it reads)."""
        if client.closed:
            return
        was_attached = client in self._clients
        self._close(client, flush=flush)
        if was_attached or self._first_from(client.pid):
            self._log(f"client (pid {client.pid}) {why}; dropped")
        if was_attached:
            self._apply_sizes(client.visible)
            self._publish()

    def _close(self, client: _Client, *, flush: bool = True) -> None:
        client.closed = True
        self._cap.left(client)
        self._clients.discard(client)
        self._pending.discard(client)
        if client.transport is not None:
            if flush:
                client.transport.close()
            else:
                client.transport.abort()

    def _publish(self) -> None:
        """run/clients.json, for `hive-office ls`."""
        body = msgspec.json.encode(ClientsFile(pid=os.getpid(), clients=self.attached))
        try:
            atomic_write(self._clients_file, body, fsync=False)
        except OSError as e:
            self._log(f"cannot write {self._clients_file.name}: {e}")

    # --- the office -> every client ----------------------------------------------------

    def output(self, agent_id: str, data: bytes) -> None:
        """A supervisor sink: the office's screen first, then every client."""
        self._grids.feed(agent_id, data)
        if self._clients:
            frame = encode(Output(agent=agent_id, data=data))
            for client in list(self._clients):
                client.output(agent_id, frame)

    def _broadcast(self, message: OfficeMessage) -> None:
        for client in list(self._clients):
            client.send(message)

    def agent_changed(self, state: AgentState) -> None:
        self._broadcast(AgentChanged(view=agent_view(state)))
        if state.id not in self._known:  # a hire: its pane, before any output of it
            self._known.add(state.id)
            for client in list(self._clients):
                client.stale.add(state.id)
                self.resync(client)
        exited = state.status == "exited"
        if not exited and self._exited.get(state.id, False):
            # Started again: a client showing it larger takes the pty's size anew (its
            # pane kept the last child's screen at its own size).
            pty = self._grids.size(state.id)
            for client in list(self._clients):
                if client.visible.get(state.id, pty) != pty:
                    client.stale.add(state.id)
                    self.resync(client)
        if exited and not self._exited.get(state.id, False) and state.exit_status is not None:
            code = state.exit_status
            self._broadcast(
                Exited(
                    agent=state.id,
                    exit=code if code >= 0 else None,
                    signal=-code if code < 0 else None,
                )
            )
        self._exited[state.id] = exited

    def routed(self, stats: RouteStats) -> None:
        routes = [(sender, list(recipients)) for sender, recipients in stats.routes]
        self._broadcast(Notice(kind="routed", routes=routes, inboxes=sorted(stats.inboxes)))

    def hive_changed(self, paths: set[Path]) -> None:
        self._broadcast(Notice(kind="hive", paths=sorted(str(p) for p in paths)))

    def health_changed(self, problems: list[Problem]) -> None:
        self._broadcast(Notice(kind="health", problems=problems))

    def cost_changed(self) -> None:
        agents, tasks = self._costs()
        self._broadcast(Notice(kind="cost", agent_costs=agents, task_costs=tasks))
