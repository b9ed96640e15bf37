"""A stopping office always ends (office/daemon.exit_by): a thread stuck on what an
agent left (here a FIFO nobody writes) does not keep the process, and so the home's
lock, alive; a process whose threads all finish ends as it always did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROGRAM = """
import sys, threading
from hive_core.office import daemon

def wait_on_the_fifo():
    open(sys.argv[1], "rb").read()

if sys.argv[2] == "stuck":
    threading.Thread(target=wait_on_the_fifo, name="stuck").start()
daemon.exit_by(float(sys.argv[3]))
print("main done", flush=True)
"""


def run(fifo: Path, mode: str, deadline: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(fifo), mode, str(deadline)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_thread_stuck_on_a_fifo_does_not_keep_the_process(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    done = run(tmp_path / "fifo", "stuck", 0.5)
    assert done.returncode == 1
    assert "main done" in done.stdout
    assert "still stopping after 0.5 s" in done.stderr
    # Where it was stuck is in the office's log.
    assert "wait_on_the_fifo" in done.stderr


def test_a_process_whose_threads_finish_ends_as_before(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    # Were the armed deadline to hold the process, it would end with status 1 and say so.
    done = run(tmp_path / "fifo", "free", 60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "main done\n" and done.stderr == ""
