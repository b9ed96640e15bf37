"""The hook socket: one JSON frame in from cth-hook, one reply out.

A Unix stream socket in `run/` (folder 0700, socket 0600). A frame must carry the secret
minted for that agent's current start; one that does not gets no reply at all (the shim
then fails open), and the attempt is reported so the office can log it. So does a frame
the office will not decode: longer than HOOK_FRAME_MAX, not JSON, or nested deeper than
EVENT_DEPTH_MAX (no CLI's event comes near it; msgspec alone would go on to ~1,000 levels
and then raise RecursionError). A failure while answering is reported the same way: no
reply, and the next connection is served as usual.

On the office's own socket the sending process must also be the agent's (control.py's
attribution, `who`): a frame with a desk's secret from another desk's process or from
a stray is refused like a bad secret, since the secret can be read from the desk's
environment. The person's process is not refused there (nothing of an agent's is the
person's but what escaped the office's tree, the documented limit).

A remote desk X has a hook socket of its own (run/desks/X.hook.sock, forwarded by its ssh
link from the host): a frame there must be X's (`desk_refusal`) and come through X's ssh
link (`control.link_refusal`), so no local process can use X's link, whatever secret it
holds; it is refused like a bad secret, told once.

A socket holds at most conncap.CONNECTIONS_MAX connections: past it the oldest that has
sent nothing is closed (a flood of idle connections must not take the office's file
descriptors), told in the log once a flood.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

from hive_core import listen
from hive_core.conncap import ConnectionCap
from hive_core.control import Attributed, link_refusal
from hive_core.schema import HOOK_FRAME_MAX, ControlReply, HookFrame, HookReply

Handler = Callable[[str, dict[str, Any]], Awaitable[HookReply]]
SecretOf = Callable[[str], str | None]
Rejected = Callable[[str, str], None]  # (claimed agent id, why)
Failed = Callable[[str, BaseException], None]  # (agent id, what went wrong answering it)
Who = Callable[[socket.socket | None], Attributed | ControlReply]

_decode_frame = msgspec.json.Decoder(HookFrame).decode
_encode = msgspec.json.Encoder().encode
# Claude's deepest event (MultiEdit's edits) is 4 levels; MCP tool inputs add a few.
EVENT_DEPTH_MAX = 32


class HookServer:
    def __init__(
        self,
        path: Path,
        *,
        secret_of: SecretOf,
        handle: Handler,
        rejected: Rejected,
        failed: Failed,
        desk: str | None = None,
        who: Who | None = None,
    ) -> None:
        """`desk`: the remote desk whose own socket this is (None: the office's
        run/hook.sock); `who`: whose process a connection is (control.ControlServer.who)."""
        self.path = path
        self.desk = desk
        # Agents already told refused on this desk's socket: a loop of hooks logs once.
        self._refused: set[str] = set()
        self._secret_of = secret_of
        self._who = who
        self._handle = handle
        self._rejected = rejected
        self._failed = failed
        self._listening = listen.Listening(
            path, lambda: listen.listen_streams(path, self._serve, limit=HOOK_FRAME_MAX)
        )
        self._cap: ConnectionCap[asyncio.StreamWriter] = ConnectionCap(
            path.name,
            evict=lambda writer: writer.transport.abort(),
            told=lambda line: rejected("?", line),
        )

    async def start(self) -> None:
        await self._listening.start()

    async def ensure(self) -> bool:
        return await self._listening.ensure()

    async def stop(self) -> None:
        await self._listening.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._cap.admit(writer):
            writer.transport.abort()
            return
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), listen.READ_TIMEOUT_S)
            except ValueError:
                # StreamReader's limit: the line is longer than HOOK_FRAME_MAX.
                self._rejected("?", f"a frame over {HOOK_FRAME_MAX} bytes")
                return
            if not self._cap.spoke(writer):
                return  # closed by the cap for room: what was read is that end
            reply = await self._answer(line, writer.get_extra_info("socket"))
            if reply is not None:
                writer.write(_encode(reply) + b"\n")
                await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            self._cap.left(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, line: bytes, sock: socket.socket | None = None) -> HookReply | None:
        try:
            frame = _decode_frame(line)
        except msgspec.DecodeError:
            self._rejected("?", "a malformed frame")
            return None
        except RecursionError:
            self._rejected("?", f"a frame nested deeper than {EVENT_DEPTH_MAX} levels")
            return None
        refusal = desk_refusal(self.desk, frame.agent)
        if refusal is None and self.desk is not None and self._who is not None:
            refusal = link_refusal(self.desk, self._who(sock))
        if refusal is not None:
            claimed = frame.agent[:64]
            if claimed not in self._refused:
                self._refused.add(claimed)
                self._rejected(claimed, refusal)
            return None
        expected = self._secret_of(frame.agent)
        if not expected or not hmac.compare_digest(expected.encode(), frame.secret.encode()):
            self._rejected(frame.agent[:64], "a wrong or stale secret")
            return None
        if self._who is not None:
            refusal = sender_refusal(frame.agent, self._who(sock))
            if refusal is not None:
                self._rejected(frame.agent, refusal)
                return None
        if nested_deeper(frame.event, EVENT_DEPTH_MAX):
            self._rejected(frame.agent, f"a frame nested deeper than {EVENT_DEPTH_MAX} levels")
            return None
        try:
            return await self._handle(frame.agent, frame.event)
        except Exception as exc:
            # A bug or a bad state of one agent costs that hook its answer (the shim fails
            # open), never the server.
            self._failed(frame.agent, exc)
            return None


def sender_refusal(agent: str, who: Attributed | ControlReply) -> str | None:
    """Why a frame for `agent`, with its secret, is refused from the process `who`
    (None: it is not): another desk's process or a stray holds a secret it read."""
    if isinstance(who, ControlReply):
        return f"a frame whose sender could not be told ({who.error})"
    if who.stray:
        return "its secret from a process no desk's (left behind, or the office's own)"
    if who.owner is not None and who.owner != agent:
        return f"its secret from {who.owner}'s process"
    return None


def desk_refusal(desk: str | None, agent: str) -> str | None:
    """Why a frame for `agent` is refused on `desk`'s own socket (None: it is not; the
    office's own socket, desk None, takes any agent's frame with its secret)."""
    if desk is None or agent == desk:
        return None
    return f"a frame for {agent[:64]} on {desk}'s own socket (only {desk}'s are taken there)"


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether decoded JSON nests containers more than `limit` deep (iterative: the
    check itself must not recurse)."""
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
