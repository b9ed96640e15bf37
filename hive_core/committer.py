"""The only git writer of the hive: batched commits of the paths producers report.

Producers call `touch()` with what they changed and `note()` with what happened; a
commit stages exactly the touched paths (plus an occasional full sweep for changes
nobody reported), so a commit costs what changed, not the size of the hive.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from hive_core import gitsafe
from hive_core.errors import OfficeError
from hive_core.fsio import TEMP_PREFIX, UnsafeFile, atomic_write, open_regular
from hive_core.pace import no_pace
from hive_core.paths import HivePaths
from hive_core.text import stripped

log = logging.getLogger(__name__)

# The office's health component for what stops commits (office/wiring.py reports it).
COMMIT_COMPONENT = "commit"
# A lock this old that no process has open belongs to a crashed writer.
STALE_LOCK_AGE = 5.0
# Commits waiting on a live lock this long are a problem told to health (and doctor):
# longer than any git the person runs by hand holds one.
LOCK_REPORT_AFTER = 15.0
# Backstop for changes nobody touch()ed (an agent editing its memory by hand, say).
FULL_SWEEP_EVERY = 60.0
BACKOFF_FIRST = 0.05
BACKOFF_MAX = 2.0
# A commit that fails for another reason than a lock (a damaged repository, a full
# disk) is retried ever more slowly up to this, and reported once, not every retry.
FAILING_BACKOFF_MAX = 60.0
FLUSH_TIMEOUT = 10.0
# While touches keep coming (a routing burst), a commit waits until they pause for
# `interval` / COMMIT_QUIET_PARTS, but no longer than COMMIT_DEFER_MAX_S after the first:
# each commit also costs what the hive holds (its trees written, diffed against HEAD,
# the index written), so a burst committed in a few commits rather than one every
# `interval` leaves that much more CPU and GIL to the office's loop (the keys typed
# meanwhile). Once a burst ends, its last changes are committed within `interval`.
COMMIT_QUIET_PARTS = 2
COMMIT_DEFER_MAX_S = 4.0
# pygit2 has no gc: `git gc --auto` (packs loose objects, deltas the log's versions)
# runs this often, between commits; it does nothing when there is little to pack.
GC_EVERY = 600.0
GC_TIMEOUT = 600.0
# git's own default (6,700 loose objects) is ~27 MB of 4 KiB blocks of small messages.
GC_LOOSE_OBJECTS = 1000

# No file larger than this is committed: an agent can write any size into its folders
# (a 4 GiB sparse file took a commit ~50 s and put a 4 GiB blob in the history). Far
# above anything the office writes (a log segment is 256 KiB, a message file 400 KiB).
GIT_FILE_MAX = 8 << 20

# Temp files of atomic writes must never reach the history, whatever .gitignore says.
_EXCLUDE_RULE = f"{TEMP_PREFIX}*"
# The user's global excludes file must not decide what the audit trail keeps.
_EXCLUDES_FILE = "/dev/null"

# How a category's bare count reads in a summary ("route: 12 messages").
_UNITS = {"route": "message"}
_MAX_DETAILS = 3
_MAX_GROUPS = 5


class LockHeld(OfficeError):
    """A live git lock blocks the commit; nothing was lost, try again later."""

    def __init__(self, lock: Path) -> None:
        super().__init__(f"git lock held: {lock}")
        self.lock = lock


class RepoDamaged(OfficeError):
    """The repository is not in a state the office may commit on; the message is the
    sentence that tells the person what happened and what to do."""


@dataclass(frozen=True, slots=True)
class Note:
    category: str
    detail: str = ""
    count: int = 1
    # The paths this note accounts for: the message names the changed paths it leaves out
    # (a board edit committed with a routed message is named, not hidden behind "route").
    paths: frozenset[str] = frozenset()


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


# The layout below the hive, wherever the hive is: commit messages name hive-relative paths.
_LAYOUT = HivePaths(Path("/"))
_HIVE = os.fspath(_LAYOUT.hive)


def _path_group(path: str) -> str:
    """A path in a mailbox -> that mailbox's folder; other folders -> their top folder;
    top files -> their name."""
    place = _LAYOUT.locate(f"{_HIVE}/{path}")
    if place is not None and place.owner is not None:
        return _mailbox_group(place.owner)
    return path.partition("/")[0]


@functools.lru_cache(maxsize=1024)
def _mailbox_group(owner: str) -> str:
    return _LAYOUT.mailbox(owner).root.relative_to(_LAYOUT.hive).as_posix()


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


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
    """The one-line commit message: what producers said happened, then which changed files
    no note accounts for.

    Same-category notes merge: bare counts add up ("route: 12 messages"), details are
    listed once each with their count ("board: updated by michael (x2)").
    """
    # Every note of a routing pass carries the same set of the pass's paths: a burst is
    # thousands of notes sharing a few sets of thousands of paths, and one union over all
    # of them held the interpreter (the office's loop with it) for ~210 ms in one call.
    distinct = {id(n.paths): n.paths for n in notes}
    explained = frozenset().union(*distinct.values())
    rest = [p for p in changed_paths if p not in explained]
    parts = [_summarize_notes(notes)] if notes else []
    if rest:
        parts.append(_summarize_paths(rest))
    return "; ".join(parts) or "office: no changes"


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
        pygit2.init_repository(str(path), bare=False, initial_head=BRANCH)
        if created
        else pygit2.Repository(str(path))
    )
    _prepare(repo)
    return created


# --- what the office will not commit on ------------------------------------------

BRANCH = "main"


def _branch_ref(repo: pygit2.Repository) -> str | None:
    """The branch HEAD names (refs/heads/main), or None if HEAD is detached."""
    head = repo.lookup_reference("HEAD")
    if head.type == pygit2.enums.ReferenceType.SYMBOLIC:
        return str(head.target)
    return None


def _tip(repo: pygit2.Repository) -> str | None:
    """The commit id HEAD stands on (None for a missing branch or an unreadable HEAD)."""
    try:
        branch = _branch_ref(repo)
        if branch is None:
            return str(repo.head.target)
        ref = repo.references.get(branch)
        return None if ref is None else str(ref.target)
    except (pygit2.GitError, KeyError, ValueError):
        return None


def _last_logged(repo: pygit2.Repository, branch: str) -> str | None:
    """Where the branch's own reflog last recorded it. Deleting a branch with git also
    deletes this file; a ref file removed by hand leaves it behind."""
    try:
        lines = (Path(repo.path) / "logs" / branch).read_bytes().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        fields = line.split(b" ", 2)
        if len(fields) >= 2 and fields[1].strip(b"0"):
            return fields[1].decode("ascii", "replace")
    return None


def check_repo(repo: pygit2.Repository, known_head: str | None = None) -> str | None:
    """Why the office must not commit on `repo` now, as the sentence that tells the person
    what to do; None when committing is safe. `known_head` is the commit the caller
    last saw the branch on: a branch moved elsewhere since is refused, not overwritten."""
    hive = Path(repo.workdir or repo.path)
    git = f"git -C {hive}"
    paused = "Commits are paused until then; the files themselves are safe."
    try:
        branch = _branch_ref(repo)
        if branch is None:
            return (
                f"HEAD in {hive} is detached, not on the branch {BRANCH}, so commits would be "
                f"lost. Put it back with `{git} checkout {BRANCH}`. {paused}"
            )
        ref = repo.references.get(branch)
        target = None if ref is None else str(ref.target)
    except (pygit2.GitError, ValueError) as err:
        return f"the branch of {hive} cannot be read ({err}). {paused}"
    if target is None:
        last = known_head or _last_logged(repo, branch)
        if last is None:
            return None  # a new repository: its first commit is its root
        return (
            f"the branch {branch} in {hive} is gone (it last pointed at {last[:12]}); the "
            f"office will not start a new history by itself. Restore it with "
            f"`{git} update-ref {branch} {last}`, or start a new history with "
            f"`{git} update-ref -d {branch}` and restart the office. {paused}"
        )
    damage = _damage(repo, target)
    if damage is not None:
        return (
            f"the last commit {target[:12]} of {branch} {damage} in {hive}/.git (the "
            f"repository is damaged; `{git} fsck` lists what else is). Restore .git from a "
            f"backup, or start a new history with `{git} update-ref -d {branch}` and restart "
            f"the office. {paused}"
        )
    if known_head and target != known_head and not _descends(repo, target, known_head):
        return (
            f"the branch {branch} in {hive} was moved from {known_head[:12]} to "
            f"{target[:12]} outside the office; the office will not commit over that. Move it "
            f"back with `{git} update-ref {branch} {known_head}`, or restart the office to go "
            f"on from {target[:12]}. {paused}"
        )
    return None


# What reading a damaged object raises: libgit2 reports a loose object whose header claims
# more bytes than can be allocated (a garbage object that still inflates) as out of memory.
UNREADABLE = (pygit2.GitError, ValueError, KeyError, MemoryError)


def _damage(repo: pygit2.Repository, target: str) -> str | None:
    """What is wrong with the commit a branch names, as the words after "the last commit
    X of main": missing, unreadable (a garbage object), or standing on a tree or a parent
    the repository does not have. Only this commit's own objects are read (a commit is
    a few of them), not the history below it: git fsck is the person's to run."""
    try:
        commit = repo.get(target)
        if commit is None:
            return "is missing"
        if not isinstance(commit, pygit2.Commit):
            return f"is not a commit but a {commit.type_str}"
        tree_id, parent_ids = commit.tree_id, commit.parent_ids
    except UNREADABLE as err:
        return f"cannot be read ({err})"
    try:
        if not isinstance(repo.get(tree_id), pygit2.Tree):
            return f"names a tree {str(tree_id)[:12]} that is missing"
        for parent in parent_ids:
            if not isinstance(repo.get(parent), pygit2.Commit):
                return f"names a parent {str(parent)[:12]} that is missing"
    except UNREADABLE as err:
        return f"stands on objects that cannot be read ({err})"
    return None


def _descends(repo: pygit2.Repository, commit: str, ancestor: str) -> bool:
    """True if `commit` has `ancestor` in its history (someone committed on top of ours)."""
    try:
        return bool(repo.descendant_of(commit, ancestor))
    except UNREADABLE:
        return False


def _lock_paths(repo: pygit2.Repository) -> list[Path]:
    """Every lock a commit takes: the index, HEAD, and the branch HEAD points at."""
    git_dir = Path(repo.path)
    head = repo.lookup_reference("HEAD")
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock"]
    if head.type == pygit2.enums.ReferenceType.SYMBOLIC:
        locks.append(git_dir / f"{head.target}.lock")
    return locks


def lock_holder(path: Path) -> int | None:
    """The pid of a process we can see that has `path` open (Linux: /proc/*/fd), or None."""
    target = os.path.realpath(path)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except FileNotFoundError:
        # No /proc (macOS): age alone has to decide.
        return None
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
                    return int(pid)
            except OSError:
                continue
    return None


def held_lock(repo: pygit2.Repository) -> str | None:
    """Why commits wait on a git lock, as the sentence that tells the person what to do;
    None when none of a commit's locks is there."""
    try:
        locks = _lock_paths(repo)
    except (pygit2.GitError, ValueError, KeyError):
        locks = [Path(repo.path) / "index.lock"]
    for lock in locks:
        if not os.path.lexists(lock):
            continue
        pid = lock_holder(lock)
        if pid is None:
            return (
                f"git's lock {lock} is left by a git that did not finish; commits wait until "
                f"it is gone (the office removes it once it is {STALE_LOCK_AGE:g} s old and no "
                f"process has it open; without an office, `rm {lock}`). The files are safe."
            )
        return (
            f"git's lock {lock} is held open by process {pid} ({_command(pid)}); commits wait "
            f"until it is gone. If that is not a git you are running, end it (`kill {pid}`) "
            "and the office removes the lock and commits. The files are safe."
        )
    return None


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()[:200]
    except OSError:
        return "gone"
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return stripped(text, lines=False)[:80] or "unnamed"


def _remove_stale_locks(locks: Iterable[Path]) -> None:
    for lock in locks:
        try:
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if age > STALE_LOCK_AGE and lock_holder(lock) is None:
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


def _load_index(repo: pygit2.Repository) -> tuple[pygit2.Repository, pygit2.Index]:
    """The repository and its index, read from disk. The index is only git's cache of
    the last commit's tree plus what is staged: an unreadable one is replaced by one
    built from HEAD (the next full stage puts back what changed since)."""
    try:
        index = repo.index
        index.read(False)
        return repo, index
    except pygit2.GitError as err:
        path = Path(repo.path) / "index"
        log.warning("%s is unreadable (%s); rebuilding it from HEAD", path, err)
    path.unlink(missing_ok=True)
    # A fresh handle: the old one keeps the index it failed on.
    repo = _open(Path(repo.workdir or repo.path))
    index = repo.index
    head = _tip(repo)
    commit = repo.get(head) if head else None
    if isinstance(commit, pygit2.Commit):
        index.read_tree(commit.tree)
    index.write()
    return repo, index


def commit_all(repo_path: Path, message: str) -> str | None:
    """Stage everything not ignored and commit it if the tree changed (one attempt).
    Raises RepoDamaged, with what to do, when the repository must not be committed on."""
    repo, index = _load_index(_open(repo_path))
    signature = pygit2.Signature("hive-office", "office@hive-office.local")

    def attempt() -> str | None:
        refusal = check_repo(repo)
        if refusal:
            raise RepoDamaged(refusal)
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
        before_commit: Callable[[], object] | None = None,
        on_problem: Callable[[str], None] | None = None,
        on_ok: Callable[[], None] | None = None,
        gc_every: float | None = GC_EVERY,
        give_way: Callable[[], None] = no_pace,
    ) -> None:
        """`before_commit` runs on run()'s loop before each commit (the office rotates its
        log there); `on_problem(detail)` is called once per new reason commits fail and
        `on_ok()` when they work again, both on run()'s loop; `gc_every` None: no gc;
        `give_way` is called between two paths staged (pace.py)."""
        self._root = repo_path.absolute()
        self._root_str = os.path.normpath(self._root)
        self._repo, self._index = _load_index(_open(self._root))
        # The branch as this committer last saw it: a move by someone else is refused.
        self._head = _tip(self._repo)
        self._interval = interval
        self._author = (author_name, author_email)
        self.before_commit = before_commit
        self.on_problem = on_problem
        self.on_ok = on_ok
        self.gc_every = gc_every
        self._give_way = give_way
        self._problem: str | None = None
        # Guards the pending state below; held only for set/list operations.
        self._state = threading.Lock()
        self._paths: set[str] = set()
        self._full = False
        self._notes: list[Note] = []
        # When the pending changes began, and the last touch: a commit waits for a pause.
        self._pending_since = 0.0
        self._last_touch = 0.0
        self._wake: Callable[[], None] | None = None
        # One commit (or gc) at a time, whichever thread asks (run()'s worker, flush()).
        self._committing = threading.Lock()
        # Files over GIT_FILE_MAX left out of the commits, by path: their size.
        self._oversize: dict[str, int] = {}

    def _relative(self, path: Path | str) -> str:
        # A burst is thousands of absolute paths under the root: plain string work.
        plain = os.path.normpath(path)
        root = self._root_str
        if plain.startswith(root) and plain[len(root) : len(root) + 1] in ("", "/"):
            return plain[len(root) + 1 :]
        p = Path(plain)
        if p.is_absolute():
            try:
                p = p.relative_to(self._root)
            except ValueError:
                p = p.resolve().relative_to(self._root.resolve())
        rel = p.as_posix()
        if rel == ".." or rel.startswith("../"):
            raise ValueError(f"{path} is outside the hive {self._root}")
        return "" if rel == "." else rel

    def touch(self, *paths: Path | str) -> frozenset[str]:
        """Mark paths changed (files or folders, absolute or relative to the hive); their
        hive-relative forms, for the note that accounts for them (`note(explains=...)`)."""
        rels = frozenset(self._relative(p) for p in paths)
        now = time.monotonic()
        with self._state:
            was_idle = not (self._paths or self._full)
            if rels:
                self._last_touch = now
                if was_idle:
                    self._pending_since = now
            for rel in rels:
                if rel:
                    self._paths.add(rel)
                else:
                    self._full = True
            wake = self._wake if was_idle and rels else None
        if wake:
            wake()
        return rels

    def note(
        self,
        category: str,
        detail: str = "",
        count: int = 1,
        explains: frozenset[str] = frozenset(),
    ) -> None:
        """Record what happened, for the next commit's message; `explains`: the paths it
        changed, as `touch` returned them."""
        with self._state:
            self._notes.append(Note(category, detail, count, explains))

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
        refusal = check_repo(self._repo, self._head)
        if refusal:
            raise RepoDamaged(refusal)
        index = self._index
        try:
            # Picks up the index from disk only if someone else changed it (`git add`).
            index.read(False)
        except pygit2.GitError:
            self._repo, index = self._index_rebuilt()
            full = True
        if full:
            self._stage_folder(index, "")
        else:
            for rel in sorted(paths):
                self._give_way()
                self._stage(index, rel)
        signature = pygit2.Signature(*self._author)
        made = _commit_index(
            self._repo, index, signature, lambda changed: summarize(notes, changed)
        )
        self._head = made or _tip(self._repo)
        return made

    def _index_rebuilt(self) -> tuple[pygit2.Repository, pygit2.Index]:
        self._repo, self._index = _load_index(self._repo)
        return self._repo, self._index

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
            self._stage_folder(index, rel)
            return
        self._oversize.pop(rel, None)
        if mode is not None and stat.S_ISREG(mode) and self._too_big(index, rel):
            return  # never read; the last committed version, if any, stays
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
                if stat.S_ISREG(mode) and os.path.lexists(full):
                    # libgit2 gives up on a file that grows while it reads it (the log,
                    # appended to as we commit): commit what it holds now instead.
                    if self._stage_snapshot(index, rel, full, mode):
                        return
                elif os.path.lexists(full):
                    raise
                # Deleted (or made a FIFO) between lstat and add: unstage it.
        if rel in index:
            index.remove(rel)
        # It may have been a folder: everything under it goes too.
        index.remove_directory(rel)

    def _stage_folder(self, index: pygit2.Index, rel: str) -> None:
        """Everything under a folder ("" for the hive); add_all also drops entries whose
        files are gone. If a file in it grows while libgit2 reads it, add_all gives up
        on the whole folder, and it would read a file over GIT_FILE_MAX whole: the
        folder's entries are then staged one by one."""
        prefix = f"{rel}/" if rel else ""
        # Found again below if they are still there.
        for left_out in [p for p in self._oversize if p.startswith(prefix)]:
            del self._oversize[left_out]
        if not self._holds_oversize(rel):
            try:
                index.add_all([rel] if rel else None)
                return
            except pygit2.GitError:
                pass
        names = set(os.listdir(self._root / rel))
        names |= {
            e.path[len(prefix) :].split("/", 1)[0] for e in index if e.path.startswith(prefix)
        }
        for name in sorted(names):
            self._stage(index, f"{prefix}{name}")

    def _too_big(self, index: pygit2.Index, rel: str) -> bool:
        """Whether the file at `rel` is left out for its size (and noted as such). One
        that is ignored and untracked is left out anyway, and not noted."""
        try:
            size = os.lstat(self._root / rel).st_size
        except OSError:
            return False
        if size <= GIT_FILE_MAX or (rel not in index and self._repo.path_is_ignored(rel)):
            return False
        self._oversize[rel] = size
        return True

    def _holds_oversize(self, rel: str) -> bool:
        """Whether a file under the folder `rel` is over GIT_FILE_MAX (its .git aside):
        sizes from lstat, links not followed, no file read."""
        stack = [self._root / rel]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if not (entry.name == ".git" and Path(entry.path).parent == self._root):
                            stack.append(Path(entry.path))
                    elif (
                        entry.is_file(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_size > GIT_FILE_MAX
                    ):
                        return True
                except OSError:
                    continue
        return False

    def oversize_problem(self) -> str | None:
        """The files left out of the commits for their size, as the sentence for health."""
        if not self._oversize:
            return None
        named = [f"{rel} ({_mib(size)})" for rel, size in sorted(self._oversize.items())]
        return (
            f"{_plural(len(named), 'file')} over {_mib(GIT_FILE_MAX)} not committed: "
            f"{_capped(named, _MAX_DETAILS, ', ')}. They stay on disk, out of the hive's "
            "history; delete them or move them out of the hive (large files belong in a "
            "desk's worktree), and the next commit takes what is left there."
        )

    def _stage_snapshot(self, index: pygit2.Index, rel: str, full: Path, mode: int) -> bool:
        try:
            fd = open_regular(full)
        except UnsafeFile:
            # Swapped for a FIFO (or a link) since the lstat: never waited on; a kind
            # git does not store is absent.
            return False
        with open(fd, "rb") as f:
            # Grown past the cap since the lstat: left out like any file that size.
            data = f.read(GIT_FILE_MAX + 1)
        if len(data) > GIT_FILE_MAX:
            self._oversize[rel] = len(data)
            return True
        # A line being appended is taken whole by the next commit.
        blob = self._repo.create_blob(data)
        kind = pygit2.enums.FileMode.BLOB_EXECUTABLE if mode & 0o100 else pygit2.enums.FileMode.BLOB
        index.add(pygit2.IndexEntry(rel, blob, kind))
        return True

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

    def collect_garbage(self) -> bool:
        """`git gc --auto` if git is installed, never while a commit is being made.
        False if it could not run."""
        git = shutil.which("git")
        if git is None:
            return False
        # The hive's own settings decide, not the person's global git config; agents can
        # write the hive's .git too, so its hooks (pre-auto-gc) never run (gitsafe).
        env = gitsafe.environment({k: v for k, v in os.environ.items() if not k.startswith("GIT_")})
        env["GIT_CONFIG_GLOBAL"] = os.devnull
        # Detached, gc would run on while the next commit is made.
        cmd = gitsafe.argv(
            [
                *("-C", str(self._root)),
                *("-c", "gc.autoDetach=false", "-c", f"gc.auto={GC_LOOSE_OBJECTS}"),
                *("gc", "--auto", "--quiet"),
            ],
            git,
        )
        with self._committing:
            try:
                result = subprocess.run(cmd, env=env, capture_output=True, timeout=GC_TIMEOUT)
            except (OSError, subprocess.TimeoutExpired) as err:
                log.warning("git gc did not finish: %s", err)
                return False
        if result.returncode != 0:
            log.warning("git gc failed: %s", result.stderr.decode(errors="replace").strip())
            return False
        return True

    def _failed(self, detail: str) -> None:
        """Said once per new reason, however often the retry fails the same way."""
        if detail == self._problem:
            return
        self._problem = detail
        log.error("commit failed: %s", detail)
        if self.on_problem is not None:
            self.on_problem(detail)

    def _worked(self) -> None:
        if self._problem is None:
            return
        self._problem = None
        log.warning("commits work again")
        if self.on_ok is not None:
            self.on_ok()

    def _settle(self, last_commit: float) -> float:
        """How long the next commit waits yet: a short settle gathers a burst's first
        changes, `interval` spaces commits, and while touches keep coming the commit
        waits for them to pause (COMMIT_DEFER_MAX_S at most)."""
        with self._state:
            last_touch, since = self._last_touch, self._pending_since
        paused = min(last_touch + self._interval / COMMIT_QUIET_PARTS, since + COMMIT_DEFER_MAX_S)
        due = max(last_commit + self._interval, since + self._interval / 10, paused)
        return due - time.monotonic()

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
        next_gc = time.monotonic() + (self.gc_every or 0.0)
        backoff = 0.0
        # Since when commits have waited on a live lock (None: they do not).
        locked_since: float | None = None
        try:
            while not stop.is_set():
                if self.gc_every is not None and time.monotonic() >= next_gc:
                    await asyncio.to_thread(self.collect_garbage)
                    next_gc = time.monotonic() + self.gc_every
                    continue
                if not self.pending and time.monotonic() < next_full:
                    wake.clear()
                    # Re-checked after clear(): a touch() in between would be lost otherwise.
                    if not self.pending:
                        until = min(next_full, next_gc) if self.gc_every is not None else next_full
                        await _first_of(stop, wake, until - time.monotonic())
                    continue
                if await _first_of(stop, None, backoff or self._settle(last_commit)):
                    break
                if not backoff and self._settle(last_commit) > 0:
                    continue  # touched again meanwhile: the burst goes on
                full = time.monotonic() >= next_full
                if self.before_commit is not None:
                    self.before_commit()
                try:
                    await asyncio.to_thread(self.commit_now, full=full)
                except LockHeld as err:
                    backoff = min(max(backoff * 2, BACKOFF_FIRST), BACKOFF_MAX)
                    log.debug("%s; retrying in %.2f s", err, backoff)
                    now = time.monotonic()
                    locked_since = locked_since if locked_since is not None else now
                    if now - locked_since >= LOCK_REPORT_AFTER:
                        self._failed(held_lock(self._repo) or f"{err}; commits wait for it")
                    continue
                except RepoDamaged as err:
                    backoff = min(max(backoff * 2, BACKOFF_MAX), FAILING_BACKOFF_MAX)
                    self._failed(str(err))
                    continue
                except (pygit2.GitError, OSError) as err:
                    backoff = min(max(backoff * 2, BACKOFF_MAX), FAILING_BACKOFF_MAX)
                    self._failed(
                        f"commits fail ({err}); the changes are safe on disk and stay pending. "
                        f"`git -C {self._root} fsck` says whether the repository is damaged."
                    )
                    continue
                backoff = 0.0
                locked_since = None
                left_out = self.oversize_problem()
                if left_out:
                    self._failed(left_out)
                else:
                    self._worked()
                last_commit = time.monotonic()
                if full:
                    next_full = last_commit + FULL_SWEEP_EVERY
        finally:
            with self._state:
                self._wake = None
        # The files are safe on disk either way; the next start's full sweep commits them.
        try:
            await asyncio.to_thread(self.flush)
        except RepoDamaged as err:
            log.error("no final commit: %s", err)
        except LockHeld:
            log.error("no final commit: %s", held_lock(self._repo) or "a git lock is held")
        except (pygit2.GitError, OSError):
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
