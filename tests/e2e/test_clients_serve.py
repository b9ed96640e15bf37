"""Clients attached to a real `hive-office serve` over run/client.sock, spoken to with a
raw socket (no Textual): the snapshot holds what was printed before the client came,
two clients share the live stream and the keyboard, a client that stops reading slows
nobody and is resynced, and bad peers cost only their own connection."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hive_core.clients.protocol import (
    PROTOCOL_VERSION,
    Action,
    ActionReply,
    AgentChanged,
    Agents,
    AgentView,
    Bye,
    ClientMessage,
    Detach,
    Hello,
    Input,
    OfficeMessage,
    Output,
    Refused,
    Snapshot,
    Visible,
    Welcome,
    encode,
    office_reader,
)
from hive_core.hive import init_office
from hive_core.paths import HivePaths
from hive_core.schema import ControlRequest
from hive_core.terminal.emulator import GhosttyEmulator
from tests.support import wait_for

BIN = Path(sys.executable).parent
FLOOD = 50_000_000


def roster(root: Path) -> str:
    # michael printed a line before anyone attached; pam is a plain shell.
    return (
        '[office]\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\nprovider = "shell"\ncwd = "{root}"\n'
        "command = ['sh', '-c', 'echo early-$((6*7)); exec sh']\n\n"
        f'[[agents]]\nid = "pam"\nname = "Pam"\nprovider = "shell"\ncwd = "{root}"\n'
        "command = ['sh']\n"
    )


class Client:
    """A client as the app's SocketLink is one: it keeps each pane's terminal from the
    snapshots and the output it gets."""

    def __init__(self, path: Path, *, version: int = PROTOCOL_VERSION, hello: bool = True) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.reader = office_reader()
        self.got: list[OfficeMessage] = []
        self.screens: dict[str, GhosttyEmulator] = {}
        self.views: dict[str, AgentView] = {}
        self.closed = False
        if hello:
            self.send(Hello(version=version, pid=os.getpid(), term_cols=120, term_rows=40))

    def send(self, message: ClientMessage) -> None:
        self.sock.sendall(encode(message))

    def pump(self, timeout: float = 0.05) -> None:
        """Read what has arrived, up to 8 MiB (waiting up to `timeout` for the first bytes)."""
        self.sock.settimeout(timeout)
        budget = 8 << 20
        try:
            while not self.closed and budget > 0:
                data = self.sock.recv(1 << 20)
                budget -= len(data)
                if not data:
                    self.closed = True
                    break
                for message in self.reader.feed(data):
                    self.got.append(message)
                    self._apply(message)
                self.sock.settimeout(0)
        except (BlockingIOError, TimeoutError):
            pass

    def _apply(self, message: OfficeMessage) -> None:
        if isinstance(message, Agents):
            self.views.update((view.id, view) for view in message.agents)
        elif isinstance(message, AgentChanged):
            self.views[message.view.id] = message.view
        elif isinstance(message, Snapshot):
            self.screens.setdefault(message.agent, GhosttyEmulator()).restore(message.data)
        elif isinstance(message, Output):
            self.screens[message.agent].feed(message.data)

    def text(self, agent: str) -> str:
        screen = self.screens.get(agent)
        if screen is None:
            return ""
        rows = [*screen.history_text()]
        rows += ["".join(run.text for run in screen.line(y)) for y in range(screen.size[0])]
        return "\n".join(rows)

    def until(self, predicate: Callable[[], Any], what: str, timeout: float = 30) -> Any:
        def step() -> Any:
            self.pump()
            return predicate()

        return wait_for(step, what, timeout)

    def sees(self, agent: str, text: str, what: str) -> None:
        self.until(lambda: text in self.text(agent), what)

    def type(self, agent: str, line: str) -> None:
        self.send(Input(agent=agent, data=line.encode() + b"\r"))

    def close(self) -> None:
        self.sock.close()


class Office:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths = HivePaths(root / "home")
        self.paths.home.mkdir(parents=True)
        self.paths.office_toml.write_text(roster(root))
        init_office(self.paths)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        self.log = root / "serve.out"
        self.proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(self.paths.home)],
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_for(self.paths.client_socket.exists, "the client socket")
        wait_for(self.running, "both shells to run")

    def running(self) -> bool:
        agents = json.loads((self.paths.hive / "registry.json").read_text())["agents"]
        return len(agents) == 2 and all(a["pid"] for a in agents)

    def attached(self) -> int:
        try:
            return int(json.loads(self.paths.clients_file.read_text())["clients"])
        except (OSError, ValueError):
            return -1

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


@pytest.fixture
def office(tmp_path: Path) -> Iterator[Office]:
    # A short root: a Unix socket path has a 108-byte limit.
    with_root = Path(os.environ.get("TMPDIR", "/tmp")) / f"hc-{os.getpid()}-{time.monotonic_ns()}"
    with_root.mkdir()
    office = Office(with_root)
    try:
        yield office
    finally:
        office.stop()
        subprocess.run(["rm", "-rf", str(with_root)], check=False)


def closed(client: Client) -> Callable[[], bool]:
    return lambda: client.closed


def attached(office: Office) -> Client:
    client = Client(office.paths.client_socket)
    client.until(lambda: {"michael", "pam"} <= set(client.screens), "the snapshots")
    return client


def test_a_client_gets_the_screen_as_it_was_then_the_live_stream(office: Office) -> None:
    sock = office.paths.client_socket
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    client = attached(office)
    welcome, agents = client.got[0], client.got[1]
    assert isinstance(welcome, Welcome) and welcome.roster == ["michael", "pam"]
    assert welcome.home == str(office.paths.home) and welcome.version == PROTOCOL_VERSION
    assert isinstance(agents, Agents) and [a.id for a in agents.agents] == ["michael", "pam"]
    # Printed before anyone attached: in the office's screen, so in the snapshot.
    assert "early-42" in client.text("michael")
    client.type("pam", "echo live-$((5*5))")
    client.sees("pam", "live-25", "live output")
    # The person's actions go through the office's one dispatch.
    client.send(Action(id=3, req=ControlRequest(cmd="status")))
    reply = client.until(
        lambda: next((m for m in client.got if isinstance(m, ActionReply)), None), "the reply"
    )
    assert reply.id == 3 and reply.reply.ok
    # A hire: its pane comes with a snapshot before any output of it.
    hire = ControlRequest(cmd="hire", agent="dwight", name="Dwight", role="sales", provider="shell")
    client.send(Action(id=4, req=hire))
    client.until(lambda: "dwight" in client.screens, "the new agent's pane")
    client.until(lambda: client.views["dwight"].pid, "the new agent's shell to run")
    client.type("dwight", "echo hired-$((2*3))")
    client.sees("dwight", "hired-6", "the new agent's output")
    client.send(Detach())
    client.until(lambda: client.closed, "the office to close a detached client")
    assert isinstance(client.got[-1], Bye)
    wait_for(lambda: office.attached() == 0, "clients.json to say none")


def test_two_clients_share_output_keys_and_the_smallest_size(office: Office) -> None:
    one, two = attached(office), attached(office)
    wait_for(lambda: office.attached() == 2, "clients.json to count two")
    one.type("pam", "echo one-$((1+1))")
    two.type("pam", "echo two-$((2+2))")
    for client in (one, two):
        client.sees("pam", "one-2", "one's line in both")
        client.sees("pam", "two-4", "two's line in both")
    # Each pane's pty is the smallest of the clients that show it, rows and cols apart.
    one.send(Visible(agents=["pam"], sizes={"pam": (30, 100)}))
    two.send(Visible(agents=["pam", "michael"], sizes={"pam": (20, 110), "michael": (25, 90)}))
    one.type("pam", "echo size-$(stty size | tr ' ' x)")
    one.sees("pam", "size-20x100", "the pty at 20x100")
    # The smaller one leaves: the pane grows to what the other shows.
    two.close()
    wait_for(lambda: office.attached() == 1, "clients.json to count one")
    one.type("pam", "echo again-$(stty size | tr ' ' x)")
    one.sees("pam", "again-30x100", "the pty at 30x100")


def flood(client: Client, marker: str) -> float:
    """pam prints FLOOD bytes; the time it took, as the shell measured it."""
    client.type(
        "pam",
        f"s=$(date +%s%N); head -c {FLOOD} /dev/zero | tr '\\0' x; e=$(date +%s%N); "
        f"echo; echo {marker}-$(( (e - s) / 1000000 ))-ms",
    )
    pattern = re.compile(rf"{marker}-(\d+)-ms")
    found = client.until(lambda: pattern.search(client.text("pam")), "the flood", timeout=300)
    return int(found.group(1)) / 1000


def test_a_client_that_stops_reading_slows_nobody_and_is_resynced(office: Office) -> None:
    live = attached(office)
    alone = flood(live, "alone")
    stalled = attached(office)
    snapshots_before = sum(isinstance(m, Snapshot) for m in stalled.got)
    # From here `stalled` never reads, while pam prints 50 MB; `live` keeps reading.
    with_stalled = flood(live, "stalled")
    print(
        f"\n50 MB through the office: {alone:.2f} s alone, {with_stalled:.2f} s with a stalled client"
    )
    # It reads again: a fresh snapshot of the pane instead of the bytes it missed.
    stalled.until(
        lambda: sum(isinstance(m, Snapshot) for m in stalled.got) > snapshots_before,
        "a resync",
    )
    stalled.until(lambda: re.search(r"stalled-\d+-ms", stalled.text("pam")), "the end of the flood")
    missed = sum(len(m.data) for m in stalled.got if isinstance(m, Output) and m.agent == "pam")
    assert missed < FLOOD  # output was dropped, not queued without a bound
    stalled.type("pam", "echo after-$((3*3))")
    for client in (stalled, live):
        client.sees("pam", "after-9", "live again")


def test_bad_peers_cost_only_their_own_connection(office: Office) -> None:
    good = attached(office)
    # An agent's `rm run/client.sock` does not leave the person locked out.
    office.paths.client_socket.unlink()
    wait_for(office.paths.client_socket.exists, "the socket back")
    attached(office).close()
    old = Client(office.paths.client_socket, version=PROTOCOL_VERSION + 1)
    old.until(lambda: old.closed, "the office to close an old client")
    (refused,) = old.got
    assert isinstance(refused, Refused)
    assert f"version {PROTOCOL_VERSION}" in refused.why
    assert f"version {PROTOCOL_VERSION + 1}" in refused.why
    for garbage in (b"\xff\xff\xff\xff", b"\x00\x00\x00\x03abc", b"GET / HTTP/1.1\r\n\r\n"):
        bad = Client(office.paths.client_socket, hello=False)
        bad.sock.sendall(garbage)
        bad.until(closed(bad), "the office to close a garbage client")
        assert bad.got == []
    # Talking before Hello is not the protocol either.
    early = Client(office.paths.client_socket, hello=False)
    early.send(Input(agent="pam", data=b"echo never\r"))
    early.until(lambda: early.closed, "the office to close a client that skipped hello")
    good.type("pam", "echo still-$((4*4))")
    good.sees("pam", "still-16", "the good client still served")
    assert "never" not in good.text("pam")
    log = office.log.read_text()
    assert "not the client protocol" in log and "refused" in log
    assert office.proc.poll() is None


def test_a_client_killed_mid_stream_changes_nothing(office: Office) -> None:
    code = (
        "import os, socket, sys\n"
        "from hive_core.clients.protocol import Hello, encode\n"
        "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
        "s.sendall(encode(Hello(version=1, pid=os.getpid(), term_cols=80, term_rows=24)))\n"
        "s.recv(1); print('attached', flush=True); sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(office.paths.client_socket)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "attached\n"
    wait_for(lambda: office.attached() == 1, "the client to attach")
    proc.kill()
    proc.wait()
    wait_for(lambda: office.attached() == 0, "the dead client to be dropped")
    client = attached(office)
    client.type("pam", "echo fine-$((8*8))")
    client.sees("pam", "fine-64", "the office still serving")
    assert office.proc.poll() is None
