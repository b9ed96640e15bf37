"""Bounds on what an agent can make the office hold (issue 24): connections per socket,
quarantined bytes and staged files, memory sources, git faults told to health.

Each attack is what an agent can do from its own shell: open connections and say
nothing, write files into its own folders. Each test also proves the allowed path."""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

import hive_core.committer as committer_module
from hive_core import conncap, control, listen
from hive_core.committer import GIT_FILE_MAX, STALE_LOCK_AGE, Committer, RepoDamaged
from hive_core.hive import init_office
from hive_core.memory import open_store, sources
from hive_core.memory.tidy import tidy
from hive_core.paths import HivePaths
from hive_core.routing import rules as decide
from hive_core.schema import MESSAGE_FILE_MAX, ControlRequest
from tests.conftest import Running
from tests.e2e.test_git_damage import Health, doctor
from tests.e2e.test_serve import run
from tests.effects.test_committer import age, git, messages, repo, run_with, tracked, write
from tests.effects.test_hook_server import hook
from tests.effects.test_router import inbox, make_router, put_raw, send
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
    monkeypatch.setattr(listen, "READ_TIMEOUT_S", 3600.0)
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
    running: Running, caplog: pytest.LogCaptureFixture
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
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a closed connection"


@pytest.mark.usefixtures("patient")
def test_a_control_flood_does_not_stop_a_whoami_and_spares_callers_being_served(
    running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    paths = running.office.paths
    over = FLOOD - conncap.CONNECTIONS_MAX
    with ExitStack() as stack:
        held = flood(stack, paths.control_socket, FLOOD)
        wait_for(lambda: all(map(closed_by_peer, held[:over])), "the oldest to be closed")
        assert not any(map(closed_by_peer, held[over:]))
        reply = control.request(paths.control_socket, ControlRequest(cmd="whoami"), 10.0)
        assert reply.ok, reply
    told = [r.getMessage() for r in caplog.records if "control.sock" in r.getMessage()]
    assert told[0].startswith(f"control.sock: more than {conncap.CONNECTIONS_MAX} connections")
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a closed connection"
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
    commit, or overwrite the tip's object file with garbage (bytes that do not inflate, or
    a stream that inflates to a header claiming a petabyte-sized commit)."""
    tip = git(repo, "rev-parse", "HEAD").strip()
    branch = repo / ".git" / "refs" / "heads" / "main"
    loose = repo / ".git" / "objects" / tip[:2] / tip[2:]
    if how == "garbage-object":
        loose.chmod(0o644)
        loose.write_bytes(random.Random(how).randbytes(200))
    elif how == "oversized-object":
        loose.chmod(0o644)
        loose.write_bytes(zlib.compress(b"commit %d\x00" % 2**50))
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
    "oversized-object": "cannot be read",
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


# --- what reaches the hive's git ----------------------------------------------------------


@pytest.fixture
def office(tmp_path: Path) -> HivePaths:
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    return paths


def sparse(path: Path, size: int) -> Path:
    """What `truncate -s 4G` in an agent's shell makes: a huge file that takes no disk."""
    with path.open("wb") as f:
        f.truncate(size)
    past = time.time() - 10  # old enough that the router does not wait for it
    os.utime(path, (past, past))
    return path


def largest_blob(repo: Path) -> int:
    objects = git(repo, "cat-file", "--batch-all-objects", "--batch-check").splitlines()
    return max(int(line.split()[2]) for line in objects if line.split()[1] == "blob")


def reason_of(paths: HivePaths, who: str) -> str:
    [reason] = paths.mailbox(who).bad.glob("*.reason")
    return reason.read_text()


def test_an_oversize_draft_never_enters_git_its_record_does_and_the_sender_is_told(
    office: HivePaths,
) -> None:
    jim = office.mailbox("jim")
    huge = sparse(jim.outbox / "huge.json", 4 << 30)
    real = os.urandom(1 << 20)
    put_raw(office, "pam", "big.json", real)
    send(office, "michael", to="pam", subject="allowed", body="a message still goes")
    router = make_router(office)
    router.scan_all()
    assert not huge.exists()
    # The 4 GiB file: not read to be hashed, and past what the office keeps aside for
    # agents (QUARANTINE_ASIDE_MAX): dropped, and jim told so.
    text = reason_of(office, "jim")
    assert f"size: {4 << 30} bytes" in text and "sha256: not computed" in text
    assert "bytes: dropped" in text
    assert not list(jim.bad.glob("*.json")), "no bytes of it in .bad"
    [told] = inbox(office, "jim")
    assert told.sender == "router" and "too large to keep in the hive" in told.body
    assert "dropped" in told.body
    # The 1 MiB file: hashed, its bytes kept aside as they were.
    text = reason_of(office, "pam")
    assert f"sha256: {hashlib.sha256(real).hexdigest()}" in text
    [kept] = list((office.run / "quarantine").iterdir())
    assert kept.name.startswith("pam-") and kept.read_bytes() == real
    assert f"moved out of the hive's git to {kept}" in text
    [told] = [m for m in inbox(office, "pam") if m.sender == "router"]
    assert str(kept) in told.body and "records its size and hash" in told.body
    # The allowed path: a message is routed in the same pass.
    assert [m.subject for m in inbox(office, "pam") if m.sender == "michael"] == ["allowed"]
    # What the office commits holds the records, never the bytes.
    committer = Committer(office.hive)
    assert committer.commit_now(full=True)
    files = tracked(office.hive)
    assert any(f.startswith("agents/jim/outbox/.bad/") and f.endswith(".reason") for f in files)
    assert largest_blob(office.hive) < MESSAGE_FILE_MAX
    assert committer.oversize_problem() is None


def test_set_aside_bytes_are_bounded_for_agents_never_deleted_for_the_person(
    office: HivePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(decide, "QUARANTINE_ASIDE_MAX", 3 * MESSAGE_FILE_MAX)
    body = b"x" * (2 * MESSAGE_FILE_MAX)
    put_raw(office, "jim", "first.json", body)
    make_router(office).scan_all()
    assert "moved out of the hive's git" in reason_of(office, "jim")
    # The second would pass the bound: an agent's is dropped, and told so.
    put_raw(office, "pam", "second.json", body)
    make_router(office).scan_all()
    assert "bytes: dropped" in reason_of(office, "pam")
    [told] = inbox(office, "pam")
    assert "dropped" in told.body
    assert [p.name[:4] for p in (office.run / "quarantine").iterdir()] == ["jim-"]
    # The person's own file is kept however much is aside.
    put_raw(office, "human", "mine.json", body)
    make_router(office).scan_all()
    assert "moved out of the hive's git" in reason_of(office, "human")
    assert sorted(p.name[:4] for p in (office.run / "quarantine").iterdir()) == ["huma", "jim-"]


def test_the_committer_leaves_out_files_over_its_cap_and_says_so(
    office: HivePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(committer_module, "BACKOFF_MAX", 0.05)
    hive = office.hive
    notes = hive / "agents" / "jim" / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    sparse(notes / "huge.bin", 4 << 30)
    (notes / "big.txt").write_bytes(b"y" * (GIT_FILE_MAX + 1))
    (notes / "small.txt").write_text("kept\n")
    health = Health()
    committer = health.wire(Committer(hive, interval=0.05))

    async def left_out_then_removed() -> None:
        # The run's first commit is a full sweep (add_all on the hive, unless a file is
        # over the cap: then one by one).
        await until(None, lambda: health.problems, "the files told to health")
        assert "agents/jim/notes/small.txt" in tracked(hive)
        problem = health.problems[0]
        assert "2 files over 8.0 MiB not committed" in problem
        assert "agents/jim/notes/huge.bin (4096.0 MiB)" in problem
        assert "agents/jim/notes/big.txt" in problem
        (notes / "huge.bin").unlink()
        (notes / "big.txt").write_text("smaller now\n")
        committer.touch(notes)
        await until(None, lambda: health.cleared, "the problem to clear")

    run_with(committer, left_out_then_removed)
    assert git(hive, "show", "HEAD:agents/jim/notes/big.txt") == "smaller now\n"
    assert "agents/jim/notes/huge.bin" not in tracked(hive)
    assert largest_blob(hive) <= GIT_FILE_MAX
    # A tracked file grown past the cap keeps its last committed version.
    (notes / "big.txt").write_bytes(b"z" * (GIT_FILE_MAX + 1))
    committer.touch(notes / "big.txt")
    assert committer.commit_now() is None
    assert git(hive, "show", "HEAD:agents/jim/notes/big.txt") == "smaller now\n"
    assert "agents/jim/notes/big.txt" in (committer.oversize_problem() or "")


# --- memory sources -----------------------------------------------------------------------


def found(paths: HivePaths, word: str, caller: str = "jim") -> bool:
    with open_store(paths) as store:
        return any(word in hit.entry.text for hit in store.search(word, caller=caller))


def office_log(paths: HivePaths) -> list[str]:
    return [json.loads(line).get("detail") or "" for line in paths.log.read_text().splitlines()]


def test_a_huge_archive_is_indexed_up_to_the_cap_and_told_once(running: Running) -> None:
    paths = running.office.paths
    archive = paths.mailbox("jim").archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    # What `printf ... > archive.md; truncate -s 256M archive.md; echo ... >>` makes.
    with archive.open("wb") as f:
        f.write(b"## 2026-01-01T00:00:00Z: old\n\nthe zebraquota is seven\n\n")
        f.seek(256 << 20)
        f.write(b"\nthe tailmarker beyond the cap\n")
    paths.mailbox("jim").memory.write_text("- the allowedpath memory is indexed whole\n")
    # Told on the office's loop, as the router and the watcher tell it (from this thread
    # the keeper's wake-up could wait for the loop's next event). The watcher may also
    # tell the two writes in batches of their own: each file is waited for.
    tell = running.office.memory.changed
    running.loop.call_soon_threadsafe(tell, {archive, paths.mailbox("jim").memory})
    wait_for(lambda: found(paths, "zebraquota"), "the archive's beginning indexed")
    wait_for(lambda: found(paths, "allowedpath"), "the memory file beside it indexed whole")
    assert not found(paths, "tailmarker")
    rel = "agents/jim/memory/archive.md"

    def told() -> list[str]:
        return [d for d in office_log(paths) if rel in d and "only its beginning is indexed" in d]

    wait_for(told, "the cut told")
    assert paths.memory_db.stat().st_size < 4 * sources.SOURCE_MAX
    # Changed again (appended to), it is read again up to the cap, and not told again.
    with archive.open("ab") as f:
        f.write(b"\nmore\n")
    archive.with_name("notes.md").write_text("- the secondchange note\n")
    running.loop.call_soon_threadsafe(tell, {archive, archive.with_name("notes.md")})
    wait_for(lambda: found(paths, "secondchange"), "the next change indexed")
    # The keeper logs before it applies: a second line would be there by now.
    assert len(told()) == 1, told()


def test_json_sources_over_the_cap_are_not_read_and_notes_over_it_are_not_tidied(
    office: HivePaths,
) -> None:
    box = office.mailbox("jim")
    big = box.inbox / "20260101T000000000000Z-big.json"
    sparse(big, sources.SOURCE_MAX + 1)
    changes = sources.entries_for(office, [big])
    assert not changes.upserts and big.relative_to(office.hive).as_posix() in changes.deletions
    assert "it is not indexed" in changes.refused[0]
    box.notes.parent.mkdir(parents=True, exist_ok=True)
    sparse(box.notes, 256 << 20)
    with pytest.raises(sources.TooLarge, match="it is not tidied"):
        tidy(office, "jim", budget=4096)
    assert box.notes.stat().st_size == 256 << 20, "the notes are kept"
    # Within the cap, the tidy folds them.
    box.notes.write_text("- 2026-01-01T00:00:00Z the vendor allows ten requests\n")
    fold = tidy(office, "jim", budget=4096)
    assert fold is not None and "ten requests" in box.memory.read_text()
