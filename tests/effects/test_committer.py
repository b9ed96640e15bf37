"""The committer on a real git repo: batching, ignores, deletions, locks, run/stop.

pygit2 writes; the real `git` binary checks the result (log, ls-tree, fsck, status).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from hive_core.committer import (
    COMMIT_DEFER_MAX_S,
    GC_LOOSE_OBJECTS,
    STALE_LOCK_AGE,
    Committer,
    LockHeld,
    Note,
    commit_all,
    ensure_repo,
    summarize,
)
from hive_core.fsio import append_line
from hive_core.hive import GITIGNORE, init_office
from hive_core.logfile import LogFollower, iter_log_lines, rotate_if_due, segments
from hive_core.paths import HivePaths
from tests.support import until

# --- helpers ------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    """The real git, blind to the user's config (as the office must be)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return result.stdout


def tracked(repo: Path) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", "HEAD").split())


def messages(repo: Path) -> list[str]:
    """Commit subjects, oldest first."""
    return git(repo, "log", "--reverse", "--format=%s").splitlines()


def assert_clean(repo: Path) -> None:
    git(repo, "fsck", "--strict")
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""


def write(repo: Path, rel: str, text: str = "x") -> Path:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def run_with(committer: Committer, body: Callable[[], Awaitable[None]]) -> None:
    """Run the committer's loop while `body` acts, then stop it and wait for it to end."""

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(committer.run(stop))
        try:
            await body()
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout=30)

    asyncio.run(main())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A hive-like repo: the office's .gitignore and one initial commit."""
    path = tmp_path / "hive"
    path.mkdir()
    assert ensure_repo(path)
    write(path, ".gitignore", GITIGNORE)
    write(path, "board.md", "# Board\n")
    assert commit_all(path, "office: initialised")
    return path


@pytest.fixture
def committer(repo: Path) -> Iterator[Committer]:
    yield Committer(repo, interval=0.1)
    assert_clean(repo)


# --- summarize (pure) ---------------------------------------------------------


def test_summarize_adds_up_counts_and_keeps_order() -> None:
    notes = [
        Note("route", count=5, paths=frozenset({"x"})),
        Note("board", "updated by michael"),
        Note("route", count=7),
    ]
    assert summarize(notes, ["x"]) == "route: 12 messages; board: updated by michael"


def test_summarize_names_the_changed_files_no_note_accounts_for() -> None:
    """A board edit committed with a routed message is named beside the route note."""
    notes = [Note("route", paths=frozenset({"agents/jim/inbox/new/m1.md"}))]
    changed = ["agents/jim/inbox/new/m1.md", "BOARD.md"]
    assert summarize(notes, changed) == "route: 1 message; BOARD.md"


def test_summarize_singular_and_default_unit() -> None:
    assert summarize([Note("route")], []) == "route: 1 message"
    assert summarize([Note("memory", count=2)], []) == "memory: 2 changes"


def test_summarize_merges_details_and_caps_them() -> None:
    notes = [Note("board", "updated by michael"), Note("board", "updated by michael")]
    assert summarize(notes, []) == "board: updated by michael (x2)"
    many = [Note("task", f"t{i} done") for i in range(5)]
    assert summarize(many, []) == "task: t0 done, t1 done, t2 done, +2 more"
    mixed = [Note("route", "bounced to michael"), Note("route", count=3)]
    assert summarize(mixed, []) == "route: 3 messages, bounced to michael"


def test_summarize_from_paths_when_no_notes() -> None:
    paths = [
        "agents/jim/inbox/a.json",
        "agents/jim/memory.md",
        "board.md",
        "human/outbox/.sent/b.json",
        "triage/c.json",
    ]
    assert summarize([], paths) == "agents/jim: 2 files; board.md; human: 1 file; triage: 1 file"


def test_summarize_caps_path_groups_and_prefers_notes() -> None:
    paths = [f"agents/a{i}/x" for i in range(7)]
    assert summarize([], paths).endswith("; +2 more")
    assert summarize([Note("route", paths=frozenset(paths))], paths) == "route: 1 message"


# --- repository basics --------------------------------------------------------


def test_ensure_repo_creates_main_once(tmp_path: Path) -> None:
    assert ensure_repo(tmp_path)
    assert not ensure_repo(tmp_path)
    assert git(tmp_path, "symbolic-ref", "HEAD").strip() == "refs/heads/main"


def test_commit_all_commits_once_and_skips_unchanged(repo: Path) -> None:
    assert messages(repo) == ["office: initialised"]
    assert tracked(repo) == {".gitignore", "board.md"}
    assert commit_all(repo, "again") is None
    assert_clean(repo)


def test_commit_all_on_an_empty_repo_commits_nothing(tmp_path: Path) -> None:
    ensure_repo(tmp_path)
    assert commit_all(tmp_path, "nothing") is None


# --- staging --------------------------------------------------------------------


def test_many_touches_make_one_commit_with_counts(repo: Path, committer: Committer) -> None:
    for i in range(30):
        done = committer.touch(write(repo, f"agents/jim/inbox/.done/m{i:02}.json"))
        committer.note("route", explains=done)
    board = committer.touch(write(repo, "board.md", "# Board\nplan\n"))
    committer.note("board", "updated by michael", explains=board)
    head = committer.commit_now()
    assert head is not None
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert messages(repo)[1:] == ["route: 30 messages; board: updated by michael"]
    assert {f"agents/jim/inbox/.done/m{i:02}.json" for i in range(30)} <= tracked(repo)
    assert not committer.pending
    assert committer.commit_now() is None


def test_touch_accepts_relative_paths_and_rejects_outside(
    repo: Path, committer: Committer, tmp_path: Path
) -> None:
    write(repo, "tasks.json", "{}")
    committer.touch("tasks.json")
    assert committer.commit_now() is not None
    assert messages(repo)[-1] == "tasks.json"
    with pytest.raises(ValueError):
        committer.touch(tmp_path / "elsewhere.txt")
    with pytest.raises(ValueError):
        committer.touch("../elsewhere.txt")


def test_ignored_and_special_files_are_never_committed(repo: Path, committer: Committer) -> None:
    box = repo / "agents" / "jim"
    kept = write(repo, "agents/jim/outbox/.sent/ok.json")
    ignored = [
        write(repo, "agents/jim/inbox/.tmp-1a2b-m.json"),
        write(repo, "agents/jim/outbox/.routing/claimed.json"),
        write(repo, "run.sock"),
        write(repo, "memory.db"),
    ]
    # A real socket under a name no rule ignores: git cannot store it, so it is skipped.
    # Bound via a relative name: pytest's tmp paths can exceed the socket path limit.
    sock = socket.socket(socket.AF_UNIX)
    cwd = Path.cwd()
    os.chdir(box)
    try:
        sock.bind("live-endpoint")
    finally:
        os.chdir(cwd)
    try:
        committer.touch(kept, *ignored, box / "live-endpoint")
        assert committer.commit_now() is not None
        committer.touch(box)
        committer.commit_now()
        committer.commit_now(full=True)
        files = tracked(repo)
        assert "agents/jim/outbox/.sent/ok.json" in files
        assert not {str(p.relative_to(repo)) for p in ignored} & files
        assert "agents/jim/live-endpoint" not in files
        git(repo, "fsck", "--strict")
    finally:
        sock.close()
        (box / "live-endpoint").unlink()


def test_temp_names_are_never_staged_even_without_gitignore(tmp_path: Path) -> None:
    ensure_repo(tmp_path)
    write(tmp_path, "a.json")
    write(tmp_path, "agents/jim/.tmp-9f-a.json")
    assert commit_all(tmp_path, "first")
    committer = Committer(tmp_path)
    committer.touch(tmp_path / "agents/jim/.tmp-9f-a.json", tmp_path / "agents")
    committer.commit_now(full=True)
    assert tracked(tmp_path) == {"a.json"}


def test_deleted_file_and_folder_are_committed(repo: Path, committer: Committer) -> None:
    one = write(repo, "triage/one.json")
    folder = [write(repo, f"agents/pam/inbox/m{i}.json") for i in range(3)]
    committer.touch(one, *folder)
    committer.commit_now()
    one.unlink()
    for path in folder:
        path.unlink()
    committer.touch(one, repo / "agents" / "pam")
    assert committer.commit_now() is not None
    assert tracked(repo) == {".gitignore", "board.md"}


def test_touched_folder_stages_everything_under_it(repo: Path, committer: Committer) -> None:
    write(repo, "agents/jim/memory/notes.md", "a")
    write(repo, "agents/jim/inbox/.done/m1.json")
    write(repo, "agents/jim2/other.md")  # a sibling with the same prefix stays out
    committer.touch(repo / "agents" / "jim")
    committer.commit_now()
    files = tracked(repo)
    assert {"agents/jim/memory/notes.md", "agents/jim/inbox/.done/m1.json"} <= files
    assert "agents/jim2/other.md" not in files
    assert messages(repo)[-1] == "agents/jim: 2 files"
    committer.touch(repo / "agents" / "jim2")
    committer.commit_now()


def test_file_replaced_by_folder(repo: Path, committer: Committer) -> None:
    committer.touch(write(repo, "notes"))
    committer.commit_now()
    (repo / "notes").unlink()
    write(repo, "notes/today.md")
    committer.touch(repo / "notes")
    committer.commit_now()
    assert "notes/today.md" in tracked(repo)
    assert "notes" not in tracked(repo)


def test_full_commit_catches_unreported_changes(repo: Path, committer: Committer) -> None:
    write(repo, "agents/jim/memory.md", "nobody told")
    assert committer.commit_now() is None
    assert committer.commit_now(full=True) is not None
    assert "agents/jim/memory.md" in tracked(repo)


# --- locks ------------------------------------------------------------------------


def test_live_lock_blocks_without_losing_the_change(repo: Path, committer: Committer) -> None:
    lock = repo / ".git" / "index.lock"
    board = committer.touch(write(repo, "board.md", "v2"))
    committer.note("board", "updated by michael", explains=board)
    with open(lock, "w"):
        # Old but held open by this process: live, so it must stay.
        age(lock, STALE_LOCK_AGE * 10)
        with pytest.raises(LockHeld):
            committer.commit_now()
        assert lock.exists()
        assert committer.pending
        assert messages(repo) == ["office: initialised"]
    lock.unlink()  # the holder finishes
    assert committer.commit_now() is not None
    assert messages(repo)[-1] == "board: updated by michael"
    assert (repo / "board.md").read_text() == git(repo, "show", "HEAD:board.md")


def test_lock_of_a_dead_process_is_removed(repo: Path, committer: Committer) -> None:
    lock = repo / ".git" / "index.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"f = open({str(lock)!r}, 'w'); print(1, flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None
        holder.stdout.readline()
        age(lock, STALE_LOCK_AGE * 10)
        committer.touch(write(repo, "tasks.json", "{}"))
        with pytest.raises(LockHeld):
            committer.commit_now()
    finally:
        holder.kill()
        holder.wait()
    # Owner gone, lock old: stale.
    assert committer.commit_now() is not None
    assert not lock.exists()
    assert "tasks.json" in tracked(repo)


def test_stale_branch_lock_is_removed(repo: Path, committer: Committer) -> None:
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    lock.write_text("")
    age(lock, STALE_LOCK_AGE * 10)
    committer.touch(write(repo, "tasks.json", "{}"))
    assert committer.commit_now() is not None
    assert not lock.exists()


def test_young_lock_is_respected(repo: Path, committer: Committer) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    committer.touch(write(repo, "tasks.json", "{}"))
    with pytest.raises(LockHeld):
        committer.commit_now()
    lock.unlink()
    assert committer.commit_now() is not None


def test_a_file_growing_while_it_is_staged_is_committed(repo: Path, committer: Committer) -> None:
    """libgit2 refuses a file that grows while it reads it; the log is appended to as the
    committer stages it."""
    log = write(repo, "log.jsonl", "x" * 2_000_000 + "\n")
    stop = threading.Event()

    def append() -> None:
        while not stop.is_set():
            append_line(log, b"y" * 150)
            time.sleep(0.0005)

    appender = threading.Thread(target=append)
    appender.start()
    try:
        for _ in range(20):
            committer.touch(log)
            committer.commit_now()
        committer.touch(log)
        committer.commit_now(full=True)
    finally:
        stop.set()
        appender.join()
    committed = git(repo, "show", "HEAD:log.jsonl")
    assert log.read_text().startswith(committed) and len(committed) > 2_000_000
    committer.touch(log)
    committer.commit_now()


# --- run / stop -------------------------------------------------------------------


def test_run_batches_a_burst_and_loses_no_note(repo: Path, committer: Committer) -> None:
    total = 300

    async def burst() -> None:
        for i in range(total):
            routed = committer.touch(write(repo, f"agents/dwight/inbox/m{i:03}.json"))
            committer.note("route", explains=routed)
            if i % 10 == 0:
                await asyncio.sleep(0.01)
        await until(None, lambda: not committer.pending, "the committer to catch up")

    run_with(committer, burst)
    subjects = messages(repo)[1:]
    assert 0 < len(subjects) < total / 5
    counts = [int(m) for s in subjects for m in re.findall(r"route: (\d+) message", s)]
    assert sum(counts) == total
    assert {f"agents/dwight/inbox/m{i:03}.json" for i in range(total)} <= tracked(repo)


def test_a_commit_waits_for_touches_to_pause_but_not_past_the_cap(
    repo: Path, committer: Committer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock is the test's: during a burst (a touch every 0.05 s) the commit is not
    due; once touches stop it is due within the interval; a burst that never pauses is
    committed COMMIT_DEFER_MAX_S after it began."""
    now = [1000.0]
    monkeypatch.setattr("hive_core.committer.time.monotonic", lambda: now[0])
    interval = 0.1  # the fixture's
    never = -float("inf")
    committer.touch(write(repo, "board.md"))
    assert 0 < committer._settle(never) <= interval
    for i in range(20):  # 1 s of touches, ten intervals
        now[0] += 0.05
        committer.touch(write(repo, f"agents/dwight/inbox/m{i:03}.json"))
        assert committer._settle(never) > 0, "due while the burst goes on"
    now[0] += interval
    assert committer._settle(never) <= 0, "not due within the interval after the burst"
    committer.commit_now()
    began = now[0]
    while now[0] < began + COMMIT_DEFER_MAX_S - 0.1:
        now[0] += 0.05
        committer.touch(write(repo, "board.md"))
        assert committer._settle(never) > 0
    now[0] = began + COMMIT_DEFER_MAX_S + 0.06
    committer.touch(write(repo, "board.md"))
    assert committer._settle(never) <= 0, "a burst that never pauses waits past the cap"
    assert committer._settle(now[0] - interval / 2) > 0, "commits closer than the interval"


def test_run_retries_while_locked_then_commits(repo: Path, committer: Committer) -> None:
    lock = repo / ".git" / "index.lock"

    async def locked_for_a_while() -> None:
        with open(lock, "w"):
            committer.touch(write(repo, "board.md", "during lock"))
            await asyncio.sleep(0.5)  # several retries happen meanwhile
            assert committer.pending
        lock.unlink()
        await until(
            None,
            lambda: "board.md" in git(repo, "log", "-1", "--name-only"),
            "the board in the last commit",
        )

    run_with(committer, locked_for_a_while)
    assert git(repo, "show", "HEAD:board.md") == "during lock"


def test_run_starts_with_a_sweep_and_stops_with_a_full_commit(
    repo: Path, committer: Committer
) -> None:
    write(repo, "agents/jim/memory.md", "written while the office was down")

    async def quiet_change() -> None:
        await until(None, lambda: "agents/jim/memory.md" in tracked(repo), "jim's memory tracked")
        write(repo, "agents/jim/memory/notes.md", "nobody touched this")

    run_with(committer, quiet_change)
    assert "agents/jim/memory/notes.md" in tracked(repo)


# --- gc ---------------------------------------------------------------------------


def count_objects(repo: Path) -> dict[str, int]:
    """`git count-objects -v`: loose objects (`count`), `packs`, sizes."""
    lines = git(repo, "count-objects", "-v").splitlines()
    return {name: int(value) for name, value in (line.split(": ") for line in lines)}


def loose_objects(repo: Path) -> int:
    return count_objects(repo)["count"]


def texts_stored_under_17(n: int) -> list[str]:
    """Texts whose git blobs are named 17...: `git gc --auto` estimates the loose objects
    from how many sit in objects/17, so these make the estimate pass its threshold."""
    found: list[str] = []
    i = 0
    while len(found) < n:
        text = f"message {i}"
        if hashlib.sha1(b"blob %d\0%s" % (len(text), text.encode())).hexdigest()[:2] == "17":
            found.append(text)
        i += 1
    return found


def test_gc_packs_loose_objects_between_commits(repo: Path) -> None:
    committer = Committer(repo, interval=0.05, gc_every=0.2)

    def packed_under_threshold() -> bool:
        under_17 = repo / ".git" / "objects" / "17"
        loose_17 = len(list(under_17.iterdir())) if under_17.is_dir() else 0
        # git's own estimate: gc --auto runs when objects/17 holds more than this.
        return count_objects(repo)["packs"] > 0 and loose_17 <= -(-GC_LOOSE_OBJECTS // 256)

    # More in objects/17 than GC_LOOSE_OBJECTS / 256: gc --auto finds too many loose.
    texts = texts_stored_under_17(GC_LOOSE_OBJECTS // 256 + 2)

    async def commits_then_gc() -> None:
        for i, text in enumerate(texts):
            committer.touch(write(repo, f"agents/jim/inbox/m{i:04}.json", text))
            await until(None, lambda: not committer.pending, "the committer to catch up")
        # Commits go on while gc runs between them; gc packs what it finds loose. Not
        # "no loose objects": a tree or commit of this run may land in objects/17 too,
        # so gc can run before the last commit, whose objects then stay loose under the
        # threshold (once in CI). Packed, and under gc --auto's threshold, is the promise.
        await until(None, packed_under_threshold, "gc to pack the loose objects", 60)
        committer.touch(write(repo, "board.md", "after gc"))
        await until(None, lambda: not committer.pending, "the committer to catch up")

    run_with(committer, commits_then_gc)
    assert {f"agents/jim/inbox/m{i:04}.json" for i in range(len(texts))} <= tracked(repo)
    assert git(repo, "show", "HEAD:board.md") == "after gc"
    assert_clean(repo)


def test_gc_leaves_a_small_repository_alone(repo: Path, committer: Committer) -> None:
    before = loose_objects(repo)
    assert committer.collect_garbage()
    assert loose_objects(repo) == before > 0


# --- the log: rotation into segments ----------------------------------------------


@pytest.fixture
def office(tmp_path: Path) -> HivePaths:
    paths = HivePaths(tmp_path / "home")
    init_office(paths)
    commit_all(paths.hive, "office: initialised")
    return paths


def log_line(n: int) -> bytes:
    return b'{"ts":"t","kind":"route","msg":"m%05d","detail":"%s"}' % (n, b"x" * 80)


def number_of(line: bytes) -> int:
    found = re.search(rb'"msg":"m(\d+)"', line)
    assert found
    return int(found[1])


def test_log_rotates_into_segments_each_committed_once(office: HivePaths) -> None:
    limit = 2048
    rotating = Committer(
        office.hive,
        interval=0.05,
        before_commit=lambda: rotating.touch(*rotate_if_due(office, limit)),
    )
    total = 200

    async def appends() -> None:
        for n in range(total):
            append_line(office.log, log_line(n))
            rotating.note("route", explains=rotating.touch(office.log))
            if n % 5 == 0:
                await until(None, lambda: not rotating.pending, "the committer to catch up")

    run_with(rotating, appends)
    parts = segments(office)
    assert len(parts) >= total * len(log_line(0)) // limit - 2
    assert [p.name for p in parts[:2]] == ["0001.jsonl", "0002.jsonl"]
    assert all(limit <= p.stat().st_size < 2 * limit for p in parts)
    assert office.log.stat().st_size < limit + len(log_line(0)) + 1
    for part in parts:
        rel = str(part.relative_to(office.hive))
        assert len(git(office.hive, "log", "--format=%H", "--", rel).split()) == 1, rel
    # Every line is kept once, in order, across the segments and the live file.
    assert list(iter_log_lines(office)) == [log_line(n) for n in range(total)]
    assert list(iter_log_lines(office, 3)) == [log_line(n) for n in range(total - 3, total)]
    assert_clean(office.hive)


def test_log_is_not_rotated_while_a_claim_is_in_progress(office: HivePaths) -> None:
    append_line(office.log, b"x" * 100)
    claim = office.mailbox("jim").routing / "2026-id~m.json"
    claim.write_text("{}")
    assert rotate_if_due(office, 64) == []
    assert segments(office) == []
    claim.unlink()
    assert rotate_if_due(office, 64) == [office.log_segments / "0001.jsonl", office.log]
    assert office.log.read_bytes() == b""
    assert rotate_if_due(office, 64) == []


def test_log_tail_reads_only_what_it_needs_and_filters(office: HivePaths) -> None:
    for n in range(30):
        append_line(office.log, log_line(n))
        if n % 10 == 9:
            rotate_if_due(office, 1)
    append_line(office.log, log_line(30))
    with office.log.open("ab") as f:
        f.write(b'{"half a line')  # mid-append: not an event yet
    assert [p.name for p in segments(office)] == ["0001.jsonl", "0002.jsonl", "0003.jsonl"]
    assert list(iter_log_lines(office, 1)) == [log_line(30)]
    even = list(iter_log_lines(office, 4, keep=lambda line: number_of(line) % 2 == 0))
    assert even == [log_line(n) for n in (24, 26, 28, 30)]
    assert len(list(iter_log_lines(office))) == 31


def test_a_follower_reads_across_rotations(office: HivePaths) -> None:
    append_line(office.log, log_line(0))
    follower = LogFollower(office)
    assert follower.read() == []
    append_line(office.log, log_line(1))
    assert follower.read() == [log_line(1)]
    append_line(office.log, log_line(2))
    rotate_if_due(office, 1)
    append_line(office.log, log_line(3))
    # The rest of the rotated file first, then the new live file from its start.
    assert follower.read() == [log_line(2), log_line(3)]
    # Two rotations between reads, the second leaving no live file for a moment.
    append_line(office.log, log_line(4))
    rotate_if_due(office, 1)
    append_line(office.log, log_line(5))
    rotate_if_due(office, 1)
    office.log.unlink()
    assert follower.read() == [log_line(4), log_line(5)]
    append_line(office.log, log_line(6))
    assert follower.read() == [log_line(6)]
