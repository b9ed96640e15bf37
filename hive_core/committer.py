"""The only git writer of the hive: batched commits of the paths producers report.

Producers call `touch()` with what they changed and `note()` with what happened; a
commit stages exactly the touched paths (plus an occasional full sweep for changes
nobody reported), so a commit costs what changed, not the size of the hive.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from hive_core.fsio import TEMP_PREFIX, atomic_write

log = logging.getLogger(__name__)

# A lock this old that no process has open belongs to a crashed writer.
STALE_LOCK_AGE = 5.0
# Backstop for changes nobody touch()ed (an agent editing its memory by hand, say).
FULL_SWEEP_EVERY = 60.0
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 2.0
FLUSH_TIMEOUT = 10.0

# Temp files of atomic writes must never reach the history, whatever .gitignore says.
_EXCLUDE_RULE = f"{TEMP_PREFIX}*"
# The user's global excludes file must not decide what the audit trail keeps.
_EXCLUDES_FILE = "/dev/null"

# How a category's bare count reads in a summary ("route: 12 messages").
_UNITS = {"route": "message"}
_MAX_DETAILS = 3
_MAX_GROUPS = 5


class LockHeld(Exception):
    """A live git lock blocks the commit; nothing was lost, try again later."""

    def __init__(self, lock: Path) -> None:
        super().__init__(f"git lock held: {lock}")
        self.lock = lock


@dataclass(frozen=True, slots=True)
class Note:
    category: str
    detail: str = ""
    count: int = 1


# --- summaries (pure) ---------------------------------------------------------


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _capped(items: list[str], cap: int, sep: str) -> str:
    if len(items) > cap:
        items = [*items[:cap], f"+{len(items) - cap} more"]
    return sep.join(items)


def _summarize_notes(notes: Sequence[Note]) -> str:
    # dicts keep first-seen order, so the summary reads in the order things happened.
    bare: dict[str, int] = {}
    detailed: dict[str, dict[str, int]] = {}
    for note in notes:
        bare.setdefault(note.category, 0)
        details = detailed.setdefault(note.category, {})
        if note.detail:
            details[note.detail] = details.get(note.detail, 0) + note.count
        else:
            bare[note.category] += note.count
    parts = []
    for category, n in bare.items():
        items = [d if c == 1 else f"{d} (x{c})" for d, c in detailed[category].items()]
        if n:
            items.insert(0, _plural(n, _UNITS.get(category, "change")))
        parts.append(f"{category}: {_capped(items, _MAX_DETAILS, ', ')}")
    return "; ".join(parts)


def _path_group(path: str) -> str:
    """agents/<id>/... -> agents/<id>; other folders -> their top folder; top files -> name."""
    head, _, rest = path.partition("/")
    if head == "agents" and "/" in rest:
        return f"agents/{rest.split('/', 1)[0]}"
    return head


def _summarize_paths(paths: Sequence[str]) -> str:
    groups: dict[str, int] = {}
    for path in paths:
        group = _path_group(path)
        groups[group] = groups.get(group, 0) + 1
    parts = [
        group if n == 1 and group in paths else f"{group}: {_plural(n, 'file')}"
        for group, n in groups.items()
    ]
    return _capped(parts, _MAX_GROUPS, "; ")


def summarize(notes: Sequence[Note], changed_paths: Sequence[str]) -> str:
    """The one-line commit message: what producers said happened, else which files changed.

    Same-category notes merge: bare counts add up ("route: 12 messages"), details are
    listed once each with their count ("board: updated by michael (x2)").
    """
    if notes:
        return _summarize_notes(notes)
    if changed_paths:
        return _summarize_paths(changed_paths)
    return "office: no changes"


# --- the repository -----------------------------------------------------------


def _prepare(repo: pygit2.Repository) -> None:
    """Idempotent repo settings that make the committed set the hive's own business."""
    config = repo.config
    if "core.excludesFile" not in config or config["core.excludesFile"] != _EXCLUDES_FILE:
        config["core.excludesFile"] = _EXCLUDES_FILE
    exclude = Path(repo.path) / "info" / "exclude"
    try:
        current = exclude.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if _EXCLUDE_RULE not in current.splitlines():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        sep = "" if not current or current.endswith("\n") else "\n"
        atomic_write(exclude, f"{current}{sep}{_EXCLUDE_RULE}\n".encode())


def _open(repo_path: Path) -> pygit2.Repository:
    repo = pygit2.Repository(str(repo_path))
    _prepare(repo)
    return repo


def ensure_repo(path: Path) -> bool:
    """Make `path` a git repo on branch main if it is not one. True if it was created."""
    created = not (path / ".git").exists()
    repo = (
        pygit2.init_repository(str(path), bare=False, initial_head="main")
        if created
        else pygit2.Repository(str(path))
    )
    _prepare(repo)
    return created


def _lock_paths(repo: pygit2.Repository) -> list[Path]:
    """Every lock a commit takes: the index, HEAD, and the branch HEAD points at."""
    git_dir = Path(repo.path)
    head = repo.lookup_reference("HEAD")
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock"]
    if head.type == pygit2.enums.ReferenceType.SYMBOLIC:
        locks.append(git_dir / f"{head.target}.lock")
    return locks


def _open_by_any_process(path: Path) -> bool:
    """True if some process we can see has `path` open (Linux: /proc/*/fd)."""
    target = os.path.realpath(path)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except FileNotFoundError:
        # No /proc (macOS): age alone has to decide.
        return False
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            # Gone, or another user's process, which cannot hold a lock in our hive.
            continue
        for fd in fds:
            try:
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    return True
            except OSError:
                continue
    return False


def _remove_stale_locks(locks: Iterable[Path]) -> None:
    for lock in locks:
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if age > STALE_LOCK_AGE and not _open_by_any_process(lock):
            log.warning("removing stale git lock %s (%.0f s old, no owner)", lock, age)
            lock.unlink(missing_ok=True)


def _commit_index(
    repo: pygit2.Repository,
    index: pygit2.Index,
    signature: pygit2.Signature,
    message: Callable[[list[str]], str],
) -> str | None:
    """Commit the index if its tree differs from HEAD's. `message` gets the changed paths."""
    tree_id = index.write_tree()
    head = None if repo.head_is_unborn else repo.head.peel(pygit2.Commit)
    # Written even when nothing is committed, so git sees fresh stat data and stays clean.
    # If the commit below fails, the retry restages the same paths anyway.
    index.write()
    if (head.tree_id == tree_id) if head else not len(index):
        return None
    tree = repo[tree_id].peel(pygit2.Tree)
    diff = head.tree.diff_to_tree(tree) if head else tree.diff_to_tree()
    changed = [delta.new_file.path for delta in diff.deltas]
    parents = [head.id] if head else []
    oid = repo.create_commit(
        "HEAD", signature, signature, message(changed) + "\n", tree_id, parents
    )
    return str(oid)


def _with_lock_check(repo: pygit2.Repository, attempt: Callable[[], str | None]) -> str | None:
    """Run one commit attempt, turning a git lock conflict into LockHeld."""
    locks = _lock_paths(repo)
    _remove_stale_locks(locks)
    for lock in locks:
        if lock.exists():
            raise LockHeld(lock)
    try:
        return attempt()
    except pygit2.GitError as err:
        for lock in locks:
            if lock.exists():
                raise LockHeld(lock) from err
        raise


def commit_all(repo_path: Path, message: str) -> str | None:
    """Stage everything not ignored and commit it if the tree changed (one attempt)."""
    repo = _open(repo_path)
    index = repo.index
    signature = pygit2.Signature("hive-office", "office@hive-office.local")

    def attempt() -> str | None:
        index.read(False)
        index.add_all()
        return _commit_index(repo, index, signature, lambda _changed: message)

    return _with_lock_check(repo, attempt)


# --- the committer ------------------------------------------------------------


class Committer:
    """Batches touched paths and notes into summarised commits (see module docstring)."""

    def __init__(
        self,
        repo_path: Path,
        *,
        interval: float = 0.5,
        author_name: str = "hive-office",
        author_email: str = "office@hive-office.local",
    ) -> None:
        self._root = repo_path.absolute()
        self._repo = _open(self._root)
        self._index = self._repo.index
        self._interval = interval
        self._author = (author_name, author_email)
        # Guards the pending state below; held only for set/list operations.
        self._state = threading.Lock()
        self._paths: set[str] = set()
        self._full = False
        self._notes: list[Note] = []
        self._wake: Callable[[], None] | None = None
        # One commit at a time, whichever thread asks (run()'s worker, flush()).
        self._committing = threading.Lock()

    def _relative(self, path: Path | str) -> str:
        p = Path(os.path.normpath(path))
        if p.is_absolute():
            try:
                p = p.relative_to(self._root)
            except ValueError:
                p = p.resolve().relative_to(self._root.resolve())
        rel = p.as_posix()
        if rel == ".." or rel.startswith("../"):
            raise ValueError(f"{path} is outside the hive {self._root}")
        return "" if rel == "." else rel

    def touch(self, *paths: Path | str) -> None:
        """Mark paths changed (files or folders, absolute or relative to the hive)."""
        rels = [self._relative(p) for p in paths]
        with self._state:
            was_idle = not (self._paths or self._full)
            for rel in rels:
                if rel:
                    self._paths.add(rel)
                else:
                    self._full = True
            wake = self._wake if was_idle and rels else None
        if wake:
            wake()

    def note(self, category: str, detail: str = "", count: int = 1) -> None:
        """Record what happened, for the next commit's message."""
        with self._state:
            self._notes.append(Note(category, detail, count))

    @property
    def pending(self) -> bool:
        with self._state:
            return bool(self._paths or self._full)

    def commit_now(self, *, full: bool = False) -> str | None:
        """Commit the touched paths (all of the hive if `full`). Raises LockHeld when a live
        git lock is in the way; the changes then stay pending for the next call."""
        with self._committing:
            with self._state:
                paths, self._paths = self._paths, set()
                full, self._full = full or self._full, False
                notes, self._notes = self._notes, []
            if not (paths or full):
                # Notes without changes describe nothing the next commit will hold.
                return None
            try:
                return _with_lock_check(self._repo, lambda: self._attempt(paths, full, notes))
            except BaseException:
                with self._state:
                    self._paths |= paths
                    self._full = self._full or full
                    self._notes[:0] = notes
                raise

    def _attempt(self, paths: set[str], full: bool, notes: list[Note]) -> str | None:
        index = self._index
        # Picks up the index from disk only if someone else changed it (a user's `git add`).
        index.read(False)
        if full:
            index.add_all()
        else:
            for rel in sorted(paths):
                self._stage(index, rel)
        signature = pygit2.Signature(*self._author)
        return _commit_index(
            self._repo, index, signature, lambda changed: summarize(notes, changed)
        )

    def _stage(self, index: pygit2.Index, rel: str) -> None:
        if rel == ".git" or rel.startswith(".git/"):
            return
        full = self._root / rel
        try:
            mode: int | None = os.lstat(full).st_mode
        except (FileNotFoundError, NotADirectoryError):
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            if rel in index:
                index.remove(rel)  # was a file, is a folder now
            # add_all also drops entries whose files are gone.
            index.add_all([rel])
            return
        # Only kinds git stores; a socket or fifo is treated as absent. As in git, an
        # ignore rule keeps new files out but does not untrack a tracked one.
        if (
            mode is not None
            and (stat.S_ISREG(mode) or stat.S_ISLNK(mode))
            and (rel in index or not self._repo.path_is_ignored(rel))
        ):
            try:
                index.add(rel)
                return
            except (OSError, pygit2.GitError):
                if os.path.lexists(full):
                    raise
                # Deleted between lstat and add: fall through and unstage it.
        if rel in index:
            index.remove(rel)
        # It may have been a folder: everything under it goes too.
        index.remove_directory(rel)

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> str | None:
        """A full commit now, retrying with backoff while a git lock is held."""
        deadline = time.monotonic() + timeout
        delay = BACKOFF_FIRST
        while True:
            try:
                return self.commit_now(full=True)
            except LockHeld:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    async def run(self, stop: asyncio.Event) -> None:
        """Commit touched paths every `interval` s until `stop`, then a final full commit.

        Starts with a full sweep to catch what changed while the office was down.
        """
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def wake_up() -> None:
            loop.call_soon_threadsafe(wake.set)

        with self._state:
            self._wake = wake_up
        last_commit = -float("inf")
        next_full = time.monotonic()
        backoff = 0.0
        try:
            while not stop.is_set():
                if not self.pending and time.monotonic() < next_full:
                    wake.clear()
                    # Re-checked after clear(): a touch() in between would be lost otherwise.
                    if not self.pending:
                        await _first_of(stop, wake, next_full - time.monotonic())
                    continue
                # A short settle gathers a burst into one commit; `interval` spaces commits.
                settle = max(self._interval / 10, last_commit + self._interval - time.monotonic())
                if await _first_of(stop, None, backoff or settle):
                    break
                full = time.monotonic() >= next_full
                try:
                    await asyncio.to_thread(self.commit_now, full=full)
                except LockHeld as err:
                    backoff = min(max(backoff * 2, BACKOFF_FIRST), BACKOFF_MAX)
                    log.debug("%s; retrying in %.2f s", err, backoff)
                    continue
                except (pygit2.GitError, OSError):
                    backoff = BACKOFF_MAX
                    log.exception("commit failed; the changes stay pending")
                    continue
                backoff = 0.0
                last_commit = time.monotonic()
                if full:
                    next_full = last_commit + FULL_SWEEP_EVERY
        finally:
            with self._state:
                self._wake = None
        try:
            await asyncio.to_thread(self.flush)
        except (LockHeld, pygit2.GitError, OSError):
            # The files are safe on disk; the next start's full sweep commits them.
            log.exception("final commit failed")


async def _first_of(stop: asyncio.Event, other: asyncio.Event | None, timeout: float) -> bool:
    """Wait until `stop` or `other` is set or `timeout` passes. True if stop is set."""
    waiters = [asyncio.ensure_future(stop.wait())]
    if other is not None:
        waiters.append(asyncio.ensure_future(other.wait()))
    try:
        await asyncio.wait(waiters, timeout=max(timeout, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return stop.is_set()
