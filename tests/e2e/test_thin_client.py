"""The thin `hive` (issue 25): with an office running, the office runs the verb.

A real `hive-office serve` process (tests/serve_support.py) and the real `hive` console
script. Each verb's output and exit code through the office are compared with the full
`hive` run in the caller's process (`main(argv)`, the path a verb takes with no office,
which asks the same office who is calling); identity is the process's, checked by the
office; stdin is read only when the verb reads it; a call that finds the office not
answering with its lock held (starting, restarting) waits and then succeeds once; with
no office the full path runs; and the client's own process imports nothing of the CLI.
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, NamedTuple

import msgspec
import pytest

from hive_client import aio
from hive_client.client import LOCAL, NOT_ANSWERING, runs_in_office
from hive_core.hive import init_office
from hive_core.paths import DEFAULT_HOME, HivePaths
from hive_core.schema import ControlReply
from tests.serve_support import ServedOffice, served
from tests.support import shell_roster, wait_for

BIN = Path(sys.executable).parent
HIVE = str(BIN / "hive")
AGENTS = ("michael", "jim", "pam")
ROSTER = shell_roster(*AGENTS)
# The full `hive`, in the calling process: main() given its words runs them here.
LOCAL_HIVE = [
    sys.executable,
    "-c",
    "import sys; from hive_core.cli.hive import main; main(sys.argv[1:])",
]


class Done(NamedTuple):
    rc: int
    out: str
    err: str


def env_of(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVE_")}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env["HIVE_HOME"] = str(home)
    return {**env, **extra}


def thin(home: Path, *args: str, stdin: bytes | None = None, **env: str) -> Done:
    """`hive ARGS` as the console script runs it (the office runs it while it runs)."""
    done = subprocess.run(
        [HIVE, *args], env=env_of(home, **env), input=stdin, capture_output=True, timeout=60
    )
    return Done(done.returncode, done.stdout.decode(), done.stderr.decode())


def local(home: Path, *args: str, stdin: bytes | None = None, **env: str) -> Done:
    """`hive ARGS` run in the calling process, whether an office runs or not."""
    done = subprocess.run(
        [*LOCAL_HIVE, *args], env=env_of(home, **env), input=stdin, capture_output=True, timeout=60
    )
    return Done(done.returncode, done.stdout.decode(), done.stderr.decode())


def inbox(paths: HivePaths, agent: str) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(paths.mailbox(agent).inbox.glob("*.json"))]


def subjects(paths: HivePaths, agent: str) -> list[object]:
    return [m["subject"] for m in inbox(paths, agent)]


@pytest.fixture
def office(short_tmp: Path) -> Iterator[ServedOffice]:
    with served(short_tmp / "home", roster=ROSTER, agents=False) as running:
        yield running


def test_the_verbs_through_the_office_say_what_the_full_hive_says(office: ServedOffice) -> None:
    home, paths = office.home, office.paths
    # Nothing yet; the person, and the person acting for pam (not running).
    assert thin(home, "inbox") == local(home, "inbox")
    assert thin(home, "inbox", HIVE_AGENT_ID="pam") == local(home, "inbox", HIVE_AGENT_ID="pam")

    sent = thin(home, "send", "--to", "pam", "--subject", "first", "--body", "one")
    assert sent.rc == 0 and sent.out.startswith("sent to pam (human/outbox/"), sent
    also = local(home, "send", "--to", "pam", "--subject", "second", "--body", "two")
    assert also.rc == 0 and also.out.startswith("sent to pam (human/outbox/"), also
    wait_for(lambda: len(inbox(paths, "pam")) == 2, "both messages in pam's inbox")
    first, second = (str(m["id"]) for m in inbox(paths, "pam"))

    for words in (
        ["inbox"],
        ["inbox", "--json"],
        ["read", first],
        ["read", first, "--json"],
        ["read", "20991231T000000000000Z-000000"],  # no such message: refused
        ["done", "20991231T000000000000Z-000000"],
        ["send", "--subject", "no recipient"],  # usage: exit 2
        ["send", "--to", "pam", "--act", "shout", "--body", "x"],
        ["board"],
        ["board", "--text", "# by pam"],  # only the manager writes it
        ["task", "list"],
        ["roster"],
        ["nosuch"],
    ):
        through, here = (
            thin(home, *words, HIVE_AGENT_ID="pam"),
            local(home, *words, HIVE_AGENT_ID="pam"),
        )
        assert through == here, words
        assert through.rc in (0, 1, 2) and (through.rc == 0) == (through.err == ""), through

    # Writes: each once, through the office; the full `hive` then sees them done.
    added = thin(home, "task", "add", "Write the parser", "--assignee", "jim")
    assert added.rc == 0 and "added" in added.out, added
    assert thin(home, "task", "list") == local(home, "task", "list")
    marked = thin(home, "done", first, HIVE_AGENT_ID="pam")
    assert marked == Done(0, "marked 1 message done\n", ""), marked
    assert local(home, "done", first, HIVE_AGENT_ID="pam") == Done(
        0, f"already done: {first}\n", ""
    )
    assert thin(home, "done", "--all", HIVE_AGENT_ID="pam").out == "marked 1 message done\n"
    assert thin(home, "inbox", HIVE_AGENT_ID="pam") == local(home, "inbox", HIVE_AGENT_ID="pam")
    assert not inbox(paths, "pam") and second


def test_the_office_runs_it_as_the_process_it_attributes(short_tmp: Path) -> None:
    """Shell agents really running: a command typed into jim's terminal is jim's, and
    an environment naming another agent, with that agent's real secret, is refused."""
    with served(short_tmp / "home", roster=ROSTER) as office:
        desks = Desks(office)
        wait_for(lambda: all(office.registry().get(a, {}).get("pid") for a in AGENTS), "agents")
        mine = desks.typed("jim", f"{sys.executable} -X importtime {HIVE} send --to pam "
                           "--subject 'from jim' --body hi")  # fmt: skip
        assert mine.rc == 0 and "sent to pam" in mine.out, mine
        # The verb ran in the office: jim's `hive` loaded nothing of the CLI.
        assert not imported(mine.out, ("msgspec", "click", "hive_core.caller")), mine.out
        wait_for(lambda: "from jim" in subjects(office.paths, "pam"), "jim's message to pam")
        assert inbox(office.paths, "pam")[0]["from"] == "jim"

        pam_secret = desks.secret_of("pam")
        for attempt in (
            f"HIVE_AGENT_ID=pam HIVE_SECRET={pam_secret} hive send --to michael "
            "--subject forged --body x",
            "env -u HIVE_AGENT_ID hive send --to michael --subject forged --body x",
            "HIVE_AGENT_ID=michael hive board --text '# by jim'",
        ):
            refused = desks.typed("jim", attempt)
            assert refused.rc == 1 and "you are jim" in refused.out, (attempt, refused)
        # The person's process with pam's secret is not pam while pam runs.
        borrowed = thin(office.home, "inbox", HIVE_AGENT_ID="pam", HIVE_SECRET=pam_secret)
        assert borrowed.rc == 1 and "pam is running" in borrowed.err, borrowed
        assert "forged" not in subjects(office.paths, "michael")
        assert "by jim" not in office.paths.board.read_text()

        # A file the command line names is read by the caller's process, from its cwd
        # and with what it may read: the manager's own file, yes; pam's memory, which
        # her desk keeps from every other desk (desks/contain.py), no.
        plan = office.paths.desk_tmp("michael") / "plan.md"
        plan.write_text("# Plan\n\nfrom michael's file\n")
        wrote = desks.typed("michael", f"cd {plan.parent} && hive board --write {plan.name}")
        assert wrote.rc == 0 and "board updated" in wrote.out, wrote
        assert office.paths.board.read_text() == plan.read_text()
        secret = office.paths.mailbox("pam").memory
        secret.write_text("# pam\nthe safe code is 4711\n")
        kept = desks.typed("michael", f"hive board --write {secret}")
        assert kept.rc == 2 and "cannot read" in kept.out, kept
        assert "4711" not in office.paths.board.read_text()


class Desks:
    """Commands typed into the agents' terminals (`hive-office type`), as the person would."""

    def __init__(self, office: ServedOffice) -> None:
        self.office = office
        self._count = itertools.count()

    def typed(self, agent: str, command: str) -> Done:
        n = next(self._count)
        # The desk's own TMPDIR: a contained desk writes nowhere else outside its folders.
        tmp = self.office.paths.desk_tmp(agent)
        tmp.mkdir(parents=True, exist_ok=True)
        out, rc = tmp / f"{n}.out", tmp / f"{n}.rc"
        typed = self.office.run(
            "hive-office", "type", agent, f"{{ {command} ; }} >{out} 2>&1; echo $? >{rc}"
        )
        assert typed.returncode == 0, typed.stderr
        wait_for(lambda: rc.exists() and rc.read_text().endswith("\n"), f"`{command}` in {agent}")
        return Done(int(rc.read_text()), out.read_text(), "")

    def secret_of(self, agent: str) -> str:
        """What any process of the same user can read: the agent's environment."""
        pid = self.office.registry()[agent]["pid"]
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return next(v for v in environ if v.startswith(b"HIVE_SECRET=")).split(b"=", 1)[1].decode()


def imported(importtime: str, names: tuple[str, ...]) -> list[str]:
    """The modules of `names` (or below them) in `python -X importtime` output."""
    found = []
    for line in importtime.splitlines():
        if line.startswith("import time:") and "|" in line:
            module = line.rsplit("|", 1)[1].strip()
            if any(module == n or module.startswith(n + ".") for n in names):
                found.append(module)
    return found


def test_stdin_is_read_only_by_a_verb_that_reads_it(office: ServedOffice) -> None:
    home, paths = office.home, office.paths
    # More than one frame's worth, under the body's limit.
    body = ("a line of the body, read from stdin\n" * 1800).encode()
    assert len(body) > 60_000
    piped = thin(home, "send", "--to", "pam", "--subject", "piped", "-", stdin=body)
    assert piped.rc == 0, piped
    wait_for(lambda: "piped" in subjects(paths, "pam"), "the piped message")
    assert next(m for m in inbox(paths, "pam") if m["subject"] == "piped")["body"] == body.decode()

    too_long = b"x" * (64 * 1024 + 1)
    assert thin(home, "send", "--to", "pam", "-", stdin=too_long) == local(
        home, "send", "--to", "pam", "-", stdin=too_long
    )
    # Far over: the office refuses and closes while the client still writes the rest;
    # the refusal, not a lost connection, is what the caller reads.
    huge = b"x" * (16 * 1024 * 1024)
    assert thin(home, "send", "--to", "pam", "-", stdin=huge) == local(
        home, "send", "--to", "pam", "-", stdin=huge
    )
    bad = b"\xff\xfe not text"
    refused = thin(home, "send", "--to", "pam", "-", stdin=bad)
    assert refused == local(home, "send", "--to", "pam", "-", stdin=bad)
    assert refused.rc == 2 and "not UTF-8" in refused.err

    board = b"# Plan\n\nfrom stdin\n"
    written = thin(home, "board", "--write", "-", stdin=board, HIVE_AGENT_ID="michael")
    assert written == Done(0, f"board updated ({len(board)} bytes)\n", ""), written
    assert paths.board.read_bytes() == board

    # A verb that does not read stdin does not wait for its end.
    with subprocess.Popen(
        [HIVE, "inbox"], env=env_of(home), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as held:
        assert held.stdin is not None and held.stdout is not None
        held.stdin.write(b"typed ahead\n")
        held.stdin.flush()
        out = held.stdout.read()  # to its end: the process exits with stdin still open
        assert held.wait(timeout=60) == 0
        assert out.decode() == local(home, "inbox").out


def test_ctrl_c_while_typing_a_body_sends_nothing(office: ServedOffice) -> None:
    typing = subprocess.Popen(
        [HIVE, "send", "--to", "pam", "--subject", "aborted", "-"],
        env=env_of(office.home),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # As a terminal's shell starts it: a suite run in the background (`cmd &`) has
        # SIGINT ignored, and Python then never turns Ctrl+C into KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    stdin = typing.stdin
    assert stdin is not None and typing.stderr is not None
    stdin.write(b"half a body\n")
    stdin.flush()
    # Taken from the pipe: the office asked for stdin and the client sent it on.
    wait_for(lambda: unread(stdin) == 0, "the client to take what was typed")
    typing.send_signal(signal.SIGINT)
    assert typing.wait(timeout=60) == 130
    assert b"Traceback" not in typing.stderr.read()
    stdin.close()
    after = thin(office.home, "send", "--to", "pam", "--subject", "after", "--body", "x")
    assert after.rc == 0, after
    wait_for(lambda: "after" in subjects(office.paths, "pam"), "the message sent after")
    assert "aborted" not in subjects(office.paths, "pam")
    assert [p.name for p in office.paths.mailbox("human").outbox.glob("*.json")] == []


def unread(pipe: IO[bytes]) -> int:
    """Bytes written to `pipe` that its reader has not taken yet."""
    return struct.unpack("i", fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0" * 4))[0]


def test_a_call_while_the_office_does_not_answer_waits_then_runs_once(
    office: ServedOffice,
) -> None:
    """The office's lock held and its socket gone, as while it starts or restarts: the
    call says it waits, and runs once the office answers."""
    paths = office.paths
    office.process.send_signal(signal.SIGSTOP)
    try:
        paths.control_socket.unlink()
        waiting = subprocess.Popen(
            [HIVE, "send", "--to", "pam", "--subject", "waited", "--body", "x"],
            env=env_of(office.home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert waiting.stderr is not None
        line = waiting.stderr.readline().decode()
        assert line.startswith("hive: waiting for the office to answer"), line
    finally:
        office.process.send_signal(signal.SIGCONT)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    assert out.decode().startswith("sent to pam (human/outbox/") and not err, err
    wait_for(lambda: "waited" in subjects(paths, "pam"), "the message that waited")
    assert subjects(paths, "pam").count("waited") == 1


def test_sends_across_a_restart_each_arrive_once(short_tmp: Path) -> None:
    office = ServedOffice(short_tmp / "home", roster=ROSTER, agents=False).start()
    paths = office.paths
    results: list[Done] = []
    stop = threading.Event()

    def keep_sending() -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            results.append(thin(office.home, "send", "--to", "pam", "--subject", f"s{n}",
                                "--body", "x"))  # fmt: skip

    sender = threading.Thread(target=keep_sending)
    sender.start()
    try:
        wait_for(lambda: len(results) >= 3, "a few sends before the restart")
        assert office.stop() == 0
        before = len(results)
        office.start()
        wait_for(lambda: len(results) >= before + 3, "a few sends after the restart")
    finally:
        stop.set()
        sender.join(timeout=120)
    try:
        assert all(r.rc == 0 for r in results), [r for r in results if r.rc]
        assert all(r.out.startswith(("sent to pam", "queued ")) for r in results), results
        wait_for(lambda: len(inbox(paths, "pam")) >= len(results), "every send delivered")
        got = sorted(str(subject) for subject in subjects(paths, "pam"))
        assert got == sorted(f"s{n}" for n in range(len(results))), got
    finally:
        assert office.stop() == 0


def test_a_verb_whose_caller_gave_up_on_a_held_office_is_not_run(
    office: ServedOffice, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller told "not answering; try again" (the office held up past its wait, here
    SIGSTOPped) must not find its verb done later too: the office, going on, answers the
    held request first and runs the verb only once that answer is written, which fails on
    a connection its caller has closed (a Unix socket says EPIPE at once); the send tried
    again arrives once."""
    monkeypatch.setattr(aio, "ANSWER_TIMEOUT_S", 1.0)
    sock = str(office.paths.control_socket)
    argv = ["send", "--to", "pam", "--subject", "once", "--body", "x"]
    os.kill(office.process.pid, signal.SIGSTOP)
    try:
        gave_up = asyncio.run(aio.call(sock, argv))
    finally:
        os.kill(office.process.pid, signal.SIGCONT)
    assert (gave_up.code, gave_up.err) == (1, NOT_ANSWERING)
    # The office takes the held connection now, and a roster round trip after it shows
    # the office has gone past it.
    assert thin(office.home, "roster").rc == 0
    assert not list(office.paths.mailbox("human").outbox.glob("*.json"))
    again = asyncio.run(aio.call(sock, argv))
    assert again.code == 0 and again.out.startswith("sent to pam"), again
    wait_for(lambda: "once" in subjects(office.paths, "pam"), "the send tried again")
    assert subjects(office.paths, "pam").count("once") == 1


def test_with_no_office_the_full_hive_runs(short_tmp: Path) -> None:
    home = short_tmp / "home"
    home.mkdir()
    paths = HivePaths(home)
    paths.office_toml.write_text(ROSTER)
    init_office(paths)
    # A socket file left by an office that is gone: nobody holds the home.
    paths.run.mkdir(exist_ok=True)
    with socket.socket(socket.AF_UNIX) as left:
        left.bind(str(paths.control_socket))
    queued = thin(home, "send", "--to", "pam", "--subject", "later", "--body", "x")
    assert queued.rc == 0 and queued.out.startswith("queued "), queued
    assert "waiting" not in queued.err
    assert len(list(paths.mailbox("human").outbox.glob("*.json"))) == 1
    assert thin(home, "inbox", HIVE_AGENT_ID="pam") == local(home, "inbox", HIVE_AGENT_ID="pam")
    proof = thin(home, "board", "--text", "# x", HIVE_AGENT_ID="michael")
    assert proof.rc == 1 and "must be running to prove" in proof.err, proof


def test_the_client_imports_no_cli(office: ServedOffice) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", HIVE, "inbox"],
        env=env_of(office.home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == local(office.home, "inbox").out
    assert imported(done.stderr, ("hive_client",)) == ["hive_client", "hive_client.client"]
    heavy = ("msgspec", "click", "json", "hive_core.caller", "hive_core.schema")
    assert imported(done.stderr, heavy) == [], done.stderr


def test_what_stays_in_the_callers_process() -> None:
    for words in (["mcp"], ["memory", "search", "x"], ["memory", "tidy"], ["memory", "edit", "m1"],
                  ["memory", "reindex"], ["memory", "forget", "m1", "--help"], ["log", "-f"],
                  ["log", "-n", "5", "--follow"], ["send", "--help"], ["inbox", "--home", "/x"],
                  [], ["--version"]):  # fmt: skip
        assert not runs_in_office(words), words
    # What changes one entry and ends at once runs in the office, as the person's app
    # runs it too (a merge asks nothing: `hive-office merge` is the one that asks).
    for words in (["send", "--to", "pam", "-"], ["log", "-n", "5"], ["task", "list"],
                  ["merge", "jim"], ["memory", "note", "x"], ["memory", "forget", "m1"],
                  ["memory", "promote", "m1"], ["memory", "edit", "m1", "--text", "-"],
                  ["memory", "edit", "m1", "--text=new"]):  # fmt: skip
        assert runs_in_office(words), words
    assert set(LOCAL) == {"mcp", "memory", "ci-logs"}
    # A contained desk's process cannot write what those verbs write: they go to the
    # office, which runs them as the desk in a process of its own. Help stays here.
    for verb in LOCAL:
        assert runs_in_office([verb, "x"], contained=True), verb
    assert not runs_in_office(["memory", "--help"], contained=True)


def test_the_client_knows_the_office_layout() -> None:
    from hive_client import client

    assert client._DEFAULT_HOME == DEFAULT_HOME
    home = HivePaths(Path("/some/home"))
    assert client.control_socket("/some/home") == str(home.control_socket)


def test_the_client_tells_an_accepted_verb_by_the_replys_first_bytes() -> None:
    # hive_client reads the ok reply without the json module: msgspec writes `ok` first.
    for reply in (ControlReply(ok=True), ControlReply(ok=True, detail="jim")):
        assert msgspec.json.encode(reply).startswith(b'{"ok":true')
    assert not msgspec.json.encode(ControlReply(ok=False, error="no")).startswith(b'{"ok":true')
