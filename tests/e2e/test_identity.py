"""Identity you cannot borrow (issue 13): a real `hive-office serve` with shell agents,
commands typed into their terminals, each impersonation refused and each rightful
call served."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from hive_core.control import Attributed, Peer, ancestry, attribute
from hive_core.schema import ControlReply
from tests.support import wait_for

BIN = Path(sys.executable).parent
AGENTS = ("michael", "jim", "pam")
# contain = false: these are the office's identity rules, seen from desks that write
# their results to a scratch folder of the test (a contained desk may not; its walls are
# tests/e2e/test_contained_desks.py's).
ROSTER = (
    '[office]\nmanager = "michael"\ncontain = false\n'
    + "".join(
        f'\n[[agents]]\nid = "{a}"\nname = "{a.title()}"\nprovider = "shell"\n' for a in AGENTS
    )
    # Never started: the person may act for it. Archived: nobody may.
    + '\n[[agents]]\nid = "dwight"\nname = "Dwight"\nprovider = "shell"\nsend_only = true\n'
    + '\n[[agents]]\nid = "toby"\nname = "Toby"\nprovider = "shell"\narchived = true\n'
)


class Done(NamedTuple):
    rc: int
    out: str


class Office:
    """A served office whose agents are shells, and a way to run commands in them."""

    def __init__(self, home: Path, scratch: Path) -> None:
        self.home = home
        self.scratch = scratch
        self._count = itertools.count()
        self.proc = subprocess.Popen(
            [str(BIN / "hive-office"), "serve", "--home", str(home)],
            env=self.env(),
            stdout=(scratch / "serve.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: all(self.registry()[a]["pid"] for a in AGENTS), "the agents to start")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
        env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
        env["HIVE_HOME"] = str(self.home)
        return {**env, **extra}

    def registry(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads((self.home / "hive" / "registry.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {a: {"pid": None} for a in AGENTS}
        return {e["id"]: e for e in data["agents"]}

    def person(self, *args: str, **env: str) -> Done:
        """A command run by the person: a process outside every agent."""
        done = subprocess.run(
            [str(BIN / args[0]), *args[1:]],
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        return Done(done.returncode, done.stdout + done.stderr)

    def in_agent(self, agent: str, command: str) -> Done:
        """`command` typed into `agent`'s terminal, as the person would type it."""
        n = next(self._count)
        out, rc = self.scratch / f"{n}.out", self.scratch / f"{n}.rc"
        typed = self.person(
            "hive-office", "type", agent, f"{{ {command} ; }} >{out} 2>&1; echo $? >{rc}"
        )
        assert typed.rc == 0, typed.out
        wait_for(lambda: rc.exists() and rc.read_text().endswith("\n"), f"`{command}` in {agent}")
        return Done(int(rc.read_text()), out.read_text())

    def detached_in_agent(self, agent: str, command: str) -> Done:
        """`command` started from `agent`'s terminal in a session of its own, orphaned at
        once (`setsid -f`): no longer in the agent's session nor its child."""
        n = next(self._count)
        out, rc = self.scratch / f"{n}.out", self.scratch / f"{n}.rc"
        script = self.scratch / f"{n}.sh"
        script.write_text(f"{{ {command} ; }} >{out} 2>&1; echo $? >{rc}\n")
        typed = self.person("hive-office", "type", agent, f"setsid -f sh {script}")
        assert typed.rc == 0, typed.out
        wait_for(lambda: rc.exists() and rc.read_text().endswith("\n"), f"`{command}` detached")
        return Done(int(rc.read_text()), out.read_text())

    def secret_of(self, agent: str) -> str:
        """What any process of the same user can read: the agent's environment."""
        pid = self.registry()[agent]["pid"]
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return next(v for v in environ if v.startswith(b"HIVE_SECRET=")).split(b"=", 1)[1].decode()

    def inbox(self, agent: str) -> list[dict[str, object]]:
        folder = self.home / "hive" / "agents" / agent / "inbox"
        return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]

    def board(self) -> str:
        return (self.home / "hive" / "board.md").read_text()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Office]:
    root = tmp_path_factory.mktemp("identity")
    home = root / "home"
    home.mkdir()
    (home / "office.toml").write_text(ROSTER)
    init = subprocess.run(
        [str(BIN / "hive-office"), "init", "--home", str(home)], capture_output=True, text=True
    )
    assert init.returncode == 0, init.stderr
    scratch = root / "scratch"
    scratch.mkdir()
    running = Office(home, scratch)
    yield running
    running.stop()


def delivered(office: Office, to: str, sender: str, subject: str) -> bool:
    return any(m["from"] == sender and m["subject"] == subject for m in office.inbox(to))


def test_an_agent_sends_as_itself_and_as_nobody_else(office: Office) -> None:
    ok = office.in_agent("jim", "hive send --to pam --subject mine --body hi")
    assert ok.rc == 0 and "sent to pam" in ok.out
    # Its process proves it; CLIs that strip *SECRET* from their tools' environment work.
    bare = office.in_agent("jim", "env -u HIVE_SECRET hive inbox")
    assert bare.rc == 0, bare.out
    forged = office.in_agent("jim", "HIVE_SECRET=guessed hive inbox")
    assert forged.rc == 1 and "stale or forged" in forged.out
    wait_for(lambda: delivered(office, "pam", "jim", "mine"), "jim's message to pam")

    for attempt in (
        "HIVE_AGENT_ID=pam hive send --to michael --subject forged --body x",
        f"HIVE_AGENT_ID=pam HIVE_SECRET={office.secret_of('pam')} hive send --to michael "
        "--subject forged --body x",
        "env -u HIVE_AGENT_ID hive send --to michael --subject forged --body x",
    ):
        refused = office.in_agent("jim", attempt)
        assert refused.rc == 1 and "you are jim" in refused.out, (attempt, refused.out)
    detached = office.detached_in_agent(
        "jim",
        "env -u HIVE_AGENT_ID -u HIVE_SECRET hive send --to michael --subject forged --body x",
    )
    assert detached.rc == 1 and "you are jim" in detached.out, detached.out
    assert not any(m["subject"] == "forged" for m in office.inbox("michael"))
    assert not list((office.home / "hive" / "agents" / "pam" / "outbox").glob("*.json"))


def test_an_agent_reads_only_its_own_mail(office: Office) -> None:
    office.person("hive", "send", "--to", "pam", "--subject", "for pam", "--body", "x")
    wait_for(lambda: delivered(office, "pam", "human", "for pam"), "the person's message to pam")
    for attempt in ("HIVE_AGENT_ID=pam hive inbox --json", "HIVE_AGENT_ID=pam hive done --all"):
        refused = office.in_agent("jim", attempt)
        assert refused.rc == 1 and "you are jim" in refused.out
    assert delivered(office, "pam", "human", "for pam")  # still unread for her
    mine = office.in_agent("pam", "hive inbox --json")
    assert mine.rc == 0 and "for pam" in mine.out


def test_only_the_manager_writes_the_board_and_nobody_borrows_the_manager(office: Office) -> None:
    worker = office.in_agent("jim", "hive board --text '# by jim'")
    assert worker.rc == 1 and "only the manager (michael)" in worker.out
    for attempt in (
        "env -u HIVE_AGENT_ID hive board --text '# by jim'",
        f"HIVE_AGENT_ID=michael HIVE_SECRET={office.secret_of('michael')} hive board "
        "--text '# by jim'",
        "env -u HIVE_AGENT_ID hive task add 'by jim'",
        "HIVE_AGENT_ID=michael hive memory promote 0123456789abcdef",
    ):
        refused = office.in_agent("jim", attempt)
        assert refused.rc == 1 and "you are jim" in refused.out, (attempt, refused.out)
    detached = office.detached_in_agent("jim", "HIVE_AGENT_ID=michael hive board --text '# by jim'")
    assert detached.rc == 1 and "you are jim" in detached.out, detached.out
    assert "by jim" not in office.board()
    ok = office.in_agent("michael", "hive board --text '# by michael'")
    assert ok.rc == 0, ok.out
    assert office.board().startswith("# by michael")
    added = office.in_agent("michael", "hive task add 'by michael'")
    assert added.rc == 0 and "added" in added.out


def test_hive_mcp_serves_its_agent_and_nobody_else(office: Office) -> None:
    refused = office.in_agent("jim", "HIVE_AGENT_ID=pam hive mcp </dev/null")
    assert refused.rc == 2 and "you are jim" in refused.out and "not starting" in refused.out
    client = office.scratch / "mcp_client.py"
    client.write_text(
        textwrap.dedent(
            f"""
            import anyio, os
            from mcp import ClientSession, StdioServerParameters
            from mcp.client.stdio import stdio_client

            async def main():
                params = StdioServerParameters(
                    command={str(BIN / "hive")!r}, args=["mcp"], env=dict(os.environ)
                )
                async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
                    await s.initialize()
                    result = await s.call_tool("list_scopes", {{}})
                    print("caller:", result.structured_content["caller"])

            anyio.run(main)
            """
        )
    )
    served = office.in_agent("pam", f"{sys.executable} {client}")
    assert served.rc == 0 and "caller: pam" in served.out, served.out


def test_the_persons_actions_are_refused_to_an_agents_process(office: Office) -> None:
    for action in ("pause michael", "halt michael", "archive michael", "type michael 'hi'"):
        refused = office.in_agent("jim", f"hive-office {action}")
        assert refused.rc == 1 and "you are jim" in refused.out, (action, refused.out)
    status = office.in_agent("jim", "hive-office status")  # reads only: an agent may ask
    assert status.rc == 0 and "michael" in status.out
    assert not office.registry()["michael"]["paused"]
    assert office.person("hive-office", "pause", "michael").rc == 0
    wait_for(lambda: office.registry()["michael"]["paused"], "the person's pause")
    assert office.person("hive-office", "resume", "michael").rc == 0
    wait_for(lambda: not office.registry()["michael"]["paused"], "the person's resume")
    assert office.registry()["michael"]["status"] != "archived"


def test_the_person_acts_for_a_desk_only_while_its_agent_is_not_running(office: Office) -> None:
    as_jim = office.person("hive", "send", "--to", "pam", "--body", "x", HIVE_AGENT_ID="jim")
    assert as_jim.rc == 1 and "jim is running" in as_jim.out
    forged = office.person("hive", "inbox", HIVE_AGENT_ID="jim", HIVE_SECRET="guessed")
    assert forged.rc == 1 and "stale or forged" in forged.out
    archived = office.person("hive", "inbox", HIVE_AGENT_ID="toby")
    assert archived.rc == 1 and "toby is archived" in archived.out
    # A secret read from jim's environment does not make the person's process jim's.
    stolen = office.person(
        "hive", "inbox", HIVE_AGENT_ID="jim", HIVE_SECRET=office.secret_of("jim")
    )
    assert stolen.rc == 1 and "jim is running" in stolen.out, stolen.out
    desk = office.person(
        "hive",
        "send",
        "--to",
        "michael",
        "--subject",
        "from the desk",
        "--body",
        "x",
        HIVE_AGENT_ID="dwight",
    )
    assert desk.rc == 0, desk.out
    wait_for(lambda: delivered(office, "michael", "dwight", "from the desk"), "dwight's message")
    log = (office.home / "hive" / "log.jsonl").read_text()
    assert "the person acts as dwight" in log


def test_a_stale_secret_is_refused_after_a_restart(office: Office) -> None:
    old_pid, old_secret = office.registry()["pam"]["pid"], office.secret_of("pam")
    assert office.person("hive-office", "archive", "pam").rc == 0
    archived = office.person("hive", "inbox", HIVE_AGENT_ID="pam")
    assert archived.rc == 1 and "pam is archived" in archived.out
    assert office.person("hive-office", "spawn", "pam").rc == 0
    wait_for(lambda: office.registry()["pam"]["pid"] not in (None, old_pid), "pam's restart")
    stale = office.person("hive", "inbox", HIVE_AGENT_ID="pam", HIVE_SECRET=old_secret)
    assert stale.rc == 1 and "stale or forged" in stale.out
    fresh = office.in_agent("pam", "hive inbox")
    assert fresh.rc == 0, fresh.out


def test_a_vanished_control_socket_is_refused_then_put_back(office: Office) -> None:
    gone = office.in_agent(
        "jim",
        'rm "$HIVE_HOME/run/control.sock" && HIVE_AGENT_ID=michael hive board --text "# gone"',
    )
    # The office may already have put it back: then it says who jim is instead.
    assert gone.rc == 1 and ("not answering" in gone.out or "you are jim" in gone.out), gone.out
    assert "# gone" not in office.board()
    wait_for(lambda: (office.home / "run" / "control.sock").exists(), "the socket to come back")
    ok = office.in_agent("jim", "hive inbox")
    assert ok.rc == 0, ok.out


def test_without_an_office_mail_queues_and_proof_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "office.toml").write_text(ROSTER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env.update(HIVE_HOME=str(home), HIVE_AGENT_ID="michael")

    def hive(*args: str) -> Done:
        done = subprocess.run([str(BIN / "hive"), *args], env=env, capture_output=True, text=True)
        return Done(done.returncode, done.stdout + done.stderr)

    assert subprocess.run([str(BIN / "hive-office"), "init", "--home", str(home)]).returncode == 0
    board = hive("board", "--text", "# offline")
    assert board.rc == 1 and "office must be running" in board.out
    queued = hive("send", "--to", "jim", "--body", "later")
    assert queued.rc == 0 and "queued" in queued.out
    assert len(list((home / "hive" / "agents" / "michael" / "outbox").glob("*.json"))) == 1


# --- the decision, on what a real office cannot show (another uid, another namespace) ---


def test_attribution_refuses_what_it_cannot_check() -> None:
    me = os.getuid()
    leaders = {4242: "jim"}
    chain = {100: [(100, 4242), (4242, 4242)], 200: [(200, 200), (1, 1)]}
    assert attribute(Peer(100, me), me, leaders, chain.__getitem__) == Attributed("jim")
    assert attribute(Peer(200, me), me, leaders, chain.__getitem__) == Attributed(None)
    other = attribute(Peer(100, me + 1), me, leaders, chain.__getitem__)
    assert isinstance(other, ControlReply) and f"uid {me + 1}" in (other.error or "")
    hidden = attribute(Peer(0, me), me, leaders, chain.__getitem__)
    assert isinstance(hidden, ControlReply) and "pid namespace" in (hidden.error or "")

    def exited(pid: int) -> list[tuple[int, int]]:
        return ancestry(pid)

    gone = subprocess.Popen(["true"])
    gone.wait()
    late = attribute(Peer(gone.pid, me), me, leaders, exited)
    assert isinstance(late, ControlReply) and "exited before" in (late.error or "")
