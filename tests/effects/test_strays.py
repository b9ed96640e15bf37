"""The office's adopted orphans (issue 24), in this process as a subreaper: an orphan is
reaped, the exit status of a child someone here waits for never is; the agent's CLI run
for its memory is that agent's while it runs."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.agents.provider import SummaryCommand
from hive_core.desks.strays import Strays, set_subreaper
from hive_core.memory.tidy import ask, summarising
from tests.support import wait_for


@pytest.fixture
def adopting() -> Iterator[None]:
    was = set_subreaper(True)
    try:
        yield
    finally:
        set_subreaper(was)


def state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_an_orphan_is_reaped_and_a_waited_for_child_keeps_its_status(
    adopting: None, tmp_path: Path
) -> None:
    pid_file = tmp_path / "orphan.pid"
    # setsid -f: the child is orphaned at once and adopted here.
    subprocess.run(["setsid", "-f", "sh", "-c", f"echo $$ >{pid_file}; exec sleep 600"], check=True)
    wait_for(lambda: pid_file.exists() and pid_file.read_text().endswith("\n"), "the orphan")
    orphan = int(pid_file.read_text())
    # A child of this process's own, in a session of its own, that its Popen waits for.
    own = subprocess.Popen(["sh", "-c", "exit 3"], start_new_session=True)
    strays = Strays(own=lambda: [own.pid])
    wait_for(lambda: orphan in strays.sweep(), "the orphan seen as a stray")
    os.kill(orphan, signal.SIGKILL)
    wait_for(lambda: state(own.pid) == "Z" and state(orphan) == "Z", "both exited")
    strays.sweep()
    strays.sweep()
    assert state(orphan) is None, "the orphan was reaped"
    assert own.wait() == 3, "the waited-for child's status is its own"


def test_the_agents_summarising_cli_is_the_agents_while_it_runs(tmp_path: Path) -> None:
    go = tmp_path / "go"
    command = SummaryCommand(
        argv=["sh", "-c", f'cat >/dev/null; while [ ! -e {go} ]; do sleep 0.01; done; echo "ok"'],
        answer=lambda out: out.decode().strip(),
    )
    answers: list[object] = []
    asking = threading.Thread(
        target=lambda: answers.append(
            ask(command, "notes", env=None, cwd=tmp_path, timeout=60, agent="jim")
        )
    )
    asking.start()
    try:
        running = wait_for(summarising, "the summariser to run")
        [(pid, agent)] = running.items()
        assert agent == "jim" and os.getsid(pid) == pid  # the leader of its own session
    finally:
        go.touch()
        asking.join(timeout=60)
    assert answers == ["ok"] and summarising() == {}
