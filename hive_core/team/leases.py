"""File leases (issue 15): an agent says which files it is changing, and nobody else edits
them until it lets go, the lease expires, its task is done or the agent is archived.

A lease names a path in a git repository: the repository by its git common dir (the
same for every worktree of it, so two agents' copies of a file, at different absolute
paths, are one file here) and the path relative to the worktree's top folder, as an
fnmatch pattern (`*` crosses folders). A pattern also covers everything under it, so a
folder leases its contents. A path outside every repository is leased relative to `/`
with the repository `/`.

The rules are pure functions over `Lease` structs and a clock and the done tasks given
as values; the file (hive/leases.json, versioned by the committer through the hive
watcher), its lock and the repository lookup are the effects at the end of this module.
Expiry and a finished task are decided at check time, never by a sweep: a lease past its
time or of a done task holds nothing, and writers drop such leases when they rewrite the
file.
"""

from __future__ import annotations

import fcntl
import os
import posixpath
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from functools import cache, lru_cache
from pathlib import Path

import msgspec

from hive_core.errors import OfficeError
from hive_core.fsio import UnsafeFile, atomic_write, read_regular
from hive_core.paths import HivePaths
from hive_core.team import tasks

TTL_DEFAULT = "30m"
# A lease is a short claim on work in progress; a longer one is renewed by leasing again.
TTL_MAX_S = 8 * 3600
# What the file may hold: far above any real office, and a bound on what a hook reads.
LEASES_FILE_MAX = 1 << 20
REASON_MAX = 200
_TTL_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_MAGIC = re.compile(r"[*?[]")
OUTSIDE = "/"  # the repository of a path that is in none


def on_host(host: str, path: str) -> tuple[str, str]:
    """Where a remote desk's file is: `host:` and its absolute path there. The office
    cannot look into the host's repositories, so its leases are by path on that host
    (desks there conflict on the same file; local leases never meet them)."""
    return f"{host}:", posixpath.normpath(path).lstrip("/") or "*"


class Lease(msgspec.Struct, kw_only=True):
    holder: str
    # The repository's git common dir (a real path), or OUTSIDE.
    repo: str
    # Relative to the repository's top folder, "/"-separated; an fnmatch pattern.
    path: str
    taken: str  # ISO UTC
    expires: str  # ISO UTC
    reason: str = ""
    # Released when this task is done (the holder's task in progress when it leased).
    task: str | None = None


class LeaseFile(msgspec.Struct):
    leases: list[Lease] = []


class LeaseRefused(OfficeError):
    """The lease or release is refused; the message is the sentence to show."""


class BadLeases(OfficeError):
    """leases.json is not a lease file; it is never overwritten."""


# --- pure rules ----------------------------------------------------------------------------


def parse_ttl(text: str) -> int:
    """Seconds in `30m`, `2s`, `1h30m`; a ValueError saying what is accepted."""
    match = _TTL_RE.match(text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"--ttl {text!r} is not a duration; write it like 30m, 2h, 1h30m or 45s.")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if not 0 < total <= TTL_MAX_S:
        raise ValueError(
            f"--ttl must be between 1s and {TTL_MAX_S // 3600}h; renew a lease by leasing again."
        )
    return total


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def epoch(stamp: str) -> float:
    """`stamp` (ISO) as seconds; an unreadable stamp counts as long past."""
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return 0.0


def holds(lease: Lease, now: float, done: Collection[str]) -> bool:
    """Whether `lease` still holds: not expired and its task not done."""
    return epoch(lease.expires) > now and (lease.task is None or lease.task not in done)


def live(leases: Iterable[Lease], now: float, done: Collection[str]) -> list[Lease]:
    return [lease for lease in leases if holds(lease, now, done)]


def covers(pattern: str, rel: str) -> bool:
    """Whether the lease pattern covers the file `rel` (itself, or under it as a folder)."""
    return pattern == "*" or fnmatchcase(rel, pattern) or fnmatchcase(rel, pattern + "/*")


def holder_of(leases: Iterable[Lease], repo: str, rel: str, who: str) -> Lease | None:
    """The first of the (live) `leases` held by someone other than `who` covering `rel`."""
    for lease in leases:
        if lease.holder != who and lease.repo == repo and covers(lease.path, rel):
            return lease
    return None


def overlap(a: str, b: str) -> bool:
    """Whether some path is covered by both patterns (each also covering what is under it)."""
    a_under, b_under = _tokens(a + "/*"), _tokens(b + "/*")
    return _meet(_tokens(a), _tokens(b)) or _meet(a_under, _tokens(b)) or _meet(_tokens(a), b_under)


def shown(repo: str, path: str) -> str:
    """A leased path and its repository, as a person reads them."""
    if repo == OUTSIDE:
        return "/" + path
    if repo.endswith(":"):
        return f"{repo}/{path}"
    return f"{path} in {repo.removesuffix('/.git')}"


def refusal(lease: Lease) -> str:
    """The one sentence for a path another agent holds: the policy's and `hive lease`'s."""
    until = lease.expires.replace("T", " ").removesuffix("Z") + " UTC"
    # On one line whatever a hand edit of the file put there: the model reads this.
    reason = " ".join(lease.reason.split())[:REASON_MAX]
    why = f" ({reason})" if reason else ""
    return (
        f"{shown(lease.repo, lease.path)} is leased by {lease.holder} until {until}{why}. "
        f"Work on something else or ask {lease.holder} (`hive send --to {lease.holder} ...`); "
        "the manager or the person can break it with `hive lease break PATH`."
    )


def whole(pattern: str) -> bool:
    """Whether `pattern` names nothing but the whole tree: no plain character of its own
    beside wildcards, character classes and `/` (`*`, `**`, `*/*`, `?*`, `[a-z]*`, and
    `*`, what `/`, `.` and the top of a worktree are leased as). Such a lease would hold
    every file any other agent might edit."""
    return not any(
        token is not None and not token[0] and len(token[1]) == 1 and token[1] != _SLASH
        for token in _tokens(pattern)
    )


def too_wide(repo: str, pattern: str) -> str | None:
    """The sentence refusing a lease on the whole of a repository (or of the machine, or
    of a remote host), or None."""
    if not whole(pattern):
        return None
    where = {OUTSIDE: "the whole machine"}.get(repo) or (
        f"everything on {repo.removesuffix(':')}" if repo.endswith(":") else "the whole repository"
    )
    return (
        f"A lease on {shown(repo, pattern)} would cover {where} and block every other "
        "agent's edits; lease the paths you will edit (a file, a folder, or a pattern such "
        "as src/*.py)."
    )


def take(
    leases: Sequence[Lease],
    wanted: Sequence[tuple[str, str]],
    who: str,
    *,
    now: float,
    ttl: int,
    reason: str = "",
    task: str | None = None,
    done: Collection[str] = (),
) -> list[Lease]:
    """`leases` (dead ones dropped) with `who` holding each (repo, pattern) of `wanted`
    (renewed if it already holds that one); LeaseRefused with `refusal` if another's
    lease overlaps any of them, or `too_wide` for a pattern of the whole tree, and then
    nothing is taken."""
    for repo, pattern in wanted:
        if (why := too_wide(repo, pattern)) is not None:
            raise LeaseRefused(why)
    kept = live(leases, now, done)
    for repo, pattern in wanted:
        for lease in kept:
            if lease.holder != who and lease.repo == repo and overlap(lease.path, pattern):
                raise LeaseRefused(refusal(lease))
    mine = {(repo, pattern) for repo, pattern in wanted}
    kept = [
        lease for lease in kept if not (lease.holder == who and (lease.repo, lease.path) in mine)
    ]
    new = [
        Lease(
            holder=who,
            repo=repo,
            path=pattern,
            taken=iso(now),
            expires=iso(now + ttl),
            reason=reason[:REASON_MAX],
            task=task,
        )
        for repo, pattern in dict.fromkeys(wanted)
    ]
    return kept + new


def release(
    leases: Sequence[Lease],
    wanted: Sequence[tuple[str, str]],
    who: str,
    *,
    force: bool,
    now: float,
    done: Collection[str] = (),
) -> tuple[list[Lease], list[Lease]]:
    """(what is left, what was released) for `who` letting go of each (repo, pattern) in
    `wanted`, exactly as leased. `force`: whoever holds it (the manager's and the
    person's right; the caller checks it). LeaseRefused if one is not leased, or held by
    another without `force`; then nothing is released."""
    kept = live(leases, now, done)
    gone: list[Lease] = []
    for repo, pattern in wanted:
        found = [lease for lease in kept if lease.repo == repo and lease.path == pattern]
        if not found:
            raise LeaseRefused(
                f"{shown(repo, pattern)} is not leased (as written); `hive lease list` shows "
                "the leases."
            )
        others = [lease for lease in found if lease.holder != who]
        if others and not force:
            other = others[0]
            raise LeaseRefused(
                f"{shown(other.repo, other.path)} is leased by {other.holder}, not you; only "
                "the manager or the person can break it (`hive lease break PATH`)."
            )
        gone += found
    return [lease for lease in kept if lease not in gone], gone


def without_holder(leases: Sequence[Lease], who: str) -> list[Lease]:
    """What is left when `who` lets go of everything (the agent was archived)."""
    return [lease for lease in leases if lease.holder != who]


# Glob intersection: is there a string both patterns match? A token is None for "*" (any
# run, "/" included, as fnmatch), else (negated, chars): one character in `chars`, or
# not in it if negated. A plain character is (False, {c}); "?" is (True, {}).
_Token = tuple[bool, frozenset[str]] | None
_NONE: frozenset[str] = frozenset()
_SLASH = frozenset("/")


@lru_cache(maxsize=1024)
def _tokens(pattern: str) -> tuple[_Token, ...]:
    out: list[_Token] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if not out or out[-1] is not None:
                out.append(None)
        elif c == "?":
            out.append((True, _NONE))
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negated = body[:1] in ("!", "^") and len(body) > 1
            body = body[1:] if negated else body
            chars: set[str] = set()
            j = 0
            while j < len(body):
                if j + 2 < len(body) and body[j + 1] == "-":
                    # A range is expanded; one wider than a byte's worth is cut there.
                    start, stop = ord(body[j]), ord(body[j + 2])
                    chars.update(chr(k) for k in range(start, min(stop, start + 255) + 1))
                    j += 3
                else:
                    chars.add(body[j])
                    j += 1
            out.append((negated, frozenset(chars)))
            i = end
        else:
            out.append((False, frozenset(c)))
        i += 1
    return tuple(out)


def _one(a: tuple[bool, frozenset[str]], b: tuple[bool, frozenset[str]]) -> bool:
    """Whether two one-character tokens share a character."""
    (a_not, a_chars), (b_not, b_chars) = a, b
    if a_not and b_not:
        return True  # the alphabet is not finite
    if a_not:
        return bool(b_chars - a_chars)
    if b_not:
        return bool(a_chars - b_chars)
    return bool(a_chars & b_chars)


def _meet(a: tuple[_Token, ...], b: tuple[_Token, ...]) -> bool:
    @cache
    def go(i: int, j: int) -> bool:
        a_end, b_end = i == len(a), j == len(b)
        if a_end and b_end:
            return True
        if not a_end and a[i] is None:
            return go(i + 1, j) or (not b_end and go(i, j + 1))
        if not b_end and b[j] is None:
            return go(i, j + 1) or (not a_end and go(i + 1, j))
        if a_end or b_end:
            return False
        x, y = a[i], b[j]
        return x is not None and y is not None and _one(x, y) and go(i + 1, j + 1)

    return go(0, 0)


# --- effects: the file, its lock, the repositories -----------------------------------------


_decode = msgspec.json.Decoder(LeaseFile).decode


def load(path: Path) -> list[Lease]:
    """The leases in `path` ([] if there is none); BadLeases if it is not a lease file."""
    try:
        data = read_regular(path, LEASES_FILE_MAX)
    except FileNotFoundError:
        return []
    except (OSError, UnsafeFile) as e:
        raise BadLeases(f"{path} cannot be read ({e}); move it aside to start over.") from None
    try:
        return _decode(data).leases
    except msgspec.DecodeError as e:
        raise BadLeases(f"{path} is not a lease file ({e}); move it aside to start over.") from None


def save(path: Path, leases: Sequence[Lease]) -> None:
    data = msgspec.json.format(msgspec.json.encode(LeaseFile(list(leases))), indent=2) + b"\n"
    atomic_write(path, data)


@contextmanager
def locked(paths: HivePaths) -> Iterator[None]:
    """Hold the leases' write lock (leases.json is replaced by rename: the lock is a file
    of its own, outside git)."""
    fd = os.open(paths.leases_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def done_tasks(paths: HivePaths) -> frozenset[str]:
    """The ids of the ledger's done tasks; none if it cannot be read (a lease then lasts
    until it expires, never shorter)."""
    try:
        ledger = tasks.load_ledger(paths.tasks)
    except tasks.LedgerError:
        return frozenset()
    return frozenset(t.id for t in tasks.tasks_of(ledger) if t.status == "done")


def _common_dir(top: str) -> str | None:
    """The git common dir of the worktree whose top folder is `top`, or None."""
    dot_git = os.path.join(top, ".git")
    if os.path.isdir(dot_git):
        return os.path.realpath(dot_git)
    try:
        with open(dot_git, encoding="utf-8") as f:
            line = f.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not line.startswith("gitdir:"):
        return None
    git_dir = os.path.realpath(os.path.join(top, line.removeprefix("gitdir:").strip()))
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as f:
            return os.path.realpath(os.path.join(git_dir, f.read(4096).strip()))
    except FileNotFoundError:
        return git_dir  # a repository of its own (a submodule's)
    except (OSError, UnicodeDecodeError):
        return None


class Repositories:
    """Which repository holds a path: (git common dir, top folder), looked up by walking
    up from a folder to the first `.git`, and kept per folder (the hook asks per edit)."""

    CACHE_MAX = 4096

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, str] | None] = {}

    def of_folder(self, folder: str) -> tuple[str, str] | None:
        if folder in self._known:
            return self._known[folder]
        found: tuple[str, str] | None = None
        here = folder
        while True:
            if os.path.lexists(os.path.join(here, ".git")):
                common = _common_dir(here)
                found = (common, here) if common else None
                break
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
        if len(self._known) >= self.CACHE_MAX:
            self._known.clear()
        self._known[folder] = found
        return found

    def place(self, path: str) -> tuple[str, str]:
        """(repository, path relative to its top) of `path`, an absolute real path (a
        pattern may follow its real folders); a folder that is a worktree's top is
        that repository's "*"."""
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        found = self.of_folder(folder)
        if found is None:
            return OUTSIDE, path.lstrip("/") or "*"
        common, top = found
        rel = os.path.relpath(path, top)
        return common, "*" if rel == "." else rel


def resolve_pattern(raw: str, cwd: str) -> str:
    """`raw` (a path or a pattern, as typed) as an absolute path with its literal
    folders resolved as the kernel would (links followed), the pattern part kept."""
    path = os.path.normpath(os.path.join(cwd, os.path.expanduser(raw)))
    parts = path.split("/")
    first = next((i for i, part in enumerate(parts) if _MAGIC.search(part)), len(parts))
    literal = os.path.realpath("/".join(parts[:first]) or "/")
    rest = parts[first:]
    return os.path.join(literal, *rest) if rest else literal


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class LeaseView:
    """The leases as the hook sees them: leases.json, and the ledger's done tasks when a
    lease names a task, read again only when the file's (mtime, size, inode) changed. An
    unreadable lease file holds nothing (the CLI says why when it is next used)."""

    def __init__(self, paths: HivePaths) -> None:
        self.paths = paths
        self._leases: tuple[tuple[int, int, int] | None, list[Lease]] = (None, [])
        self._done: tuple[tuple[int, int, int] | None, frozenset[str]] = (None, frozenset())

    def live(self, now: float) -> list[Lease]:
        stamp = _stamp(self.paths.leases)
        if stamp != self._leases[0]:
            try:
                self._leases = (stamp, load(self.paths.leases) if stamp else [])
            except BadLeases:
                self._leases = (stamp, [])
        leases = self._leases[1]
        if not any(lease.task for lease in leases):
            return live(leases, now, ())
        stamp = _stamp(self.paths.tasks)
        if stamp != self._done[0]:
            self._done = (stamp, done_tasks(self.paths))
        return live(leases, now, self._done[1])


def drop_holder(paths: HivePaths, who: str) -> bool:
    """Release every lease `who` holds (it was archived); whether the file changed. An
    unreadable lease file is left as it is."""
    with locked(paths):
        try:
            held = load(paths.leases)
        except BadLeases:
            return False
        left = without_holder(held, who)
        if len(left) == len(held):
            return False
        save(paths.leases, left)
    return True
