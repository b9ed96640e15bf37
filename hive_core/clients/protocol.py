"""The wire between an office and the clients attached to it (issue 11).

A frame is a 4-byte big-endian length, then that many bytes of msgpack: one message,
a msgspec Struct tagged by its `t` field. A client sends `Hello` first; the office
answers `Refused` (and closes) or `Welcome`, `Agents`, one `Snapshot` per agent, then
the live stream. Everything else a client sends may come in any order after that.

    client -> office: Hello, Visible, Input, Typed, Action, Detach
    office -> client: Welcome, Refused, Agents, AgentChanged, Snapshot, Output, Exited,
                      Notice, ActionReply, Bye

Decoding is bounded: `FrameReader` never holds more than one frame of `MAX_FRAME`
bytes and raises only `ProtocolError` (a deeply nested frame too), so a peer sending
garbage costs its own connection and nothing else. Nothing here touches a socket.
"""

from __future__ import annotations

import struct
from typing import Generic, Literal, TypeVar

import msgspec

from hive_core.cost import Sum
from hive_core.desks.state import AgentState
from hive_core.errors import OfficeError
from hive_core.health import Problem
from hive_core.schema import ControlReply, ControlRequest
from hive_core.status import AgentStatus

PROTOCOL_VERSION = 1

# A snapshot of a wide pane with a full scrollback (10,000 styled lines) is a few MiB;
# a frame beyond this is a broken or hostile peer, never a real message.
MAX_FRAME = 32 * 1024 * 1024

_LENGTH = struct.Struct(">I")
HEADER = _LENGTH.size


class ProtocolError(OfficeError):
    """The peer sent something that is not this protocol: close that connection."""


class _Message(msgspec.Struct, tag_field="t", kw_only=True):
    pass


# --- client -> office -----------------------------------------------------------------


class Hello(_Message, tag="hello"):
    version: int
    pid: int
    term_cols: int
    term_rows: int


class Visible(_Message, tag="visible"):
    """The panes this client shows (`agents`) and, for each, its drawn interior
    (rows, cols) in `sizes`. It replaces what the client said before; a pane left out
    (or without a size) is not shown by it. Send it on attach and at each layout change."""

    agents: list[str]
    sizes: dict[str, tuple[int, int]]


class Input(_Message, tag="input"):
    """Bytes for the agent's pty (keys, mouse reports, pastes) as the client encoded them."""

    agent: str
    data: bytes


class Typed(_Message, tag="typed"):
    """The person typed into this agent's pane (the office's typing guard holds mail
    nudges off for a while)."""

    agent: str


class Action(_Message, tag="action"):
    """One of the person's actions (hive_core/actions.py); answered by `ActionReply`
    with the same id."""

    id: int
    req: ControlRequest


class Detach(_Message, tag="detach"):
    pass


ClientMessage = Hello | Visible | Input | Typed | Action | Detach


# --- office -> client -----------------------------------------------------------------


class Welcome(_Message, tag="welcome"):
    version: int
    office: str  # its name (office.toml `name`)
    home: str  # the office's home folder: the client reads office.toml and the hive there
    roster: list[str]  # agent ids in the order the office lists them
    manager: str
    pid: int


class Refused(_Message, tag="refused"):
    """Why the office will not talk to this client, as a sentence for the person."""

    why: str


class AgentView(msgspec.Struct, kw_only=True):
    """What a client shows of an agent: the map, the pane titles, the alerts."""

    id: str
    name: str
    role: str
    provider: str
    manager: bool
    archived: bool
    status: str
    pid: int | None = None
    exit_status: int | None = None
    last_tool: str | None = None
    paused: bool = False
    halted: bool = False
    missing: str | None = None
    start_failed: str | None = None
    mail_title: str | None = None
    prompt: str | None = None  # an open permission prompt's text
    explained: AgentStatus | None = None


class Agents(_Message, tag="agents"):
    """Every agent, in roster order (sent on attach)."""

    agents: list[AgentView]


class AgentChanged(_Message, tag="agent"):
    """One agent changed, or joined (a hire): a view of an id not seen before."""

    view: AgentView


class Snapshot(_Message, tag="snapshot"):
    """A pane's whole terminal state (rows x cols): libghostty-vt's snapshot encoding
    from `GhosttyEmulator.snapshot`, which `GhosttyEmulator.restore` turns back into the
    same screens, scrollback, cursor and modes. Not VT bytes: do not feed it. It
    replaces what the client had of that pane; Output of it follows."""

    agent: str
    rows: int
    cols: int
    data: bytes


class Output(_Message, tag="output"):
    """Bytes the agent wrote to its pty, after the last Snapshot or Output of it."""

    agent: str
    data: bytes


class Exited(_Message, tag="exited"):
    """The agent's process ended: its exit code, or the signal that ended it."""

    agent: str
    exit: int | None
    signal: int | None


NoticeKind = Literal["routed", "hive", "health", "cost"]


class Notice(_Message, tag="notice"):
    """Something the panels reload on; only the fields of its kind are filled.

    routed: `routes` (sender, recipients) of each routed message, `inboxes` whose inbox
            got a copy;
    hive:   `paths` (absolute) the hive watcher saw change;
    health: `problems`, the whole current list (empty: all is well);
    cost:   `agent_costs` and `task_costs`, the current sums."""

    kind: NoticeKind
    routes: list[tuple[str, list[str]]] = []
    inboxes: list[str] = []
    paths: list[str] = []
    problems: list[Problem] = []
    agent_costs: dict[str, Sum] = {}
    task_costs: dict[str, Sum] = {}


class ActionReply(_Message, tag="action_reply"):
    id: int
    reply: ControlReply


class Bye(_Message, tag="bye"):
    """The office is closing this connection (it stops, or the client detached)."""

    why: str


OfficeMessage = (
    Welcome
    | Refused
    | Agents
    | AgentChanged
    | Snapshot
    | Output
    | Exited
    | Notice
    | ActionReply
    | Bye
)


# --- pure helpers ---------------------------------------------------------------------


def agent_view(state: AgentState) -> AgentView:
    spec = state.spec
    return AgentView(
        id=spec.id,
        name=spec.name,
        role=spec.role,
        provider=spec.provider,
        manager=state.manager,
        archived=spec.archived,
        status=state.status,
        pid=state.pid,
        exit_status=state.exit_status,
        last_tool=state.last_tool,
        paused=state.paused,
        halted=state.halted,
        missing=state.missing,
        start_failed=state.start_failed,
        mail_title=state.mail_title,
        prompt=state.prompt,
        explained=state.explained,
    )


def version_refusal(theirs: int) -> str | None:
    """The sentence for a client of another protocol version (None: the same)."""
    if theirs == PROTOCOL_VERSION:
        return None
    return (
        f"This office speaks client protocol version {PROTOCOL_VERSION} and this client "
        f"speaks version {theirs}: run the same hive-office for both (stop the office "
        "with `hive-office stop` and start it again with this one)."
    )


_encoder = msgspec.msgpack.Encoder()


def encode(message: ClientMessage | OfficeMessage) -> bytes:
    """One frame: the length, then the message."""
    body = _encoder.encode(message)
    if len(body) > MAX_FRAME:
        raise ValueError(f"a {len(body)}-byte frame is over the {MAX_FRAME}-byte limit")
    return _LENGTH.pack(len(body)) + body


M = TypeVar("M")


class FrameReader(Generic[M]):
    """Bytes in as they arrive, whole messages out. Holds at most one frame."""

    def __init__(self, decoder: msgspec.msgpack.Decoder[M]) -> None:
        self._decode = decoder.decode
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[M]:
        buf = self._buf
        buf += data
        out: list[M] = []
        at = 0  # consumed once at the end: a read of many small frames is not quadratic
        try:
            while len(buf) - at >= HEADER:
                (size,) = _LENGTH.unpack_from(buf, at)
                if size > MAX_FRAME:
                    raise ProtocolError(
                        f"a frame of {size} bytes is over the {MAX_FRAME}-byte limit"
                    )
                end = at + HEADER + size
                if len(buf) < end:
                    break
                try:
                    out.append(self._decode(bytes(buf[at + HEADER : end])))
                except (msgspec.DecodeError, msgspec.ValidationError) as e:
                    raise ProtocolError(f"not a message of this protocol: {e}") from None
                except RecursionError:
                    # Arrays nested deeper than the stack (msgspec walks even the
                    # fields it skips): a bad frame like any other, never a traceback.
                    raise ProtocolError("a frame nested too deeply to decode") from None
                at = end
        finally:
            del buf[:at]
        return out


def client_reader() -> FrameReader[ClientMessage]:
    """What the office reads from a client."""
    return FrameReader(msgspec.msgpack.Decoder(ClientMessage))


def office_reader() -> FrameReader[OfficeMessage]:
    """What a client reads from the office."""
    return FrameReader(msgspec.msgpack.Decoder(OfficeMessage))
