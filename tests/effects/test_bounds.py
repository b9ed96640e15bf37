"""Bounds on what an agent can make the office hold (issue 24): connections per socket,
quarantined bytes and staged files, memory sources, git faults told to health.

Each attack is what an agent can do from its own shell: open connections and say
nothing, write files into its own folders. Each test also proves the allowed path."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

import hive_core.committer as committer_module
from hive_core import conncap, control
from hive_core.committer import STALE_LOCK_AGE, Committer, RepoDamaged
from hive_core.events import server as hook_server
from hive_core.schema import ControlRequest
from tests.conftest import Running
from tests.e2e.test_git_damage import Health, doctor
from tests.e2e.test_serve import run
from tests.effects.test_committer import age, git, messages, repo, run_with, write
from tests.effects.test_hook_server import hook
from tests.support import until, wait_for

__all__ = ["repo"]  # the fixture, shared with test_committer


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    run("hive-office", "init", home=home)
    return home


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


# --- silent git faults ------------------------------------------------------------------


def literal_commit(repo: Path, body: bytes) -> str:
    """A commit object with these bytes, as `git hash-object --literally` writes one."""
    return (
        subprocess.run(
            ["git", "-C", str(repo), "hash-object", "-t", "commit", "--literally", "-w", "--stdin"],
            input=body,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
    )


def damage_head(repo: Path, how: str) -> None:
    """What an agent can do to the hive's .git from its shell: point main at a garbage
    commit, or overwrite the tip's object file with garbage."""
    tip = git(repo, "rev-parse", "HEAD").strip()
    branch = repo / ".git" / "refs" / "heads" / "main"
    if how == "garbage-object":
        loose = repo / ".git" / "objects" / tip[:2] / tip[2:]
        loose.chmod(0o644)
        loose.write_bytes(os.urandom(200))
    elif how == "garbage-commit":
        branch.write_text(literal_commit(repo, b"garbage\n") + "\n")
    elif how == "missing-parent":
        body = (
            f"tree {git(repo, 'rev-parse', 'HEAD^{tree}').strip()}\n"
            f"parent {'1' * 40}\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n\nx\n"
        )
        branch.write_text(literal_commit(repo, body.encode()) + "\n")
    elif how == "missing-tree":
        body = f"tree {'2' * 40}\nparent {tip}\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n\nx\n"
        branch.write_text(literal_commit(repo, body.encode()) + "\n")


DAMAGE = {
    "garbage-object": "cannot be read",
    "garbage-commit": "cannot be read",
    "missing-parent": f"names a parent {'1' * 12} that is missing",
    "missing-tree": f"names a tree {'2' * 12} that is missing",
}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_damaged_head_is_refused_with_a_sentence_never_committed_on(repo: Path, how: str) -> None:
    committer = Committer(repo)
    head_file = repo / ".git" / "refs" / "heads" / "main"
    good = head_file.read_text()
    tip = good.strip()
    loose = repo / ".git" / "objects" / tip[:2] / tip[2:]
    kept = loose.read_bytes()
    damage_head(repo, how)
    damaged = head_file.read_text()
    committer.touch(write(repo, "tasks.json", "{}"))
    with pytest.raises(RepoDamaged) as refused:
        committer.commit_now()
    sentence = str(refused.value)
    assert DAMAGE[how] in sentence and "git -C" in sentence and "fsck" in sentence
    assert head_file.read_text() == damaged, "nothing committed on top"
    assert committer.pending
    # Allowed path: the repository repaired, the waiting change is committed on it.
    loose.chmod(0o644)
    loose.write_bytes(kept)
    head_file.write_text(good)
    assert committer.commit_now() is not None
    assert messages(repo)[-1] == "tasks.json"
    assert git(repo, "rev-parse", "HEAD^").strip() == tip


def test_doctor_reads_a_damaged_head_as_damage_not_as_no_repository(home: Path) -> None:
    damage_head(home / "hive", "garbage-object")
    out = doctor(home)
    assert "cannot be read" in out and "not a git repo" not in out
    assert "Traceback" not in out


def hold_open(lock: Path) -> subprocess.Popen[bytes]:
    """A process that holds `lock` open (a git, or an agent's program, that never ends)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"f = open({str(lock)!r}, 'w'); print(1, flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline()
    return holder


def test_a_held_index_lock_is_told_to_health_with_its_holder_and_cleared_when_gone(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(committer_module, "LOCK_REPORT_AFTER", 0.0)
    monkeypatch.setattr(committer_module, "BACKOFF_MAX", 0.05)
    health = Health()
    committer = health.wire(Committer(repo, interval=0.05))
    lock = repo / ".git" / "index.lock"
    holder = hold_open(lock)
    age(lock, STALE_LOCK_AGE * 10)  # old, yet held: never removed

    async def held_then_released() -> None:
        committer.touch(write(repo, "tasks.json", "{}"))
        await until(None, lambda: health.problems, "the lock told to health")
        assert f"held open by process {holder.pid}" in health.problems[0]
        assert f"kill {holder.pid}" in health.problems[0]
        assert messages(repo) == ["office: initialised"]
        holder.kill()
        holder.wait()
        await until(None, lambda: health.cleared, "the problem to clear")

    try:
        run_with(committer, held_then_released)
    finally:
        holder.kill()
        holder.wait()
    assert len(health.problems) == 1, "told once, not once a retry"
    assert messages(repo)[-1] == "tasks.json"


def test_doctor_names_a_held_index_lock_and_its_holder(home: Path) -> None:
    lock = home / "hive" / ".git" / "index.lock"
    assert "index.lock" not in doctor(home)
    holder = hold_open(lock)
    try:
        out = doctor(home)
        assert f"FIX  git's lock {lock} is held open by process {holder.pid}" in out, out
    finally:
        holder.kill()
        holder.wait()
    # The holder gone, what is left is named as such, with the way to remove it.
    out = doctor(home)
    assert "left by a git that did not finish" in out and f"`rm {lock}`" in out
    lock.unlink()
    assert "index.lock" not in doctor(home)
