"""cth-hook as the agent CLI runs it: a real subprocess against a real Unix socket."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import cth_hook.__main__ as shim
from hive_core.events.hook_socket import HookServer
from hive_core.schema import HOOK_FRAME_MAX, HookReply

SHIM_FILE = Path(shim.__file__)
STOP_EVENT = {"session_id": "s-1", "hook_event_name": "Stop", "stop_hook_active": False}
# Fail-open cases must be quick; generous against a loaded CI machine, far below a hang.
FAST = 1.5

# A connection handler: gets the connected socket and the request line it sent (or None
# if it sent nothing before closing).
Handler = Callable[[socket.socket, bytes | None], None]


class SocketServer:
    """A tiny office stand-in: records each request line and lets a handler answer."""

    def __init__(self, path: str, handler: Handler) -> None:
        self.path = path
        self.handler = handler
        self.lines: list[bytes] = []
        self.connections = 0
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(8)
        self._held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            self._held.append(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        line = conn.makefile("rb").readline() or None
        if line is not None:
            self.lines.append(line)
        self.handler(conn, line)

    @property
    def frames(self) -> list[dict]:
        return [json.loads(line) for line in self.lines]

    def close(self) -> None:
        self._sock.close()
        for conn in self._held:
            conn.close()


def reply_with(payload: bytes) -> Handler:
    def handle(conn: socket.socket, line: bytes | None) -> None:
        conn.sendall(payload)
        conn.close()

    return handle


def reply_json(exit: int = 0, stdout: str = "", stderr: str = "") -> Handler:
    return reply_with(
        json.dumps({"exit": exit, "stdout": stdout, "stderr": stderr}).encode() + b"\n"
    )


def never_reply(conn: socket.socket, line: bytes | None) -> None:
    # Keep the connection open (SocketServer holds it) and say nothing.
    return


def close_at_once(conn: socket.socket, line: bytes | None) -> None:
    conn.close()


@pytest.fixture
def sock_dir(short_tmp: Path) -> Path:
    return short_tmp


@pytest.fixture
def serve(sock_dir: Path) -> Iterator[Callable[[Handler], SocketServer]]:
    servers: list[SocketServer] = []

    def start(handler: Handler) -> SocketServer:
        server = SocketServer(str(sock_dir / f"office-{len(servers)}.sock"), handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


# The two ways a settings file can call the shim: through the package (what the console
# script does) and as a file with site start-up skipped (the fast form).
INVOCATIONS = {
    "module": [sys.executable, "-m", "cth_hook"],
    "file": [sys.executable, "-I", "-S", str(SHIM_FILE)],
}


def run_shim(
    socket_path: str | None,
    stdin: bytes,
    *,
    invocation: str = "module",
    extra_env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env.update(HIVE_AGENT_ID="jim", HIVE_SECRET="s3cret")
    if socket_path is not None:
        env["HIVE_SOCKET"] = socket_path
    env.update(extra_env or {})
    started = time.monotonic()
    proc = subprocess.run(
        INVOCATIONS[invocation], input=stdin, capture_output=True, env=env, timeout=20
    )
    return proc, time.monotonic() - started


def event_bytes(event: dict = STOP_EVENT) -> bytes:
    return json.dumps(event).encode()


def assert_silent_success(proc: subprocess.CompletedProcess[bytes]) -> None:
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


# --- the happy path --------------------------------------------------------------------


@pytest.mark.parametrize("invocation", sorted(INVOCATIONS))
def test_frame_carries_identity_and_event_and_reply_is_relayed(serve, invocation: str) -> None:
    block = json.dumps({"decision": "block", "reason": "You have mail"})
    server = serve(reply_json(0, stdout=block, stderr="note"))

    proc, _ = run_shim(server.path, event_bytes(), invocation=invocation)

    assert proc.returncode == 0
    assert proc.stdout.decode() == block
    assert proc.stderr.decode() == "note"
    assert server.frames == [{"agent": "jim", "secret": "s3cret", "event": STOP_EVENT}]


def test_exit_code_and_unicode_pass_through(serve) -> None:
    server = serve(reply_json(2, stderr="denied: ünïcödé ✓"))
    event = {"hook_event_name": "PreToolUse", "tool_input": {"command": "echo ✓"}}

    proc, _ = run_shim(server.path, event_bytes(event))

    assert proc.returncode == 2
    assert proc.stderr.decode() == "denied: ünïcödé ✓"
    assert server.frames[0]["event"] == event


def test_one_frame_one_line(serve) -> None:
    server = serve(reply_json())
    run_shim(server.path, b'{\n  "hook_event_name": "Stop"\n}\n')
    assert len(server.lines) == 1
    assert server.lines[0].endswith(b"\n") and server.lines[0].count(b"\n") == 1


# --- failing open ----------------------------------------------------------------------


def test_no_socket_is_silent_and_instant(sock_dir: Path) -> None:
    proc, took = run_shim(str(sock_dir / "absent.sock"), event_bytes())
    assert_silent_success(proc)
    assert took < FAST


def test_stale_socket_file_is_silent(sock_dir: Path) -> None:
    # An office that died leaves its socket file behind: connect is refused.
    path = str(sock_dir / "stale.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()
    proc, took = run_shim(path, event_bytes())
    assert_silent_success(proc)
    assert took < FAST


def test_no_office_configured_is_silent() -> None:
    proc, _ = run_shim(None, event_bytes())
    assert_silent_success(proc)


def test_office_that_never_replies_is_cut_off_at_the_deadline(serve) -> None:
    server = serve(never_reply)
    proc, took = run_shim(server.path, event_bytes(), extra_env={"HIVE_HOOK_TIMEOUT": "0.3"})
    assert_silent_success(proc)
    assert 0.3 <= took < FAST
    assert server.connections == 1


def test_default_deadline_bounds_a_hung_office(serve) -> None:
    server = serve(never_reply)
    proc, took = run_shim(server.path, event_bytes())
    assert_silent_success(proc)
    assert took < shim.DEFAULT_TIMEOUT + FAST


def test_office_that_closes_without_reply(serve) -> None:
    server = serve(close_at_once)
    proc, took = run_shim(server.path, event_bytes())
    assert_silent_success(proc)
    assert took < FAST


@pytest.mark.parametrize(
    "stdin", [b"", b"not json", b"[1, 2]", b'{"truncated": ', b"\xff\xfe\x00garbage"]
)
def test_malformed_stdin_never_reaches_the_office(serve, stdin: bytes) -> None:
    server = serve(reply_json(2, stdout="should not be seen"))
    proc, took = run_shim(server.path, stdin)
    assert_silent_success(proc)
    assert took < FAST
    assert server.lines == []


DEEP = 100_000


def test_deeply_nested_stdin_fails_open(serve) -> None:
    server = serve(reply_json(2, stdout="should not be seen"))
    nested = b'{"hook_event_name": "Stop", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    proc, took = run_shim(server.path, nested)
    assert_silent_success(proc)
    assert took < FAST
    assert server.lines == []
    # The allowed path: the same event without the nesting is relayed.
    proc, _ = run_shim(server.path, b'{"hook_event_name": "Stop", "x": [[]]}')
    assert proc.returncode == 2 and proc.stdout == b"should not be seen"


def test_oversize_stdin_is_dropped(serve) -> None:
    server = serve(reply_json(2, stdout="should not be seen"))
    huge = event_bytes({"blob": "x" * (shim.MAX_FRAME_BYTES + 1)})
    proc, _ = run_shim(server.path, huge)
    assert_silent_success(proc)
    assert server.lines == []


@pytest.mark.parametrize(
    "payload",
    [
        b"garbage\n",
        b"[0]\n",
        b'{"exit": "2", "stdout": "x"}\n',
        b'{"exit": 2, "stdout": 7}\n',
        b'{"exit": 300}\n',
        b'{"exit": true, "stdout": "x"}\n',
        b'{"exit": 2, "stdout": "no newline, then close"}',
        b'{"exit": 2, "stdout": ' + b"[" * DEEP + b"]" * DEEP + b"}\n",
        b"[" * DEEP + b"\n",
        b"\x00\xff" * 1000 + b"\n",
    ],
    ids=lambda p: repr(p[:24]),
)
def test_malformed_reply_is_ignored(serve, payload: bytes) -> None:
    server = serve(reply_with(payload))
    proc, took = run_shim(server.path, event_bytes())
    assert_silent_success(proc)
    assert took < FAST


def test_stdin_that_never_closes_is_cut_off(serve) -> None:
    server = serve(reply_json(2))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env.update(
        HIVE_AGENT_ID="jim", HIVE_SECRET="s", HIVE_SOCKET=server.path, HIVE_HOOK_TIMEOUT="0.3"
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        INVOCATIONS["module"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(b'{"hook_event_name": ')
    proc.stdin.flush()
    # Our end of stdin stays open until the shim has exited on its own.
    returncode = proc.wait(timeout=10)
    took = time.monotonic() - started
    proc.stdin.close()
    assert proc.stdout is not None and proc.stderr is not None
    assert (returncode, proc.stdout.read(), proc.stderr.read()) == (0, b"", b"")
    assert took < FAST
    assert server.lines == []


@pytest.mark.parametrize("value", ["abc", "-1", "0"])
def test_bad_timeout_setting_falls_back_to_default(value: str, monkeypatch) -> None:
    monkeypatch.setenv("HIVE_HOOK_TIMEOUT", value)
    assert shim._timeout() == shim.DEFAULT_TIMEOUT


# --- the shim's bound is the office's bound ----------------------------------------------


def test_shim_frame_limit_is_the_offices() -> None:
    assert shim.MAX_FRAME_BYTES == HOOK_FRAME_MAX


def _event_whose_frame_is(size: int) -> bytes:
    """A Stop event whose frame, as the shim builds it for jim/s3cret, is `size` bytes.
    The blob is control characters, which JSON escapes to six bytes each: the frame is
    measured as sent, not as read."""

    def frame(event: dict) -> bytes:
        return json.dumps({"agent": "jim", "secret": "s3cret", "event": event}).encode()

    escaped, plain = divmod(size - len(frame({**STOP_EVENT, "blob": ""})), 6)
    event = {**STOP_EVENT, "blob": "\x01" * escaped + "x" * plain}
    assert len(frame(event)) == size
    return json.dumps(event).encode()


class OfficeHookServer:
    """The office's real HookServer on its own loop in a thread."""

    def __init__(self, path: Path) -> None:
        self.handled = 0
        self.refusals: list[str] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

        async def handle(agent: str, event: dict[str, object]) -> HookReply:
            self.handled += 1
            return HookReply(exit=2, stderr="the office saw it")

        self.server = HookServer(
            path,
            secret_of=lambda agent: "s3cret" if agent == "jim" else None,
            handle=handle,
            rejected=lambda agent, why: self.refusals.append(why),
            failed=lambda agent, exc: self.refusals.append(repr(exc)),
        )
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_a_frame_at_the_limit_is_answered_one_byte_over_never_sent(sock_dir: Path) -> None:
    office = OfficeHookServer(sock_dir / "hook.sock")
    try:
        at_limit, _ = run_shim(str(office.server.path), _event_whose_frame_is(HOOK_FRAME_MAX))
        assert (at_limit.returncode, at_limit.stderr) == (2, b"the office saw it")
        assert (office.handled, office.refusals) == (1, [])

        over, _ = run_shim(str(office.server.path), _event_whose_frame_is(HOOK_FRAME_MAX + 1))
        assert_silent_success(over)
        assert (office.handled, office.refusals) == (1, [])
    finally:
        office.close()
