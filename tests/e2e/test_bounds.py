"""Bounds, tried from an agent's own shell against a real `hive-office serve` (issue 24):
shell desks in real ptys, typed into with `hive-office type`, real git, real sockets.

- jim floods the office's three sockets with connections that say nothing, and keeps
  them open (reconnecting what the office closes): the office holds at most the cap on
  each, pam's `hive send` and the person's status and attach still work, and
  serve's log has no traceback and one line a socket, not one a connection.
- jim writes a 4 GiB sparse draft and a 2 MiB one into his outbox, a 4 GiB file into
  his folder and a 256 MiB sparse memory/archive.md: none of their bytes reach the
  hive's git, jim is told, the office stays small, doctor names the file left out.
- A process holds the hive's .git/index.lock open, then main is pointed at a garbage
  commit: doctor says each (with what to do) while it lasts, and nothing is committed
  on top. Not from a desk: a contained desk can neither read nor write the hive's .git
  (desks/contain.py); a stray git of the person's, or a crash, is what does this.

A contained desk writes only its own folders: what jim runs and writes lives in the
desks' working folder and jim's own hive folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from hive_core.committer import GIT_FILE_MAX
from hive_core.conncap import CONNECTIONS_MAX
from hive_core.mail import message_names
from hive_core.schema import MESSAGE_FILE_MAX
from tests.e2e.test_clients_serve import Client
from tests.serve_support import ServedOffice
from tests.support import wait_for

pytestmark = pytest.mark.integration

SHELL = 'provider = "shell"\ncommand = ["bash", "--norc", "--noprofile", "-i"]\n'

FLOOD = """\
import os, resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
*targets, per, stop, ready = sys.argv[1:]
def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)  # blocking: waits while the office's backlog is full
    return s
def closed(s):
    try:
        return s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
held = {p: [connect(p) for _ in range(int(per))] for p in targets}
opened = len(targets) * int(per)
while True:
    with open(ready + ".tmp", "w") as f:
        f.write(str(opened))
    os.replace(ready + ".tmp", ready)
    if os.path.exists(stop):
        break
    time.sleep(0.5)
    for path, socks in held.items():
        for i, s in enumerate(socks):
            if closed(s):
                s.close()
                socks[i] = connect(path)
                opened += 1
"""


def roster(work: Path) -> str:
    return (
        '[office]\nname = "Scranton"\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\n{SHELL}cwd = "{work}"\n\n'
        f'[[agents]]\nid = "jim"\nname = "Jim"\n{SHELL}cwd = "{work}"\n\n'
        f'[[agents]]\nid = "pam"\nname = "Pam"\n{SHELL}cwd = "{work}"\n'
    )


@pytest.fixture
def work(short_tmp: Path) -> Path:
    """The desks' working folder (each desk writes there)."""
    work = short_tmp / "work"
    work.mkdir()
    return work


@pytest.fixture
def office(short_tmp: Path, work: Path) -> Iterator[ServedOffice]:
    office = ServedOffice(short_tmp / "home", roster=roster(work), log=short_tmp / "serve.log")
    office.start()
    try:
        for agent in ("michael", "jim", "pam"):
            wait_for(partial(office.starts, agent), f"{agent} started")
        yield office
    finally:
        if office.running():
            office.stop()


def typed(office: ServedOffice, agent: str, line: str) -> None:
    done = office.run("hive-office", "type", agent, line)
    assert done.returncode == 0, done.stderr


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def subjects(office: ServedOffice, agent: str) -> list[str]:
    box = office.paths.mailbox(agent)
    found = []
    for folder in (box.inbox, box.done):
        for name in message_names(folder):
            found.append(json.loads((folder / name).read_text())["subject"])
    return found


def doctor(office: ServedOffice) -> str:
    return office.run("hive-office", "doctor").stdout


def git(hive: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(hive), *args], capture_output=True, text=True, check=True
    ).stdout


def test_a_connection_flood_from_a_desk_holds_the_cap_and_routing_goes_on(
    office: ServedOffice, short_tmp: Path, work: Path
) -> None:
    paths = office.paths
    pid = office.process.pid
    before = fds(pid)
    script, stop, ready = work / "flood.py", work / "stop", work / "opened"
    script.write_text(FLOOD)
    per = CONNECTIONS_MAX + 200
    sockets = " ".join(str(p) for p in (paths.hook_socket, paths.control_socket))
    typed(
        office,
        "jim",
        f"{sys.executable} {script} {sockets} {paths.client_socket} {per} {stop} {ready}"
        f" 2> {work}/flood.err &",
    )
    opened = lambda: int(ready.read_text() or 0) if ready.exists() else 0  # noqa: E731
    errors = work / "flood.err"
    wait_for(
        lambda: opened() >= 3 * per or (errors.exists() and errors.read_text()),
        "jim's connections open",
    )
    assert opened() >= 3 * per, errors.read_text()
    # Past the cap the office closed the oldest, and jim's loop opened them again.
    wait_for(lambda: opened() >= 3 * per + 200, "jim reconnecting what was closed")
    # Each socket holds its cap; a loop turn may accept a burst before the evictions it
    # makes are closed (on the next turn), so the count is read until it has settled.
    held = wait_for(
        lambda: (n := fds(pid)) <= before + 3 * CONNECTIONS_MAX + 32 and n,
        "the office's descriptors within the three sockets' caps, the flood going on",
    )
    # Routing goes on: pam's `hive send` (control socket) is delivered, the person's
    # status answers and an attach gets its Welcome. (A hook answered under a flood:
    # tests/effects/test_bounds.py, with the real shim.)
    typed(office, "pam", "hive send --to michael --subject during-the-flood --body still-here")
    wait_for(lambda: "during-the-flood" in subjects(office, "michael"), "pam's message routed")
    status = office.run("hive-office", "status")
    assert status.returncode == 0, status.stderr
    client = Client(paths.client_socket)
    client.until(lambda: client.got, "the Welcome")
    assert type(client.got[0]).__name__ == "Welcome"
    client.close()
    total = opened()
    stop.touch()
    wait_for(lambda: fds(pid) <= before + 16, "the flood's connections gone")
    office.stop()
    log = (short_tmp / "serve.log").read_text()
    assert "Traceback" not in log
    assert log.count(f"more than {CONNECTIONS_MAX} connections at once") <= 2, log[-3000:]
    assert log.count("client (pid") <= 5, "a refused process is logged once, not once a try"
    print(f"flood: {total} connections opened by jim; office fds {before} -> {held} at most")


def test_huge_files_from_a_desk_stay_out_of_git_and_the_office_stays_small(
    office: ServedOffice, work: Path
) -> None:
    paths = office.paths
    pid = office.process.pid
    hive = paths.hive
    jim = paths.mailbox("jim")
    rss_before = rss_kib(pid)
    script = work / "huge.sh"
    script.write_text(
        "set -e\n"
        f"truncate -s 4G {jim.outbox}/huge.json\n"
        f"head -c {2 << 20} /dev/urandom > {jim.outbox}/big.json\n"
        f"mkdir -p {jim.root}/work && truncate -s 4G {jim.root}/work/huge.bin\n"
        f"mkdir -p {jim.archive.parent}\n"
        f"printf '## 2026-01-01T00:00:00Z: old\\n\\nthe zebraquota is seven\\n' > {jim.archive}\n"
        f"truncate -s 256M {jim.archive}\n"
        f"touch {work}/written\n"
    )
    typed(office, "jim", f"bash {script} 2> {work}/huge.err")
    wait_for(
        lambda: (work / "written").exists() or (work / "huge.err").read_text(),
        "jim's files written",
    )
    assert (work / "written").exists(), (work / "huge.err").read_text()
    wait_for(lambda: len(list(jim.bad.glob("*.reason"))) == 2, "both drafts quarantined")
    told = [s for s in subjects(office, "jim") if s.startswith("Not delivered")]
    assert len(told) == 2, told
    left_out = "2 files over 8.0 MiB not committed: agents/jim/memory/archive.md (256.0 MiB)"
    wait_for(
        lambda: left_out in doctor(office) and "agents/jim/work/huge.bin" in doctor(office),
        "doctor to name the files left out",
    )
    typed(office, "pam", "hive send --to michael --subject after-the-files --body ok")
    wait_for(lambda: "after-the-files" in git(hive, "log", "-p", "-3"), "the next commit")
    objects = git(hive, "cat-file", "--batch-all-objects", "--batch-check").splitlines()
    largest = max(int(line.split()[2]) for line in objects if line.split()[1] == "blob")
    assert largest <= MESSAGE_FILE_MAX < GIT_FILE_MAX, largest
    assert not (paths.run / "quarantine").exists() or all(
        p.name.startswith("jim-") for p in (paths.run / "quarantine").iterdir()
    )
    wait_for(
        lambda: "only its beginning is indexed" in paths.log.read_text(),
        "the archive's cut told",
    )
    rss_after = rss_kib(pid)
    db = sum(p.stat().st_size for p in paths.memory_db.parent.glob(paths.memory_db.name + "*"))
    assert rss_after < rss_before + (128 << 10), (rss_before, rss_after)
    assert db < 32 << 20, db
    print(f"office RSS {rss_before >> 10} MiB -> {rss_after >> 10} MiB; memory.db {db >> 10} KiB")


def test_a_held_index_lock_and_a_garbage_head_are_told_by_doctor(office: ServedOffice) -> None:
    paths = office.paths
    hive = paths.hive
    lock = hive / ".git" / "index.lock"
    # The office commits what it started with once its start-up writes pause (the
    # committer waits out bursts): the lock is taken on a hive that has a history.
    wait_for(
        lambda: (
            subprocess.run(
                ["git", "-C", str(hive), "rev-parse", "-q", "--verify", "HEAD"], capture_output=True
            ).returncode
            == 0
        ),
        "the first commit",
        60,
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", f"f = open({str(lock)!r}, 'w'); print(1, flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline()
        typed(office, "pam", "hive send --to michael --subject while-locked --body waits")
        sentence = wait_for(
            lambda: next((ln for ln in doctor(office).splitlines() if "held open by" in ln), ""),
            "doctor to name the held lock",
            timeout=90,
        )
        assert f"process {holder.pid}" in sentence and f"kill {holder.pid}" in sentence
        assert "while-locked" not in git(hive, "log", "-p", "-3")
    finally:
        holder.kill()
        holder.wait()
    wait_for(lambda: "while-locked" in git(hive, "log", "-p", "-3"), "the commit after", 90)
    wait_for(lambda: "held open by" not in doctor(office), "the problem cleared")
    # A garbage commit at the branch's tip: told, never committed on.
    tip = git(hive, "rev-parse", "HEAD").strip()
    branch = hive / ".git" / "refs" / "heads" / "main"
    garbage = subprocess.run(
        ["git", "-C", str(hive), "hash-object", "-t", "commit", "--literally", "-w", "--stdin"],
        input=b"garbage",
        capture_output=True,
        check=True,
    ).stdout.decode()
    branch.write_text(garbage)
    typed(office, "pam", "hive send --to michael --subject on-damage --body waits")
    wait_for(lambda: "cannot be read" in doctor(office), "doctor to name the damage", 90)
    assert branch.read_text() == garbage, "nothing committed on top of it"
    branch.write_text(tip + "\n")  # the person's repair
    wait_for(lambda: "on-damage" in git(hive, "log", "-p", "-3"), "the commit after", 120)
    history = git(hive, "log", "--format=%H")
    assert tip in history and garbage.strip() not in history
    assert "Traceback" not in office.log.read_text()
