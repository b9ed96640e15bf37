"""PtySession against real processes: size, environment, input, output, exit status,
termination of the whole session, and no survivors when the office is SIGKILLed."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from hive_core.desks import pty_session
from hive_core.desks.pty_session import PtySession
from tests.support import until, wait_for

ENV = {"PATH": os.environ["PATH"]}
PY = sys.executable


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 60))


class Pane:
    """What an office pane would do with a session: collect output, note the exit."""

    def __init__(self, session: PtySession) -> None:
        self.out = bytearray()
        self.exits: list[tuple[int | None, int | None]] = []
        session.attach(asyncio.get_running_loop(), self.out.extend, self._exited)

    def _exited(self, exit_status: int | None, signal_status: int | None) -> None:
        self.exits.append((exit_status, signal_status))

    async def until(self, what: Callable[[], bool] | bytes, timeout: float = 10) -> None:
        predicate = (lambda: what in self.out) if isinstance(what, bytes) else what
        try:
            await until(None, predicate, "the pane's output", timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; output so far: {bytes(self.out[-1000:])!r}") from None

    async def exit(self) -> tuple[int | None, int | None]:
        await self.until(lambda: bool(self.exits))
        return self.exits[0]


@asynccontextmanager
async def spawned(argv: list[str], cwd: Path, **kw: Any) -> AsyncIterator[PtySession]:
    session = PtySession.spawn(argv, env=kw.pop("env", ENV), cwd=cwd, **kw)
    try:
        yield session
    finally:
        await session.terminate(grace=1)


# A process is identified by (pid, start time), so a recycled pid is not mistaken for it.
Proc = tuple[int, int]


def _stat(pid: int) -> list[bytes] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return [b"comm", *raw[raw.rindex(b")") + 2 :].split()]  # fields 2.. of proc(5), 1-based


def session_members(sid: int) -> dict[Proc, str]:
    """Live processes in session `sid`, with their command names."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) and st[1] != b"Z" and int(st[4]) == sid:
            comm = Path(f"/proc/{name}/comm").read_text().strip()
            found[(int(name), int(st[20]))] = comm
    return found


def survivors(procs: set[Proc]) -> set[Proc]:
    def alive(proc: Proc) -> bool:
        st = _stat(proc[0])
        # Zombies count as dead: this sandbox's pid 1 need not reap orphans.
        return st is not None and st[1] != b"Z" and int(st[20]) == proc[1]

    return {p for p in procs if alive(p)}


def test_initial_size_cwd_and_environment_are_the_given_ones(tmp_path: Path) -> None:
    async def main() -> None:
        script = "stty size; pwd; env"
        async with spawned(
            ["bash", "-c", script], tmp_path, env={**ENV, "FOO": "bar"}, rows=33, cols=91
        ) as s:
            pane = Pane(s)
            assert await pane.exit() == (0, None)
        lines = bytes(pane.out).decode().splitlines()
        assert lines[0] == "33 91"  # the very first thing the child sees
        assert lines[1] == str(tmp_path)
        assert "FOO=bar" in lines
        assert not [line for line in lines if line.startswith("TERM=")]

        env = {**ENV, "TERM": "xterm-256color"}
        async with spawned(["bash", "-c", "echo $TERM"], tmp_path, env=env) as s:
            pane = Pane(s)
            await pane.exit()
        assert bytes(pane.out) == b"xterm-256color\r\n"

    run(main())


def test_exit_code_and_killing_signal_are_recorded(tmp_path: Path) -> None:
    async def main() -> None:
        async with spawned(["bash", "-c", "exit 7"], tmp_path) as s:
            assert await Pane(s).exit() == (7, None)
            assert (s.alive, s.exit_status, s.signal_status) == (False, 7, None)
        async with spawned(["bash", "-c", "kill -USR1 $$"], tmp_path) as s:
            assert await Pane(s).exit() == (None, signal.SIGUSR1)
            assert (s.alive, s.exit_status, s.signal_status) == (False, None, signal.SIGUSR1)

    run(main())


def test_argv0_is_looked_up_on_the_childs_path(tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "only-here"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho found me\n")
    tool.chmod(0o755)
    env = {"PATH": f"{tool.parent}:{ENV['PATH']}"}

    async def main() -> None:
        async with spawned(["only-here"], tmp_path, env=env) as s:
            pane = Pane(s)
            assert await pane.exit() == (0, None)
        assert bytes(pane.out) == b"found me\r\n"

    run(main())
    with pytest.raises(FileNotFoundError):
        PtySession.spawn(["only-here"], env=ENV, cwd=tmp_path)


def test_write_reaches_the_child_and_resize_changes_stty_size(tmp_path: Path) -> None:
    script = 'stty size; read -r line; echo "got:$line"; stty size'

    async def main() -> None:
        async with spawned(["bash", "-c", script], tmp_path) as s:
            pane = Pane(s)
            await pane.until(b"40 120\r\n")
            s.resize(50, 160)
            s.write(b"hello\n")
            assert await pane.exit() == (0, None)
        assert bytes(pane.out).endswith(b"got:hello\r\n50 160\r\n")

    run(main())


def test_resize_sends_sigwinch_to_the_child(tmp_path: Path) -> None:
    child = (
        # The signal is blocked and taken with sigwait, so the report is never printed
        # from a handler that interrupted another print (a "reentrant call" error).
        "import os, signal\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGWINCH})\n"
        "print('ready', flush=True)\n"
        "while True:\n"
        "    signal.sigwait({signal.SIGWINCH})\n"
        "    print('winch', *os.get_terminal_size(0), flush=True)\n"
    )

    async def main() -> None:
        async with spawned([PY, "-c", child], tmp_path) as s:
            pane = Pane(s)
            await pane.until(b"ready")
            s.resize(30, 100)
            await pane.until(b"winch 100 30")

    run(main())


def test_a_megabyte_of_input_to_a_child_not_reading_does_not_block(tmp_path: Path) -> None:
    # Raw mode, so the line discipline passes every byte through unchanged; the child
    # reads nothing until SIGUSR1, so the terminal's input buffer fills and write() queues.
    child = (
        "import hashlib, os, signal, sys, tty\n"
        "n = int(sys.argv[1])\n"
        "tty.setraw(0)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
        "print('ready', flush=True)\n"
        "signal.sigwait({signal.SIGUSR1})\n"
        "data = b''\n"
        "while len(data) < n:\n"
        "    data += os.read(0, n - len(data))\n"
        "print('sha', hashlib.sha256(data).hexdigest(), flush=True)\n"
    )
    rng = random.Random(1)
    payload = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(1 << 20))

    async def main() -> None:
        async with spawned([PY, "-c", child, str(len(payload))], tmp_path) as s:
            pane = Pane(s)
            await pane.until(b"ready")
            s.write(payload[:1000])
            s.write(payload[1000:])  # returns although the child takes nothing yet
            os.kill(s.pid, signal.SIGUSR1)
            await pane.until(b"sha " + hashlib.sha256(payload).hexdigest().encode())
            assert await pane.exit() == (0, None)

    run(main())


def test_twenty_megabytes_written_while_nobody_reads_all_arrive(tmp_path: Path) -> None:
    total = 20_000_000
    child = (
        "import os, sys\n"
        f"left = {total}\n"
        "while left:\n"
        "    left -= os.write(1, b'x' * min(left, 4096))\n"
    )

    def blocked_writing(pid: int) -> bool:
        # Sleeping after some writes went through: it waits for the full terminal to drain.
        io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        st = _stat(pid)
        return int(io["wchar"]) > 0 and st is not None and st[1] == b"S"

    async def main() -> None:
        async with spawned([PY, "-c", child], tmp_path) as s:
            wait_for(lambda: blocked_writing(s.pid), "the child to block on a full pty", 10)
            pane = Pane(s)
            assert await pane.exit() == (0, None)
        assert len(pane.out) == total
        assert pane.out.count(b"x") == total

    run(main())


def test_read_available_drains_without_a_loop(tmp_path: Path) -> None:
    s = PtySession.spawn(["bash", "-c", 'echo hi; read -r x; echo "x=$x"'], env=ENV, cwd=tmp_path)
    out = bytearray()

    def read_until(what: bytes) -> bool:
        out.extend(s.read_available())
        return what in out

    wait_for(lambda: read_until(b"hi\r\n"), "hi", 10)
    s.write(b"yo\n")
    wait_for(lambda: read_until(b"x=yo\r\n"), "x=yo", 10)
    wait_for(lambda: not s.alive, "the exit", 10)
    assert (s.exit_status, s.signal_status) == (0, None)
    assert s.read_available() == b""
    run(s.terminate())


def test_terminate_ends_the_process_group_once_and_idempotently(tmp_path: Path) -> None:
    async def main() -> None:
        s = PtySession.spawn(["bash", "-c", "sleep 300 & sleep 300"], env=ENV, cwd=tmp_path)
        pane = Pane(s)
        await pane.until(lambda: list(session_members(s.pid).values()).count("sleep") == 2)
        procs = set(session_members(s.pid))
        await asyncio.gather(s.terminate(), s.terminate())
        await s.terminate()
        assert survivors(procs) == set()
        # Ended once, by the polite signals a closing terminal sends, not the SIGKILL
        # that follows the grace. (The SIGTERM sent right after the SIGHUP may reach
        # bash while it runs its own SIGHUP handler: which of the two ends it is a race.)
        assert pane.exits in ([(None, signal.SIGHUP)], [(None, signal.SIGTERM)])
        assert not s.alive
        s.write(b"into a dead terminal\n")  # dropped, not an error
        s.resize(10, 10)

    run(main())


def test_start_spawns_off_the_loop_and_a_cancelled_start_leaves_no_child(tmp_path: Path) -> None:
    async def main() -> None:
        s = await PtySession.start(["bash", "-c", "echo started"], env=ENV, cwd=tmp_path)
        pane = Pane(s)
        assert await pane.exit() == (0, None)
        assert bytes(pane.out) == b"started\r\n"
        await s.terminate()

        # Hold the spawner thread, so the start is cancelled before its child exists.
        before = children_of(os.getpid())
        release = threading.Event()
        held = asyncio.get_running_loop().run_in_executor(pty_session._SPAWNER, release.wait)
        # Ignores SIGHUP and SIGTERM, so it lasts the grace and cannot be missed; the
        # background job outlives even the leader's death (a dropped session's fate).
        argv = ["bash", "-c", "trap '' HUP TERM; sleep 300 & sleep 300"]
        start = asyncio.create_task(PtySession.start(argv, env=ENV, cwd=tmp_path))
        await asyncio.sleep(0)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        release.set()
        await held
        deadline = time.monotonic() + 10
        while not (new := children_of(os.getpid()) - before):
            assert time.monotonic() < deadline, "the cancelled start never spawned"
            await asyncio.sleep(0.02)
        ((leader, _),) = new
        # Both sleeps, unless the end came before bash reached its trap (a loaded
        # machine): then the leader is gone with nothing started, which ends as well.
        while list((members := session_members(leader)).values()).count("sleep") < 2:
            if not members and not survivors(new):
                break
            assert time.monotonic() < deadline, f"two sleeps: {members}"
            await asyncio.sleep(0.02)
        # Ended although nobody holds its session.
        procs = set(members) | new
        while survivors(procs):
            assert time.monotonic() < deadline + 10, f"survivors of a cancelled start: {procs}"
            await asyncio.sleep(0.05)

    run(main())


def test_terminate_escalates_to_sigkill_after_the_grace(tmp_path: Path) -> None:
    child = (
        "import signal, time\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(300)\n"
    )

    async def main() -> None:
        s = PtySession.spawn([PY, "-c", child], env=ENV, cwd=tmp_path)
        pane = Pane(s)
        await pane.until(b"ready")
        await s.terminate(grace=0.3)
        assert pane.exits == [(None, signal.SIGKILL)]

    run(main())


def test_terminate_reaches_other_process_groups_of_the_session(tmp_path: Path) -> None:
    # Job control puts each job in a group of its own, beyond the leader's group.
    script = "set -m; nohup sleep 300 >/dev/null 2>&1 & sleep 300 & sleep 300"

    async def main() -> None:
        s = PtySession.spawn(["bash", "-c", script], env=ENV, cwd=tmp_path)
        pane = Pane(s)
        await pane.until(lambda: list(session_members(s.pid).values()).count("sleep") == 3)
        procs = set(session_members(s.pid))
        groups = {st[3] for pid, _ in procs if (st := _stat(pid))}
        assert len(groups) >= 3
        await s.terminate()
        assert survivors(procs) == set()

    run(main())


OFFICE = """\
import asyncio, sys
from pathlib import Path
from hive_core.desks import pty_session
from hive_core.desks.pty_session import PtySession

def spawn(script: str) -> PtySession:
    s = PtySession.spawn(["bash", "-c", script], env={"PATH": sys.argv[1]}, cwd=Path.cwd())
    s.attach(asyncio.get_running_loop(), lambda data: None, lambda code, sig: None)
    print(s.pid, flush=True)
    return s

async def main() -> None:
    sessions = [spawn(script) for script in sys.argv[2:]]
    # Each line on stdin is one more session's script (spawned on the loop's thread).
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        sessions.append(spawn(line.strip()))
    await asyncio.Event().wait()

asyncio.run(main())
"""


def start_office(tmp_path: Path, scripts: list[str]) -> subprocess.Popen[bytes]:
    office_py = tmp_path / "office.py"
    office_py.write_text(OFFICE)
    return subprocess.Popen(
        [PY, str(office_py), ENV["PATH"], *scripts],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
    )


def children_of(pid: int) -> set[Proc]:
    return {
        (child, int(st[20]))
        for child in map(int, filter(str.isdigit, os.listdir("/proc")))
        if (st := _stat(child)) and st[1] != b"Z" and int(st[2]) == pid
    }


def sleeps_in(leader: int, n: int) -> set[Proc]:
    wait_for(lambda: list(session_members(leader).values()).count("sleep") == n, f"{n} sleeps", 10)
    return set(session_members(leader))


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("sleep 300 & sleep 300", id="background-job"),
        pytest.param("trap '' HUP; sleep 300 & sleep 300", id="all-ignore-sighup"),
        pytest.param("nohup sleep 300 >/dev/null 2>&1 & sleep 300", id="nohup"),
        pytest.param("set -m; sleep 300 & sleep 300", id="other-process-group"),
    ],
)
def test_nothing_outlives_an_office_killed_with_sigkill(tmp_path: Path, script: str) -> None:
    office = start_office(tmp_path, [script])
    try:
        assert office.stdout is not None
        leader = int(office.stdout.readline())
        procs = sleeps_in(leader, 2)
        # The office's own children too: the leader and the guard.
        children = children_of(office.pid)
        assert len(children) == 2
        procs |= children
    finally:
        office.kill()
        office.wait()
    wait_for(lambda: not survivors(procs), f"no survivors of {procs}", 10)


def test_one_guard_serves_every_session_of_the_office(tmp_path: Path) -> None:
    scripts = ["trap '' HUP; sleep 300 & sleep 300", "set -m; sleep 300 & sleep 300", "sleep 300"]
    office = start_office(tmp_path, scripts)
    try:
        assert office.stdout is not None
        leaders = [int(office.stdout.readline()) for _ in scripts]
        procs = sleeps_in(leaders[0], 2) | sleeps_in(leaders[1], 2) | sleeps_in(leaders[2], 1)
        children = children_of(office.pid)
        # Three leaders and a single guard, not a guard per session.
        assert set(leaders) < {pid for pid, _ in children} and len(children) == 4
        procs |= children
    finally:
        office.kill()
        office.wait()
    wait_for(lambda: not survivors(procs), f"no survivors of {procs}", 10)


def test_a_guard_that_died_is_replaced_and_told_every_session(tmp_path: Path) -> None:
    office = start_office(tmp_path, ["trap '' HUP; sleep 300 & sleep 300"])
    try:
        assert office.stdin is not None and office.stdout is not None
        first = int(office.stdout.readline())
        procs = sleeps_in(first, 2)
        (guard,) = {p for p in children_of(office.pid) if p[0] != first}
        os.kill(guard[0], signal.SIGKILL)
        wait_for(lambda: not survivors({guard}), "the guard to die", 10)
        office.stdin.write(b"set -m; sleep 300 & sleep 300\n")
        office.stdin.flush()
        second = int(office.stdout.readline())
        procs |= sleeps_in(second, 2)
        (new_guard,) = {p for p in children_of(office.pid) if p[0] not in (first, second)}
        assert new_guard != guard
        procs |= {new_guard}
    finally:
        office.kill()
        office.wait()
    # The first session too: the new guard was told of it, not only of the second.
    wait_for(lambda: not survivors(procs), f"no survivors of {procs}", 10)


def test_what_a_full_terminal_holds_arrives_in_one_callback_in_order(tmp_path: Path) -> None:
    lines = 250_000
    child = (
        "import os\n"
        f"data = b''.join(b'%07d\\n' % n for n in range({lines}))\n"
        "view = memoryview(data)\n"
        "while view:\n"
        "    view = view[os.write(1, view[:4096]) :]\n"
    )
    chunks: list[bytes] = []

    def blocked_writing(pid: int) -> bool:
        st = _stat(pid)
        return (
            st is not None
            and st[1] == b"S"
            and b"wchar: 0" not in Path(f"/proc/{pid}/io").read_bytes()
        )

    async def main() -> None:
        async with spawned([PY, "-c", child], tmp_path) as s:
            wait_for(lambda: blocked_writing(s.pid), "the child to block on a full pty", 10)
            done = asyncio.get_running_loop().create_future()
            s.attach(asyncio.get_running_loop(), chunks.append, lambda *_: done.set_result(0))
            await done
        # A pty hands out at most ~4 KB a read: the first callback took several reads.
        assert len(chunks[0]) > 4096, [len(c) for c in chunks[:5]]
        assert max(map(len, chunks)) <= pty_session._DRAIN_LIMIT + pty_session._READ_CHUNK
        # The terminal turns each newline into CR LF.
        assert b"".join(chunks) == b"".join(b"%07d\r\n" % n for n in range(lines))

    run(main())
