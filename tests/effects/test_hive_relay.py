"""`hive` on a remote desk's host: every verb relayed over the desk's own control socket.

A real office (no agent CLIs) whose roster has a desk `jim` on another host: the office
listens on run/desks/jim.{hook,control}.sock because of the roster. The real `hive`
command runs as "the remote side" would run it: HIVE_REMOTE=1, HIVE_CONTROL pointing at
the remote end of jim's ssh link (a real `ssh -R` to a private sshd, registered as
jim's process), no HIVE_HOME, in a folder that is no office.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from hive_core.cli import hive
from hive_core.hive import init_office
from hive_core.office import Office
from hive_core.office.verbs import NO_PROGRAM, Program
from hive_core.paths import HivePaths
from hive_core.schema import ControlRequest
from tests.sshd_support import SshHost, running_sshd
from tests.support import wait_for

BIN = Path(sys.executable).parent
PYTHON = sys.executable
HIVE = str(BIN / "hive")
ROSTER = """[office]
manager = "michael"

[[agents]]
id = "michael"
name = "Michael"
provider = "shell"

[[agents]]
id = "jim"
name = "Jim"
provider = "shell"
host = "hive-remote"

[[agents]]
id = "pam"
name = "Pam"
provider = "shell"
"""


# Longer than one pipe read: stdin crosses in several frames.
BODY = "a line of the body from the remote side's stdin\n" * 1200


class Served:
    """An Office (no agent CLIs) on its own loop in a thread, every agent given a secret
    as a start would."""

    def __init__(self, paths: HivePaths, program: Program | None = hive) -> None:
        self.paths = paths
        self.office = Office(paths, agents=False, program=program)
        for state in self.office.states.values():
            state.new_secret()
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        wait_for(paths.desk_socket("jim", "control").exists, "jim's control socket", 30)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.office.run(self.stop))

    def secret(self, agent: str) -> str:
        return self.office.states[agent].secret

    def inbox(self, agent: str) -> list[dict[str, Any]]:
        folder = self.paths.hive / "agents" / agent / "inbox"
        return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]

    def sent(self, agent: str) -> list[Path]:
        box = self.paths.hive / "agents" / agent / "outbox"
        return [p for p in box.rglob("*.json")]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=60)


@pytest.fixture
def served(short_tmp: Path) -> Iterator[Served]:
    paths = HivePaths(short_tmp / "home")
    paths.home.mkdir()
    (paths.home / "office.toml").write_text(ROSTER)
    init_office(paths)
    office = Served(paths)
    yield office
    office.close()


class Link:
    """jim's ssh link, as the office's supervisor starts it: a real `ssh -R` of the desk's
    two sockets to "the host" (a private sshd), jim's process as far as the office can
    tell. Its forwarded ends (`control`, `hook`) are what the host's `hive` connects to."""

    def __init__(self, served: Served, host: SshHost, remote: Path) -> None:
        self.control, self.hook = remote / "control.sock", remote / "hook.sock"
        desk = served.paths.desk_socket
        self.proc = subprocess.Popen(
            ["ssh", *host.ssh_args, "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
             "-N", "-R", f"{self.control}:{desk('jim', 'control')}",
             "-R", f"{self.hook}:{desk('jim', 'hook')}", host.alias],
            stderr=subprocess.PIPE,
        )  # fmt: skip
        with served.office.states.edit("jim"):
            served.office.states["jim"].pid = self.proc.pid
        wait_for(lambda: self.control.exists() and self.hook.exists(), "jim's forwarded sockets")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def link(served: Served, short_tmp: Path) -> Iterator[Link]:
    remote = short_tmp / "remote"
    remote.mkdir(mode=0o700)
    with running_sshd(short_tmp / "ssh") as host:
        running = Link(served, host, remote)
        try:
            yield running
        finally:
            running.close()


def remote_env(control: Path, agent: str | None, secret: str | None) -> dict[str, str]:
    """The environment of a process on jim's host: no hive files, no HIVE_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env.update(HIVE_REMOTE="1", HIVE_CONTROL=str(control), PATH=f"{BIN}:{env.get('PATH', '')}")
    if agent is not None:
        env["HIVE_AGENT_ID"] = agent
    if secret is not None:
        env["HIVE_SECRET"] = secret
    return env


def remote_hive(
    cwd: Path,
    control: Path,
    *args: str,
    agent: str | None = "jim",
    secret: str | None = None,
    stdin: str = "",
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HIVE, *args],
        env=remote_env(control, agent, secret),
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def from_jim(office: Served, to: str, subject: str) -> list[dict[str, Any]]:
    return [m for m in office.inbox(to) if m["from"] == "jim" and m["subject"] == subject]


def test_an_office_given_no_command_line_refuses_verbs_with_a_sentence(short_tmp: Path) -> None:
    paths = HivePaths(short_tmp / "home")
    paths.home.mkdir()
    (paths.home / "office.toml").write_text(ROSTER)
    init_office(paths)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["HIVE_HOME"] = str(paths.home)

    def inbox() -> subprocess.CompletedProcess[str]:
        return subprocess.run([HIVE, "inbox"], env=env, capture_output=True, text=True, timeout=60)

    for program in (None, hive):
        office = Served(paths, program)
        try:
            done = inbox()
        finally:
            office.close()
        if program is None:
            assert done.returncode != 0 and done.stderr == NO_PROGRAM, done
        else:
            assert done.returncode == 0 and done.stderr == "", done


def test_verbs_run_as_the_desk_whose_socket_carried_them(
    served: Served, link: Link, short_tmp: Path
) -> None:
    assert (served.paths.desk_socket("jim", "control").parent.stat().st_mode & 0o777) == 0o700
    control = link.control
    away = short_tmp / "remote-cwd"
    away.mkdir()
    secret = served.secret("jim")

    sent = remote_hive(
        away, control, "send", "--to", "pam", "--subject", "hello", "--body", "hi", secret=secret
    )
    assert sent.returncode == 0, sent.stderr
    assert "sent to pam" in sent.stdout
    wait_for(lambda: from_jim(served, "pam", "hello"), "jim's message in pam's inbox")

    piped = remote_hive(away, control, "send", "--to", "pam", "--subject", "piped", "-",
                        stdin=BODY)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    got = wait_for(lambda: from_jim(served, "pam", "piped"), "the piped message")
    assert got[0]["body"] == BODY

    roster = remote_hive(away, control, "roster", agent=None)
    assert roster.returncode == 0, roster.stderr
    assert "you are jim" in roster.stdout

    inbox = remote_hive(away, control, "inbox", "--json")
    assert inbox.returncode == 0, inbox.stderr
    assert json.loads(inbox.stdout) == []
    assert len(from_jim(served, "pam", "hello")) == 1  # delivered once

    # The verb runs on the office's machine: another office there is not the desk's.
    elsewhere = remote_hive(away, control, "--home", str(short_tmp / "other"), "inbox")
    assert elsewhere.returncode == 2 and "drop --home" in elsewhere.stderr, elsewhere.stderr


def test_a_desks_verb_runs_in_the_office_with_no_second_interpreter(
    served: Served, link: Link, short_tmp: Path
) -> None:
    """The host's `hive` is the thin client (no msgspec, no click there), and the office
    runs the verb on one of its threads: the relay's child process is for the verbs
    that stay apart (hive_client.client.LOCAL, `log -f`) only."""
    control = link.control
    verbs = served.office.verbs
    relayed: list[list[str]] = []
    relay = verbs._relay

    async def counting(desk: str, req: ControlRequest, *streams: Any, **how: Any) -> None:
        relayed.append(list(req.argv))
        await relay(desk, req, *streams, **how)

    verbs._relay = counting  # type: ignore[assignment]
    env = remote_env(control, "jim", served.secret("jim"))
    sent = subprocess.run(
        [PYTHON, "-X", "importtime", HIVE, "send", "--to", "pam", "--subject", "thin",
         "--body", "x"],
        env=env, cwd=short_tmp, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert sent.returncode == 0 and sent.stdout.startswith("sent to pam"), sent.stderr
    loaded = [line.rsplit("|", 1)[1].strip() for line in sent.stderr.splitlines() if "|" in line]
    assert "hive_client.client" in loaded
    assert not [m for m in loaded if m.split(".")[0] in ("msgspec", "click", "json")], loaded
    wait_for(lambda: from_jim(served, "pam", "thin"), "jim's message in pam's inbox")
    assert relayed == []
    # A verb that stays apart still has its own process, run as the desk.
    helped = remote_hive(short_tmp, control, "memory", "--help", secret=served.secret("jim"))
    assert helped.returncode == 0 and "Usage: hive memory" in helped.stdout, helped.stderr
    assert relayed == [["memory", "--help"]]


def test_a_client_that_goes_away_takes_its_verb_along(
    served: Served, link: Link, short_tmp: Path
) -> None:
    control = link.control
    follow = subprocess.Popen(
        [HIVE, "log", "-f"],
        env=remote_env(control, "jim", served.secret("jim")),
        cwd=short_tmp,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pids = wait_for(lambda: served.office.relay.running, "the relayed `hive log -f`")
    follow.kill()
    follow.wait(timeout=30)
    wait_for(lambda: not served.office.relay.running, "the relayed verb to be killed")
    assert not Path(f"/proc/{pids[0]}").exists()


def test_a_desk_socket_that_vanishes_is_put_back(
    served: Served, link: Link, short_tmp: Path
) -> None:
    control = served.paths.desk_socket("jim", "control")
    control.unlink()
    wait_for(control.exists, "jim's control socket to be listened on again")
    done = remote_hive(short_tmp, link.control, "inbox", secret=served.secret("jim"))
    assert done.returncode == 0, done.stderr


def test_another_desks_claim_on_this_socket_is_refused(
    served: Served, link: Link, short_tmp: Path
) -> None:
    control = link.control
    for agent, secret in (("pam", served.secret("pam")), ("jim", served.secret("pam"))):
        done = remote_hive(short_tmp, control, "send", "--to", "michael", "--subject", "forged",
                           "--body", "x", agent=agent, secret=secret)  # fmt: skip
        assert done.returncode == 1, done.stdout
        assert done.stderr.startswith("hive: ") and done.stderr.count("\n") == 1, done.stderr
    assert served.sent("pam") == [] and served.sent("jim") == []
    assert served.inbox("michael") == []

    # The office's own control socket runs a verb as the process it attributes (this
    # one is the person's), never as a desk: the same forged claim is refused there.
    main = remote_hive(short_tmp, served.paths.control_socket, "inbox", secret=served.secret("pam"))
    assert main.returncode == 1 and "stale or forged" in main.stderr, main.stderr


def hook_frame(path: Path, agent: str, secret: str) -> bytes:
    """The reply line to a hook frame sent to `path` (b"": none)."""
    frame = {"agent": agent, "secret": secret, "event": {}}
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(path))
        s.sendall(json.dumps(frame).encode() + b"\n")
        return s.makefile("rb").readline()


def test_a_hook_frame_for_another_agent_gets_no_answer_on_a_desk_socket(
    served: Served, link: Link
) -> None:
    assert json.loads(hook_frame(link.hook, "jim", served.secret("jim")))["exit"] == 0
    assert hook_frame(link.hook, "pam", served.secret("pam")) == b""


def test_only_the_desks_ssh_link_connects_to_its_sockets(
    served: Served, link: Link, short_tmp: Path
) -> None:
    """A local process (another desk's, or anyone's) connecting to jim's own sockets
    directly would be taken as jim with nothing to prove: refused, its frame unanswered;
    the same verb and frame through jim's link are jim's."""
    secret = served.secret("jim")
    direct = served.paths.desk_socket("jim", "control")
    forged = remote_hive(short_tmp, direct, "send", "--to", "michael", "--subject", "forged",
                         "--body", "x", secret=secret)  # fmt: skip
    assert forged.returncode == 1 and "not its ssh link" in forged.stderr, forged.stderr
    assert served.sent("jim") == [] and served.inbox("michael") == []
    assert hook_frame(served.paths.desk_socket("jim", "hook"), "jim", secret) == b""
    through = remote_hive(short_tmp, link.control, "send", "--to", "michael", "--subject",
                          "through the link", "--body", "x", secret=secret)  # fmt: skip
    assert through.returncode == 0, through.stderr
    wait_for(lambda: from_jim(served, "michael", "through the link"), "jim's message")
    assert json.loads(hook_frame(link.hook, "jim", secret))["exit"] == 0


def test_hive_mcp_works_through_the_relay(served: Served, link: Link, short_tmp: Path) -> None:
    control = link.control
    env = remote_env(control, "jim", served.secret("jim"))

    async def talk() -> Any:
        params = StdioServerParameters(command=HIVE, args=["mcp"], env=env, cwd=str(short_tmp))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            return await client.call_tool("send", {"to": "pam", "subject": "over mcp"})

    result = asyncio.run(asyncio.wait_for(talk(), 120))
    assert not result.is_error, result.content
    wait_for(lambda: from_jim(served, "pam", "over mcp"), "the message sent over MCP")
