"""The control socket: the person's commands to a running office, and who is calling.

`hive-office type AGENT TEXT` types into an agent's terminal as the person would (the
app's panes do the same through the same Office methods), `pause`/`resume` hold an
agent at its next hook, and so on for every action in actions.py. Every `hive` verb and
`hive mcp` ask it `whoami` first; the person's verbs that run outside the office
(`stop`, `merge`, `worktree remove`, `hire` with no office) ask it `person` first. A
Unix socket in run/ (folder 0700, socket 0600): only the office's own user can reach it.

Who calls (`attribute`), from the process itself: the kernel tells the caller's pid
and uid (SO_PEERCRED), and its ancestry in /proc decides, failing closed:

- a process in an agent's terminal session, or below the agent's CLI, is that agent's
  (the CLI is a child subreaper, desks/pty_session.py, so what leaves the session
  with `setsid` or a double fork is still below it while the CLI lives);
- any other process below the office is a stray, and nobody: the office is a child
  subreaper too (desks/strays.py), so whatever an agent leaves behind when its CLI
  is gone (`setsid -f`, double forks, daemons, `nohup`) is adopted by the office, not
  by init. The one exception is the office's own session: a process whose every
  ancestor up to the office is in the office's session was started by the office (or,
  where a test or a program hosts the office in its own process, by that program),
  and no agent can put a process there (git in an agent's worktree runs in a session
  of its own and runs nothing the repository names: worktrees.py, gitsafe.py);
- a process the office is not an ancestor of is the person. This is the documented
  limit: a process an agent has another service of the same user start outside the
  office's tree (cron, `systemd-run --user`, `at`, the person's own tmux server, ssh to
  localhost) is the person's to the office.

What the process claims (HIVE_AGENT_ID, HIVE_SECRET) is checked against that by
`decide_whoami`. A secret proves nothing on its own (any process of the user can read
another's /proc/PID/environ): the person's process giving a running agent's secret is
refused as any other claim to be that agent; only the agent's own processes act as it.
`decide_call` is the one rule for everything that is the person's: every action in
actions.py that does not only read, and the `person` check of the verbs that run
outside the office; an agent's process and a stray are refused them all.

A remote desk X has sockets of its own (run/desks/X.control.sock, which its ssh link
forwards from the host): a connection there is X's, whatever process made it, since
the host's processes are out of the kernel's sight (`decide_desk`).

`hive` verbs (cmd "hive", the thin `hive` of hive_client/client.py) are taken on every
control socket: after the ok reply the connection carries the verb's streams, and the
office runs it (hive_core/office/verbs.py) as the connection's caller, attributed as
above. Every question the verb asks the office (whoami, the person's check) is answered
by `decide` as that caller; the verb's environment claims are only claims, checked by
whoami as a `hive` process's are. A verb relayed in a process of its own (a remote
desk's that stays apart, hive_core/remote/relay.py) is the desk's (the relay names it
to the server, `desks`).

A memory search (cmd "memory") is answered as whoever whoami says the caller is, never
as the request names (hive_core/office/semantic.py runs it with the model it keeps).

One request a connection, one line each way (but a relayed verb's streams). A request
longer than REQUEST_MAX, not JSON, or nested past msgspec's guard gets a reply `{"ok":
false, "error": "refused: ..."}` saying why, and the server goes on with the next
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

import msgspec

from hive_core import listen
from hive_core.actions import BY_NAME
from hive_core.caller import REQUEST_MAX
from hive_core.caller import request as request
from hive_core.conncap import ConnectionCap
from hive_core.listen import Peer as Peer
from hive_core.schema import HUMAN, AgentSpec, ControlReply, ControlRequest

Handler = Callable[[ControlRequest], Awaitable[ControlReply]]
Log = Callable[[str, str], None]  # (agent id, what happened)
_logger = logging.getLogger(__name__)
_decode = msgspec.json.Decoder(ControlRequest).decode
_encode = msgspec.json.Encoder().encode
# How often the office looks for its sockets: a caller finding none is refused ("the
# office is not answering") until the next look.
SOCKET_CHECK_S = 1.0
# A chain of parents longer than this is not a process tree (pid_max is 2**22; real
# trees are a few dozen deep): stop instead of looping.
ANCESTRY_MAX = 4096
# Walks of a line whose parents exit meanwhile, before the caller is refused.
ANCESTRY_TRIES = 3
# A stray's whoami (see the module docstring).
STRAY = (
    "this process is below the office but in no agent's session: an agent left it behind "
    "(its terminal has ended) or the office started it, and it acts for nobody, neither "
    "the person nor a desk. Run `hive` from your desk's terminal, or as the person from "
    "your own"
)


class Desk(Protocol):
    """What the control server reads of a desk while the office runs (the office's
    desks.state.AgentState is one): read-only, so any of its kinds will do."""

    @property
    def id(self) -> str: ...

    @property
    def spec(self) -> AgentSpec: ...

    @property
    def secret(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def pid(self) -> int | None: ...


class Attributed(NamedTuple):
    """Whose process called: an agent id, or None for the person; `stray`: a process
    below the office that is no agent's any more (see the module docstring), which acts
    for nobody."""

    owner: str | None
    stray: bool = False


class VerbCall(NamedTuple):
    """A `hive` verb the office takes: its request, who calls (the connection's caller),
    the remote desk whose socket it came in on (None: the office's own socket), and the
    office's answer to a control request as that caller (`ControlServer.decide`)."""

    req: ControlRequest
    who: Attributed
    desk: str | None
    ask: Callable[[ControlRequest], Coroutine[object, object, ControlReply]]


# Runs a `hive` verb on this connection (hive_core/office/verbs.py).
VerbHandler = Callable[[VerbCall, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Relayed(NamedTuple):
    """An accepted `hive` verb: the reply to send, then the verb takes the connection."""

    reply: ControlReply
    call: VerbCall


class ControlServer:
    def __init__(
        self,
        path: Path,
        handle: Handler,
        *,
        agents: Mapping[str, Desk] | None = None,
        log: Log | None = None,
        desk: str | None = None,
        relay: VerbHandler | None = None,
        desks: Callable[[], Mapping[int, str]] = dict,
        memory: Handler | None = None,
    ) -> None:
        """`agents`: the office's live agent states (read at each request: who runs,
        with which secret); `log`: where the person's acting for a desk is recorded.
        `desk`: the remote desk whose own socket this is (every connection is its);
        `relay`: what runs `hive` verbs (None: refused). `desks`: processes the office
        started as a desk besides its CLI (relayed verbs), by pid, each the leader of
        its session. `memory`: what answers a memory search (None: refused), given the
        request with `agent` set to whoever whoami says the caller is."""
        self.path = path
        self._handle = handle
        self._agents: Mapping[str, Desk] = agents if agents is not None else {}
        self._log = log
        self.desk = desk
        self._relay = relay
        self._desks = desks
        self._memory = memory
        self._listening = listen.Listening(
            path, lambda: listen.listen_streams(path, self._serve, limit=REQUEST_MAX)
        )
        # Desks the person has acted for this run: logged once each, not on every call.
        self._acted_for: set[str] = set()
        self._cap: ConnectionCap[asyncio.StreamWriter] = ConnectionCap(
            path.name, evict=lambda writer: writer.transport.abort(), told=_logger.warning
        )

    async def start(self) -> None:
        await self._listening.start()

    async def stop(self) -> None:
        await self._listening.stop()

    async def ensure(self) -> bool:
        return await self._listening.ensure()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # At most conncap.CONNECTIONS_MAX at once: a flood of silent connections loses
        # its oldest, never a caller being served.
        if not self._cap.admit(writer):
            writer.transport.abort()
            return
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), listen.READ_TIMEOUT_S)
            except ValueError:
                # StreamReader's limit: what was read of the line is already dropped.
                reply: ControlReply | Relayed = refused(
                    f"the request is longer than {REQUEST_MAX} bytes"
                )
            else:
                if not self._cap.spoke(writer):
                    return  # closed by the cap for room: what was read is that end
                reply = await self._answer(line, writer.get_extra_info("socket"))
            relayed = reply if isinstance(reply, Relayed) else None
            writer.write(_encode(relayed.reply if relayed else reply) + b"\n")
            await writer.drain()
            if relayed is not None and self._relay is not None:
                await self._relay(relayed.call, reader, writer)
        except (TimeoutError, ConnectionError):
            pass
        finally:
            self._cap.left(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, line: bytes, sock: socket.socket | None) -> ControlReply | Relayed:
        try:
            req = _decode(line)
        except RecursionError:
            return refused("the request is nested too deeply")
        except msgspec.DecodeError as e:
            return refused(f"not a request ({str(e)[:200]})")
        if self.desk is not None:
            refusal = link_refusal(self.desk, self.who(sock))
            if refusal is not None:
                return refused(refusal)
            decided = decide_desk(self.desk, req, self._agents)
            if not decided.ok or req.cmd == "whoami":
                return decided
            who: Attributed | ControlReply = Attributed(self.desk)
        else:
            decided = ControlReply(ok=True)
            who = self.who(sock)
        if isinstance(who, ControlReply):
            return who
        if req.cmd == "hive":
            if self._relay is None:
                return refused("this office does not run `hive` verbs")
            return Relayed(
                decided, VerbCall(req, who, self.desk, lambda asked: self.decide(who, asked))
            )
        return await self.decide(who, req)

    async def decide(self, who: Attributed, req: ControlRequest) -> ControlReply:
        """The answer to `req` from `who` (attributed by the socket it came in on)."""
        if req.cmd == "hive":
            return refused("a `hive` verb cannot run another")
        if req.cmd == "whoami":
            if who.stray:
                return refused(STRAY)
            reply, acted_for = decide_whoami(who.owner, req, self._agents)
            if acted_for is not None and acted_for not in self._acted_for and self._log:
                self._acted_for.add(acted_for)
                self._log(
                    acted_for,
                    f"the person acts as {acted_for} (HIVE_AGENT_ID) while it is not running",
                )
            return reply
        if req.cmd == "memory":
            return await self._search(who, req)
        verb = (req.text or "this") if req.cmd == "person" else req.cmd
        refusal = decide_call(who, req.cmd, verb)
        if refusal is not None:
            return refusal
        if req.cmd == "person":
            return ControlReply(ok=True, detail=HUMAN)
        return await self._handle(req)

    async def _search(self, who: Attributed, req: ControlRequest) -> ControlReply:
        """A memory search runs as whoever whoami says this caller is: the claim in the
        request is checked as whoami checks it, never taken as the searcher."""
        if self._memory is None:
            return refused("this office does not serve memory searches")
        if who.stray:
            return refused(STRAY)
        reply, _acted_for = decide_whoami(who.owner, req, self._agents)
        if not reply.ok:
            return reply
        return await self._memory(msgspec.structs.replace(req, agent=reply.detail))

    def who(self, sock: socket.socket | None) -> Attributed | ControlReply:
        """Who is on the other end of `sock`, a connection to one of the office's
        sockets (this one's, or the hook socket's): `attribute`, or why it cannot be told."""
        caller = listen.peer(sock)
        if caller is None:
            return refused("the office cannot see who is calling")
        leaders = {s.pid: s.id for s in self._agents.values() if s.pid is not None}
        leaders.update(self._desks())
        here = Here(os.getpid(), os.getsid(0))
        return attribute(caller, os.getuid(), leaders, ancestry, here)


class Here(NamedTuple):
    """The office's own process: its pid and its session id."""

    pid: int
    sid: int


def attribute(
    peer: Peer,
    own_uid: int,
    leaders: Mapping[int, str],
    chain: Callable[[int], list[tuple[int, int]]],
    here: Here | None = None,
) -> Attributed | ControlReply:
    """Who `peer` is, given each running agent's session leader (its CLI's pid, which is
    also its session id), `chain(pid)`: the process and its ancestors as (pid, session
    id), nearest first, and the office's own process (`here`; None: no office, so no
    strays). The rule is the module docstring's."""
    if peer.uid != own_uid:
        return refused(
            f"this process runs as uid {peer.uid}; the office serves only its own user "
            f"(uid {own_uid})"
        )
    if peer.pid <= 0:
        return refused(
            "the office cannot see the calling process (another pid namespace, such as a "
            "container); run `hive` on the office's host"
        )
    try:
        line = chain(peer.pid)
    except (FileNotFoundError, ProcessLookupError):
        return refused("the calling process exited before the office could check who it is")
    except OSError:
        return refused("the office cannot read the calling process in /proc")
    in_office_session = True
    for pid, session in line:
        owner = leaders.get(pid) or leaders.get(session)
        if owner is not None:
            return Attributed(owner)
        if here is not None and pid == here.pid:
            # The office itself, one of its own helpers, or what an agent left behind.
            return Attributed(None, stray=not in_office_session)
        in_office_session = in_office_session and here is not None and session == here.sid
    return Attributed(None)


def ancestry(pid: int) -> list[tuple[int, int]]:
    """`pid` and its ancestors as (pid, session id), from /proc, up to pid 1. Raises
    FileNotFoundError if `pid` is gone. An ancestor that exits meanwhile re-parents the
    rest (to a subreaper, which may be the office): the walk starts again, and a line
    that keeps changing is an OSError, never a shorter line (which could miss the
    office and make a stray the person)."""
    for _ in range(ANCESTRY_TRIES):
        line: list[tuple[int, int]] = []
        at = pid
        while at > 1 and len(line) < ANCESTRY_MAX:
            try:
                with open(f"/proc/{at}/stat", "rb") as f:
                    stat = f.read()
            except FileNotFoundError:
                if not line:
                    raise
                break
            # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
            fields = stat[stat.rindex(b")") + 2 :].split()
            line.append((at, int(fields[3])))
            at = int(fields[1])
        else:
            return line
    raise OSError(f"the parents of process {pid} kept changing")


def decide_call(who: Attributed, cmd: str, verb: str) -> ControlReply | None:
    """Whether `who` may do `cmd` (`verb`: what to call it): None if so, else the
    refusal. The one rule for what is the person's alone: every action that does not
    only read, `person` (the check of a verb run outside the office), anything unknown."""
    action = BY_NAME.get(cmd)
    if action is not None and action.reads_only:
        return None
    if who.stray:
        return refused(f"`{verb}` is the person's to do; {STRAY}")
    if who.owner is not None:
        return ControlReply(
            ok=False,
            error=f"you are {who.owner}: `{verb}` is the person's to do, and this "
            f"process belongs to {who.owner}'s session. Ask the person (hive send "
            "--to human) if it is needed.",
        )
    return None


def decide_whoami(
    owner: str | None, req: ControlRequest, agents: Mapping[str, Desk]
) -> tuple[ControlReply, str | None]:
    """Who the caller is, from whose process it is (`owner`, None for the person) and
    what it claims (`req.agent`, `req.secret`). Also the desk the person acts for while
    its agent is not running (to be logged), else None."""
    claimed = req.agent if req.agent not in (None, "", HUMAN) else None
    secret = req.secret or ""
    if owner is not None:
        if claimed != owner:
            as_whom = claimed or "the person"
            return ControlReply(
                ok=False,
                error=f"you are {owner}: this process belongs to {owner}'s session and "
                f"cannot act as {as_whom}. Run `hive` with your own HIVE_AGENT_ID "
                f"({owner}) and HIVE_SECRET.",
            ), None
        # The process is the proof; a secret given must still be this start's. None given
        # is fine: Codex and Gemini strip *SECRET* names from their tools' environment.
        if secret and not _secret_matches(agents[owner], secret):
            return _unproven(owner), None
        return ControlReply(ok=True, detail=owner), None
    if claimed is None:
        return ControlReply(ok=True, detail=HUMAN), None
    state = agents.get(claimed)
    if state is None:
        return ControlReply(
            ok=False, error=f"no agent {claimed!r} on the roster; see `hive roster`."
        ), None
    if state.spec.archived or state.status == "archived":
        return ControlReply(
            ok=False,
            error=f"{claimed} is archived: nobody acts as it. `hive-office spawn {claimed}` "
            "brings it back.",
        ), None
    # A secret given must be this start's, whoever gives it: a stale or forged one is
    # refused, never ignored. A right one proves nothing here (it can be read from the
    # agent's environment): the claim is judged as if none were given.
    if secret and not _secret_matches(state, secret):
        return _unproven(claimed), None
    if state.pid is not None:
        return ControlReply(
            ok=False,
            error=f"{claimed} is running: only its own processes act as {claimed} (its "
            "secret, wherever it was read, does not make another process its). Unset "
            "HIVE_AGENT_ID and HIVE_SECRET to act as the person.",
        ), None
    return ControlReply(ok=True, detail=claimed), claimed


def link_refusal(desk: str, who: Attributed | ControlReply) -> str | None:
    """Why a connection to remote desk `desk`'s own socket is refused (None: it is not).
    Only the desk's ssh link connects there (the host's processes come through it); a
    local process, another desk's above all, would act as `desk` with no claim to prove."""
    if isinstance(who, Attributed) and who.owner == desk and not who.stray:
        return None
    return f"a connection to {desk}'s own socket from a process that is not its ssh link"


def decide_desk(desk: str, req: ControlRequest, agents: Mapping[str, Desk]) -> ControlReply:
    """A request on remote desk `desk`'s own socket, where every connection is the desk's
    (its ssh link forwards the host's socket there; the host's processes are out of the
    kernel's sight). For whoami: the answer, as for a process of the desk's own session.
    For a relayed `hive` verb: ok (detail: the desk) if the claim holds (no agent named,
    or the desk; a secret given must be its current one) and the desk has a start to act
    for. Any other request: ok, and the rule for an agent's process applies to it."""
    if desk not in agents:
        return refused(f"{desk} is not on the roster any more; `hive roster` lists the team")
    if req.cmd == "whoami":
        return decide_whoami(desk, req, agents)[0]
    if req.cmd != "hive":
        return ControlReply(ok=True, detail=desk)
    # The remote `hive` may run without HIVE_AGENT_ID (a shell the person opened on the
    # host): the socket says whose it is.
    claim = req if req.agent else msgspec.structs.replace(req, agent=desk)
    reply, _ = decide_whoami(desk, claim, agents)
    if not reply.ok:
        return reply
    if not agents[desk].secret:
        return ControlReply(
            ok=False,
            error=f"{desk} has not been started by this office, so nothing can act as it "
            f"yet; `hive-office spawn {desk}` starts it.",
        )
    return reply


def _secret_matches(state: Desk, secret: str) -> bool:
    return bool(state.secret) and hmac.compare_digest(state.secret.encode(), secret.encode())


def _unproven(agent_id: str) -> ControlReply:
    return ControlReply(
        ok=False,
        error=f"this process cannot prove it is {agent_id}: its HIVE_SECRET is not the one "
        "the office gave that agent (stale or forged).",
    )


class Listener(Protocol):
    """A server of the office on a socket file in run/ (control, hook, kick, a remote
    desk's own hook and control sockets in run/desks/)."""

    path: Path

    async def ensure(self) -> bool:
        """Listen again if the socket file is gone or replaced; True if it had to."""
        ...


async def keep_sockets(
    stop: asyncio.Event, listeners: Sequence[Listener], recreated: Callable[[Path], None]
) -> None:
    """Until `stop`: every SOCKET_CHECK_S, put back any socket whose file vanished (an
    agent's `rm run/control.sock` must not leave the office deaf). `listeners` is read
    afresh each time: the office adds a hired remote desk's sockets to it while it runs."""
    while not stop.is_set():
        for listener in list(listeners):
            if await listener.ensure():
                recreated(listener.path)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SOCKET_CHECK_S)


def refused(why: str) -> ControlReply:
    return ControlReply(ok=False, error=f"refused: {why}.")
