"""Bounds on what an agent can make the office hold (issue 24): connections per socket,
quarantined bytes and staged files, memory sources, git faults told to health.

Each attack is what an agent can do from its own shell: open connections and say
nothing, write files into its own folders. Each test also proves the allowed path."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from hive_core import conncap, control
from hive_core.events import server as hook_server
from hive_core.schema import ControlRequest
from tests.conftest import Running
from tests.effects.test_hook_server import hook
from tests.support import wait_for

FLOOD = conncap.CONNECTIONS_MAX + 60


def closed_by_peer(sock: socket.socket) -> bool:
    """True once the other end closed (a read finds the end), without waiting."""
    try:
        return sock.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A silent connection is not timed out during the test: only the cap closes one."""
    monkeypatch.setattr(hook_server, "READ_TIMEOUT_S", 3600.0)
    monkeypatch.setattr(control, "READ_TIMEOUT_S", 3600.0)
    yield


def flood(stack: ExitStack, path: Path, count: int) -> list[socket.socket]:
    held = []
    for _ in range(count):
        sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        sock.connect(str(path))
        held.append(sock)
    return held


@pytest.mark.usefixtures("patient")
def test_silent_connections_past_the_cap_lose_the_oldest_and_hooks_still_answer(
    running: Running,
) -> None:
    paths = running.office.paths
    over = FLOOD - conncap.CONNECTIONS_MAX
    with ExitStack() as stack:
        held = flood(stack, paths.hook_socket, FLOOD)
        # The office closed exactly the oldest `over`; the newest are held, not refused.
        wait_for(lambda: all(map(closed_by_peer, held[:over])), "the oldest to be closed")
        assert not any(map(closed_by_peer, held[over:]))
        # A real hook from the shim is answered meanwhile (it takes one more slot).
        out = hook(running, "jim", {"hook_event_name": "SessionStart", "session_id": "s-1"})
        assert "You are Jim" in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
        assert closed_by_peer(held[over])
        assert not any(map(closed_by_peer, held[over + 1 :]))
    log = paths.log.read_text()
    told = [line for line in log.splitlines() if "connections" in line and "hook.sock" in line]
    assert len(told) == 1, told  # once a flood, not once a connection
    assert f"more than {conncap.CONNECTIONS_MAX} connections at once" in told[0]
    # The flood over (every connection closed), the end of it is told with the count.
    wait_for(
        lambda: "connections over the cap were closed" in paths.log.read_text(),
        "the end of the flood told",
    )


@pytest.mark.usefixtures("patient")
def test_a_control_flood_does_not_stop_a_whoami_and_spares_callers_being_served(
    running: Running,
) -> None:
    paths = running.office.paths
    over = FLOOD - conncap.CONNECTIONS_MAX
    with ExitStack() as stack:
        held = flood(stack, paths.control_socket, FLOOD)
        wait_for(lambda: all(map(closed_by_peer, held[:over])), "the oldest to be closed")
        assert not any(map(closed_by_peer, held[over:]))
        reply = control.request(paths.control_socket, ControlRequest(cmd="whoami"), 10.0)
        assert reply.ok, reply
    # Every slot held by a caller being served: the new connection is the one refused.
    cap: conncap.ConnectionCap[str] = conncap.ConnectionCap(
        "x.sock", evict=lambda _c: pytest.fail("a served caller was closed"), told=print, limit=2
    )
    for conn in ("a", "b"):
        assert cap.admit(conn)
        cap.spoke(conn)
    assert not cap.admit("c")
    cap.left("a")
    assert cap.admit("c")


def test_the_office_raises_its_soft_descriptor_limit_within_the_hard_one() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        got = conncap.raise_fd_limit(wanted=512)
        assert got == resource.getrlimit(resource.RLIMIT_NOFILE)[0] == min(512, hard)
        # Never lowered.
        assert conncap.raise_fd_limit(wanted=300) == got
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
