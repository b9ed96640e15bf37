"""Who is calling `hive` (or `hive mcp`): one rule for every verb, decided by the office.

While the office runs it attributes every call from the process itself: the control
socket reads the caller's pid (SO_PEERCRED), and the office knows which agent's
terminal session that process descends from (control.py). What the environment says
(HIVE_AGENT_ID, HIVE_SECRET) is only a claim the office checks against that, so an
agent cannot act as another or as the person by changing its environment.

With no office running nothing can check a claim. A verb that needs proof (the board,
the ledger, memory, promotion) refuses an agent's claim then (`proven`); mail takes the
claim as it stands, because it only queues in the claimed outbox and the router, when
it starts, attributes it by that outbox. An office that holds its home but does not
answer yet (starting or restarting) is waited for, a bounded while; anything else short
of a clear "no office runs" (a socket that does not answer in time, an unreadable
reply) is a refusal: this module fails closed.

Every `hive` call pays for one round trip here, so it imports nothing beyond what the
mail verbs already load (no `socket`, no asyncio).
"""

from __future__ import annotations

import _socket
import contextlib
import sys
import time
from pathlib import Path
from typing import NamedTuple

import msgspec

from hive_client.client import ANSWER_TIMEOUT_S, NOT_ANSWERING, RETRY_S, WAIT_S, WAITING
from hive_client.client import office_running as _office_running
from hive_core import invocation
from hive_core.config import agent
from hive_core.errors import OfficeError
from hive_core.paths import HivePaths, Mailbox
from hive_core.schema import HUMAN, ControlReply, ControlRequest, OfficeConfig

# The largest request line (`type` text is most of it): well past any paste a person
# makes, and what the office holds at most per connection.
REQUEST_MAX = 1 << 20

_encode = msgspec.json.Encoder().encode
_decode_reply = msgspec.json.Decoder(ControlReply).decode


class CallerError(OfficeError):
    """The caller's identity is missing, unknown or unproven; the message says what to do."""


class BadClaim(CallerError):
    """HIVE_AGENT_ID itself is wrong (empty, or not an agent of this office)."""


class Caller(NamedTuple):
    """The office a command acts on, who it acts for, and whether the office said so."""

    paths: HivePaths
    config: OfficeConfig
    who: str
    proven: bool

    @property
    def box(self) -> Mailbox:
        return self.paths.mailbox(self.who)

    @property
    def manager(self) -> str:
        return self.config.office.manager


def identify(paths: HivePaths, config: OfficeConfig) -> Caller:
    """Who this process is to the office at `paths`: the office's answer while it runs,
    the claim when no office runs (not proven), a CallerError otherwise."""
    claimed = _claim(config)
    secret = invocation.getenv("HIVE_SECRET") or ""
    reply = _ask(paths, ControlRequest(cmd="whoami", agent=claimed, secret=secret))
    if reply is None:
        return Caller(paths, config, claimed or HUMAN, proven=False)
    if not reply.ok or not reply.detail:
        raise CallerError(reply.error or NOT_ANSWERING)
    return Caller(paths, config, reply.detail, proven=True)


def require_person(paths: HivePaths, verb: str) -> None:
    """Refuse (CallerError) the person's `verb` that runs outside the office (stop,
    merge, worktree remove, hire with no office) to anything but the person. While an
    office runs it decides (control.decide_call, the rule of every action); with none,
    this process is not the person if its environment holds an agent's identity (the
    office gives every desk's processes HIVE_AGENT_ID and HIVE_SECRET). Nothing else is
    left to tell with no office: its agents and what they left behind are gone with it
    (pty_session.py, strays.py)."""
    reply = _ask(paths, ControlRequest(cmd="person", text=verb))
    if reply is not None:
        if not reply.ok:
            raise CallerError(reply.error or NOT_ANSWERING)
        return
    claimed = (invocation.getenv("HIVE_AGENT_ID") or "").strip()
    held = [
        *([f"HIVE_AGENT_ID={claimed}"] if claimed not in ("", HUMAN) else []),
        *(["HIVE_SECRET"] if invocation.getenv("HIVE_SECRET") else []),
    ]
    if held:
        raise CallerError(
            f"`{verb}` is the person's to do, and this process holds an agent's identity "
            f"({', '.join(held)}); run it from your own terminal, or unset "
            "HIVE_AGENT_ID and HIVE_SECRET if this terminal is yours."
        )


def _ask(paths: HivePaths, req: ControlRequest) -> ControlReply | None:
    """The office's answer to `req`, None if no office runs. An office holding its home
    but not answering yet (starting, restarting) is waited for, up to WAIT_S, with one
    line saying so, as the thin `hive` waits (hive_client/client.py); anything else
    short of an answer is a CallerError."""
    waiting_since = None
    while True:
        try:
            return request(paths.control_socket, req, timeout=ANSWER_TIMEOUT_S)
        except ConnectionError:  # no socket, nobody listening, or closed unanswered
            running = office_running(paths)
            if running is False:
                return None
            if running is None:
                raise CallerError(NOT_ANSWERING) from None
        except OSError:  # TimeoutError included
            if office_running(paths) is not False:
                raise CallerError(NOT_ANSWERING) from None
            return None
        except msgspec.DecodeError:
            raise CallerError(NOT_ANSWERING) from None
        now = time.monotonic()
        if waiting_since is None:
            waiting_since = now
            sys.stderr.write(WAITING)
            sys.stderr.flush()
        elif now - waiting_since > WAIT_S:
            raise CallerError(NOT_ANSWERING)
        time.sleep(RETRY_S)


def proven(caller: Caller) -> Caller:
    """`caller`, for what only a proven caller may change (the board, the ledger, memory,
    promotion). An agent's claim no running office confirmed is refused; the person's
    stands, since no agent runs without the office."""
    if caller.proven or caller.who == HUMAN:
        return caller
    from hive_core.hint import office_command  # this refusal's alone: `hive` starts lean

    raise CallerError(
        f"the office must be running to prove that you are {caller.who}; start it "
        f"(`{office_command(caller.paths.home)}`) and try again."
    )


def _claim(config: OfficeConfig) -> str | None:
    """The agent id the environment claims; None for the person. A claim that is not
    an agent of this office is refused before anyone is asked."""
    raw = invocation.getenv("HIVE_AGENT_ID")
    if raw is None:
        return None
    claimed = raw.strip()
    if not claimed:
        raise BadClaim(
            "HIVE_AGENT_ID is set but empty; unset it to act as the person, or set it "
            "to your agent id."
        )
    if claimed == HUMAN:
        return None
    if agent(config, claimed) is None:
        ids = ", ".join(a.id for a in config.agents)
        raise BadClaim(
            f"HIVE_AGENT_ID is {claimed!r}, which is not an agent of this office ({ids}); "
            "unset it to act as the person (human)."
        )
    return claimed


def office_running(paths: HivePaths) -> bool | None:
    """Whether an office holds `paths`' home (its flock on the home folder); None when
    that cannot be told."""
    return _office_running(str(paths.home))


def _connect(sock: _socket.socket, path: Path, deadline: float) -> None:
    """Connect, waiting while the office's queue of connections is full: a Unix socket
    with a timeout fails at once then (EAGAIN), as under a flood of connections."""
    while True:
        try:
            sock.connect(str(path))
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError("the office's socket stayed full") from None
            time.sleep(0.01)


def request(path: Path, req: ControlRequest, timeout: float = 10.0) -> ControlReply:
    """Send one request to a running office. Raises ConnectionError if none listens,
    TimeoutError if it does not answer in time. In a verb the office runs for a caller
    (hive_core/invocation.py) the office answers as that caller, without a socket."""
    running = invocation.current()
    if running is not None:
        return running.ask(req)
    frame = _encode(req) + b"\n"
    if len(frame) > REQUEST_MAX:
        return ControlReply(
            ok=False,
            error=f"refused: the request is {len(frame)} bytes, over the office's "
            f"{REQUEST_MAX}-byte limit; send the text in smaller parts.",
        )
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            _connect(sock, path, time.monotonic() + timeout)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            raise ConnectionError(str(e)) from None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            # The office may answer (a refusal) and close before it read everything.
            sock.sendall(frame)
        data = b""
        while not data.endswith(b"\n") and len(data) <= REQUEST_MAX:
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        sock.close()
    if not data:
        # Closed with no answer: an office stopping took the connection, not the request.
        raise ConnectionError("the office closed the connection without an answer")
    return _decode_reply(data)
