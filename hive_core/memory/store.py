"""memory.db: the search index over the hive (SQLite WAL, FTS5, optional vectors).

The index is a cache: every entry comes from a hive file (`Entry.path`) and
`reindex()` rebuilds it from the hive at any time, so a lost or outdated database
costs a rebuild, never knowledge.

Scope is decided inside every query that reads entries: each ranked arm (porter
words, vectors) applies the caller's scope before its ORDER BY ... LIMIT, so a caller
with three entries in an index of 100,000 still gets all three (the gap of a filter
applied after a top-k cut). The caller is refused before any SQL runs when it is empty
or not on the roster. The person's `all` is every scope (no predicate at all): the person
sees the team's notes, and only agents are kept out of each other's. Exact filters
(`Filters`: tags, source, external id) are a second predicate beside the scope's; with
no query text they list what they admit newest first, each driven by an index.

Every query reads a bounded number of rows. A query term no entry holds as a word is
looked up as a piece of the words in the vocabulary (a trigram index over distinct
words, not over every entry) and stands for the PIECE_WORDS shortest words holding it.
The rarest terms, each held by fewer than COMMON_DF entries and RANKED_MAX in all, are
ranked by bm25 over their matches. A query whose every term is common is not: bm25
walks each term's whole posting list to weigh it (tens of milliseconds per term at
100,000 entries), so such a query ranks only the newest WINDOW in-scope entries that
hold any of its terms, by how many of the terms each holds. The scope of that window is
chosen inside the full-text match (each row carries its readers as `acl` tokens), and
the scope predicate still decides every row that is returned.

memory.db is a cache and is treated as one: a file that is not a database, truncated or
corrupt, or anything but a regular file in its place, is moved aside (a file the office
made is removed; anything else is renamed, never deleted) and the index is rebuilt from
the hive, on open or when a query meets the damage. The database and its -wal/-shm are
mode 0600. A store may be used from any thread: one connection, serialised by a lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import math
import os
import re
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, ParamSpec, TypeVar

import msgspec

from hive_core.config import load_office
from hive_core.errors import OfficeError
from hive_core.memory import embed, sources
from hive_core.memory.entry import (
    SOURCES,
    Changes,
    Entry,
    Scope,
    hive_relative,
    now_iso,
)
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN

SearchScope = Literal["own", "office", "all"]
Mode = Literal["keyword", "semantic", "hybrid"]

# Bump when the tables change: an old database is dropped and rebuilt from the hive.
SCHEMA_VERSION = "3"
# Candidates each ranked arm hands to the fusion; deeper lists change little in RRF.
ARM_DEPTH = 50
# The usual reciprocal rank fusion constant (Cormack et al.): damps the head of each list.
RRF_K = 60
EMBED_BATCH = 64
# Row ids looked up in one statement (SQLite bounds a statement's parameters).
IDS_AT_ONCE = 500
# A query term in at least this many entries is "common": scoring every entry that holds
# it is what makes an OR query slow at 100k entries, and its low IDF adds little to the
# ranking. Common terms only select candidates when the query has no rarer term.
COMMON_DF = 1000
# The matches bm25 ranks in all: the rarest terms are taken until their counts reach it.
RANKED_MAX = 3000
# The terms a window is ranked by (the rarest): each costs a walk over the window.
WINDOW_TERMS = 3
# How many of the newest in-scope entries a query of only common terms ranks. The walk
# that finds them grows with it and with how sparse the caller's scope is: at 100,000
# entries and one agent's own scope (2.5% of them), 100 keeps such a query near 5 ms of
# CPU and 200 takes 6.5 ms (bench_memory.py --common).
WINDOW = 100
# How many words of the vocabulary a piece of a word stands for (the shortest first).
PIECE_WORDS = 8

# Query words that match most of any English text: they make an OR query slow and add
# nothing to its ranking. Kept only when a query has nothing else.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)
_WORD = re.compile(r"\w+")


class MemoryStoreError(OfficeError):
    """A memory operation cannot be done; the message says why and what to do."""


class CallerRefused(MemoryStoreError):
    """The caller is empty or not a member of the office: nothing is read or written."""


class NotAllowed(MemoryStoreError):
    """The caller is known but may not do this (promote by a non-manager)."""


class NotFound(MemoryStoreError):
    """No entry has that id."""


class Hit(msgspec.Struct, kw_only=True, frozen=True):
    """A search result: the entry, its id and its fused score (higher is better; 0 for
    a listing by filters alone, which is newest first)."""

    id: str
    score: float
    entry: Entry


class Filters(msgspec.Struct, kw_only=True, frozen=True):
    """Exact conditions on an entry, all of which must hold: every tag among its tags,
    its source, its external id. With no query text they list entries newest first."""

    tags: tuple[str, ...] = ()
    source: str | None = None
    external_id: str | None = None

    @property
    def empty(self) -> bool:
        return not self.tags and self.source is None and self.external_id is None


# --- pure query building ------------------------------------------------------------------


def query_terms(query: str) -> list[str]:
    """The query's distinct lower-case words, stopwords dropped unless nothing else is left."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    content = [w for w in words if w not in STOPWORDS]
    return content or words


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def words_match(terms: Sequence[str]) -> str:
    """FTS5 MATCH for any of `terms` in an entry's text or tags (`acl` holds readers, never
    words): an added or dropped word still matches and bm25 ranks the entry sharing the
    most terms first."""
    return "{text tags} : (" + " OR ".join(_phrase(t) for t in terms) + ")"


def pieces(df: dict[str, int]) -> list[str]:
    """The query terms no entry holds as a word, long enough to be looked for as a piece
    of a word (a trigram needs three characters)."""
    return [t for t, n in df.items() if n == 0 and len(t) >= 3]


def words_of(text: str) -> set[str]:
    """The distinct words of a text as the vocabulary keeps them: lower case, `_` kept, so
    an identifier is one word whose pieces can be looked up."""
    return set(_WORD.findall(text.lower()))


def rarest(df: dict[str, int]) -> tuple[list[str], bool]:
    """(the terms an arm ranks, whether they are all common), from each term's count of
    entries (capped at COMMON_DF): the rarest terms under COMMON_DF while their counts
    stay within RANKED_MAX, or when no term is under COMMON_DF, the WINDOW_TERMS rarest
    that some entry holds. Rare terms decide a ranking; common ones add little but cost."""
    known = sorted((n, t) for t, n in df.items() if n > 0)
    rare: list[str] = []
    total = 0
    for n, term in known:
        if n >= COMMON_DF or (rare and total + n > RANKED_MAX):
            break
        rare.append(term)
        total += n
    return (rare, False) if rare else ([t for _, t in known[:WINDOW_TERMS]], True)


def scope_predicate(scope: SearchScope) -> str:
    """The SQL that admits exactly the rows `scope` allows, over alias `e`.

    Binds :caller and :member (",caller,"). Always bound, never conditional on the
    caller being non-empty: an id that matches nothing reads nothing.
    """
    own = "(e.scope = 'own' AND e.owner = :caller)"
    office = (
        "(e.scope = 'office' AND (e.participants IS NULL OR instr(e.participants, :member) > 0))"
    )
    return {"own": own, "office": office, "all": f"({own} OR {office})"}[scope]


def reads_everything(who: str, scope: SearchScope) -> bool:
    """The person's `all` is every scope, agents' private memory included (the person
    sees the team's notes; only agents are kept out of each other's)."""
    return who == HUMAN and scope == "all"


def filter_predicate(filters: Filters) -> tuple[str, dict[str, str]]:
    """(SQL over alias `e` that admits exactly the rows `filters` allow, its parameters).
    Tags are stored space-separated, so a tag matches only as a whole tag. ValueError for
    an unknown source or a tag that is empty or holds a space."""
    clauses = ["1"]
    params: dict[str, str] = {}
    if filters.source is not None:
        if filters.source not in SOURCES:
            raise ValueError(f"unknown source {filters.source!r}: {', '.join(SOURCES)}")
        clauses.append("e.source = :f_source")
        params["f_source"] = filters.source
    if filters.external_id is not None:
        clauses.append("e.external_id = :f_external_id")
        params["f_external_id"] = filters.external_id
    for i, tag in enumerate(filters.tags):
        if not tag or tag != "".join(tag.split()):
            raise ValueError(f"a tag is one word with no spaces, not {tag!r}")
        clauses.append(f"instr(' ' || e.tags || ' ', :f_tag{i}) > 0")
        params[f"f_tag{i}"] = f" {tag} "
    return " AND ".join(clauses), params


def _hex_id(who: str) -> str:
    # Agent ids hold '-', a token separator: hex makes each reader one token. The q's
    # around it end the token in a letter the porter stemmer strips from no suffix, so
    # two readers' tokens never stem alike.
    return who.encode().hex()


def acl_tokens(owner: str, scope: Scope, participants: Sequence[str]) -> str:
    """The `acl` column of an entry: one token per way a caller may read it."""
    if scope == "own":
        return f"qo{_hex_id(owner)}q"
    if participants:
        return " ".join(f"qm{_hex_id(p)}q" for p in participants)
    return "qaq"


def acl_match(scope: SearchScope, caller: str) -> str:
    """The FTS5 expression on `acl` that admits what `scope_predicate` admits."""
    who = _hex_id(caller)
    own = [f'"qo{who}q"']
    office = ['"qaq"', f'"qm{who}q"']
    tokens = {"own": own, "office": office, "all": own + office}[scope]
    return "acl : (" + " OR ".join(tokens) + ")"


def rank_window(
    candidates: Sequence[tuple[str, int]], holders: Sequence[set[str]], depth: int
) -> list[str]:
    """Rank a window of entries (id, text length) for a query of common terms, given the
    ids holding each term: most weight of terms held first (a term held by fewer of the
    window weighs more), then the shorter text, then the id (the same order after any
    rebuild)."""
    n = len(candidates)
    weights = [(ids, math.log(1 + n / len(ids))) for ids in holders if ids]
    scored = [
        (-sum(w for ids, w in weights if key in ids), length, key) for key, length in candidates
    ]
    return [key for _, _, key in sorted(scored)[:depth]]


def fuse(rankings: Iterable[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: sum of 1/(k + rank) over the lists, best first; ties go by
    key, so the order never depends on the order rows were inserted in."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


# --- the schema ----------------------------------------------------------------------------

_SOURCES_SQL = ", ".join(f"'{s}'" for s in SOURCES)
_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entries(
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL CHECK (source IN ({_SOURCES_SQL})),
    external_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    scope TEXT NOT NULL CHECK (scope IN ('own', 'office')),
    participants TEXT CHECK (participants IS NULL OR scope = 'office'),
    tags TEXT NOT NULL,
    text TEXT NOT NULL,
    path TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    acl TEXT NOT NULL,
    UNIQUE (source, external_id)
);
CREATE INDEX entries_path ON entries(path);
CREATE INDEX entries_owner ON entries(owner, updated_at);
CREATE INDEX entries_external ON entries(external_id);
CREATE INDEX entries_source ON entries(source, updated_at);
CREATE TABLE entry_tags(
    tag TEXT NOT NULL,
    rid INTEGER NOT NULL REFERENCES entries(rid) ON DELETE CASCADE,
    PRIMARY KEY (tag, rid)) WITHOUT ROWID;
CREATE INDEX entry_tags_rid ON entry_tags(rid);
CREATE VIRTUAL TABLE words USING fts5(
    text, tags, acl, content='entries', content_rowid='rid',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TABLE vocabulary(vid INTEGER PRIMARY KEY, word TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE vocabulary_grams USING fts5(
    word, content='vocabulary', content_rowid='vid', tokenize='trigram');
CREATE TABLE vectors(
    rid INTEGER PRIMARY KEY REFERENCES entries(rid) ON DELETE CASCADE,
    vec BLOB NOT NULL);
CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN
    INSERT INTO words(rowid, text, tags, acl) VALUES (new.rid, new.text, new.tags, new.acl);
END;
CREATE TRIGGER vocabulary_ai AFTER INSERT ON vocabulary BEGIN
    INSERT INTO vocabulary_grams(rowid, word) VALUES (new.vid, new.word);
END;
CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN
    INSERT INTO words(words, rowid, text, tags, acl)
        VALUES ('delete', old.rid, old.text, old.tags, old.acl);
END;
CREATE TRIGGER entries_au AFTER UPDATE ON entries BEGIN
    INSERT INTO words(words, rowid, text, tags, acl)
        VALUES ('delete', old.rid, old.text, old.tags, old.acl);
    INSERT INTO words(rowid, text, tags, acl) VALUES (new.rid, new.text, new.tags, new.acl);
    DELETE FROM vectors WHERE rid = old.rid AND old.text IS NOT new.text;
END;
CREATE TRIGGER entries_tags_au AFTER UPDATE OF tags ON entries
WHEN old.tags IS NOT new.tags BEGIN
    DELETE FROM entry_tags WHERE rid = old.rid;
END;
"""
# Every table a schema ever had (grams: schema 1's trigram index over every entry), so
# a change of schema drops them all.
_TABLES = (
    "entry_tags",
    "entries",
    "words",
    "grams",
    "vocabulary",
    "vocabulary_grams",
    "vectors",
    "meta",
)

_COLUMNS = (
    "id, source, external_id, owner, scope, participants, tags, text, path, created_at, updated_at"
)
# Upsert by (source, external_id): new content replaces old. An identical row is left
# alone so its FTS rows and its vector are not rewritten for nothing.
_UPSERT = f"""
INSERT INTO entries({_COLUMNS}, acl) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(source, external_id) DO UPDATE SET
    owner = excluded.owner, scope = excluded.scope, participants = excluded.participants,
    tags = excluded.tags, text = excluded.text, path = excluded.path,
    created_at = excluded.created_at, updated_at = excluded.updated_at, acl = excluded.acl
WHERE entries.owner IS NOT excluded.owner OR entries.scope IS NOT excluded.scope
    OR entries.participants IS NOT excluded.participants OR entries.tags IS NOT excluded.tags
    OR entries.text IS NOT excluded.text OR entries.path IS NOT excluded.path
"""


def _row(entry: Entry) -> tuple[str | None, ...]:
    participants = "," + ",".join(entry.participants) + "," if entry.participants else None
    return (
        entry.id,
        entry.source,
        entry.external_id,
        entry.owner,
        entry.scope,
        participants,
        " ".join(entry.tags),
        entry.text,
        entry.path,
        entry.created_at,
        entry.updated_at,
        acl_tokens(entry.owner, entry.scope, entry.participants),
    )


def _entry(row: sqlite3.Row) -> Entry:
    participants = row["participants"]
    return Entry(
        source=row["source"],
        external_id=row["external_id"],
        owner=row["owner"],
        scope=row["scope"],
        text=row["text"],
        path=row["path"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        tags=tuple(row["tags"].split()),
        participants=tuple(p for p in participants.split(",") if p) if participants else (),
    )


class DatabaseDamaged(OfficeError):
    """memory.db cannot be used as it is; the message says why."""


# SQLite's primary result codes for a damaged file (an extended code keeps them in its
# low byte): SQLITE_CORRUPT and SQLITE_NOTADB.
_DAMAGE_CODES = frozenset({11, 26})
_HEADER = b"SQLite format 3\x00"


def is_damage(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _DAMAGE_CODES


def header_problem(head: bytes, size: int, wal_size: int) -> str | None:
    """What is wrong with a database file from its first 100 bytes and its size, if
    anything a glance can tell (pure). An empty file is a new database. Without a WAL the
    file is the whole database, so one shorter than its header says was truncated."""
    if size == 0:
        return None
    if size < 100 or not head.startswith(_HEADER):
        return "it is not a SQLite database"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    # The page count in the header is valid only when its change counter says so.
    valid = head[24:28] == head[92:96] and pages > 0
    if page < 512 or page & (page - 1):
        return "its header is damaged"
    if valid and wal_size == 0 and size < pages * page:
        return f"it is truncated ({size} of {pages * page} bytes)"
    return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


def _companions(db: Path) -> list[Path]:
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


def inspect_files(db: Path) -> str | None:
    """Why memory.db (or its -wal/-shm) cannot be opened as it is, if it cannot. Makes
    the regular files the office's own mode (0600) on the way."""
    sizes = []
    for path in _companions(db):
        try:
            st = path.lstat()
        except FileNotFoundError:
            sizes.append(0)
            continue
        if not stat.S_ISREG(st.st_mode):
            return f"{path.name} is {_kind(st.st_mode)}"
        if stat.S_IMODE(st.st_mode) != 0o600:
            # Another user's file stays as it is; opening it will say what is wrong.
            with contextlib.suppress(PermissionError):
                os.chmod(path, 0o600)
        sizes.append(st.st_size)
    if not db.exists():
        return None
    return header_problem(_head(db), sizes[0], sizes[1])


# memory.db's descriptor for reading its header, one per file, kept open for the
# process's life. Closing any descriptor of a file drops every POSIX lock the process
# holds on it, SQLite's too: the office's connection would lose its read lock, and the
# next process to close a connection, believing itself the last, would checkpoint and
# delete the -wal and -shm under the office, whose later writes no other process sees.
_heads: dict[Path, int] = {}
_heads_lock = threading.Lock()


def _head(db: Path) -> bytes:
    """memory.db's first 100 bytes, read through the kept descriptor (a new one when the
    file was replaced: the old one is another file's, whose locks do not matter)."""
    with _heads_lock:
        now = os.stat(db)
        fd = _heads.get(db)
        if fd is not None:
            held = os.fstat(fd)
            if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
                os.close(fd)
                fd = None
        if fd is None:
            fd = _heads[db] = os.open(db, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        return os.pread(fd, 100, 0)


def discard(db: Path) -> list[str]:
    """Clear the way for a new memory.db; what was done, one line each. A regular file
    is the office's own cache and is removed; anything else (a folder, a symlink) was put
    there by someone else and is renamed aside, never deleted."""
    done = []
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for path in _companions(db):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            path.unlink()
            done.append(f"removed the damaged {path.name}")
            continue
        aside = path.with_name(f"{path.name}.moved-{stamp}-{os.getpid()}")
        if aside.exists() or aside.is_symlink():
            raise DatabaseDamaged(f"{aside} is in the way; move {path} aside by hand")
        path.rename(aside)
        done.append(f"moved {_kind(st.st_mode)} at {path.name} aside to {aside.name}")
    return done


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _create(db: Path) -> None:
    """Create memory.db empty with mode 0600 (SQLite would make it 0644, and its -wal and
    -shm take the database's mode)."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))


@contextmanager
def _open_lock(paths: HivePaths) -> Iterator[None]:
    # One opener or rebuilder at a time: the office and a CLI may meet the same damage at
    # once, and the second must not remove the database the first has just rebuilt.
    paths.run.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.memory_lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


P = ParamSpec("P")
R = TypeVar("R")


def _serialised(method: Callable[P, R]) -> Callable[P, R]:
    """One thread at a time on the connection; a query that meets a damaged database
    rebuilds it from the hive and runs again once."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        store = args[0]
        assert isinstance(store, MemoryStore)
        with store._lock:
            try:
                return method(*args, **kwargs)
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                store._recover(str(exc))
            return method(*args, **kwargs)

    return run


class MemoryStore:
    """The index of one office. Open it with `open_store(paths)`; close it (or use `with`).

    Safe to share between threads (the app searches from a worker): one connection,
    opened with check_same_thread=False, used under a lock. `recovered` says what was
    done if the database was found damaged and rebuilt (for the caller to log).
    """

    def __init__(self, paths: HivePaths, callers: frozenset[str]) -> None:
        self.paths = paths
        # The roster (and the person): the only ids a search may run as.
        self.callers = callers
        self._embedder: embed.Embedder | None = None
        # The vectors as last read, and what memory.db had been through then (_seen).
        self._held: tuple[tuple[int, int], embed.Vectors] | None = None
        self._commits = 0  # this connection's own (data_version counts only others')
        self._lock = threading.RLock()
        self.recovered: list[str] = []
        self.refused: tuple[str, ...] = ()
        self._inode: tuple[int, int] | None = None
        paths.memory_db.parent.mkdir(parents=True, exist_ok=True)
        # Opening is serialised between processes too: two first opens at once (the office's
        # loops, a CLI) race to switch the file to WAL and create the tables, and SQLite
        # answers the loser "database is locked" without waiting.
        with _open_lock(paths):
            try:
                self._db, self.fresh = self._connect()
            except DatabaseDamaged as exc:
                self._db, self.fresh = self._rebuild(str(exc))

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _connect(self) -> tuple[sqlite3.Connection, bool]:
        """Open memory.db; (connection, True if its tables are new). DatabaseDamaged if
        the file is not a usable database."""
        path = self.paths.memory_db
        problem = inspect_files(path)
        if problem is not None:
            raise DatabaseDamaged(problem)
        _create(path)
        db = sqlite3.connect(path, isolation_level=None, timeout=10, check_same_thread=False)
        try:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode = WAL")
            # WAL + NORMAL loses at most the last commits on power loss; the hive rebuilds them.
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            fresh = self._ensure_schema(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            if is_damage(exc):
                raise DatabaseDamaged(str(exc)) from None
            raise
        # The -wal and -shm that SQLite made take the database's mode; older ones may not.
        inspect_files(path)
        self._inode = _inode(path)
        return db, fresh

    def _rebuild(self, why: str) -> tuple[sqlite3.Connection, bool]:
        """Discard the damaged database and make a new one; the caller holds _open_lock."""
        self.recovered = [f"memory.db was unusable ({why})", *discard(self.paths.memory_db)]
        return self._connect()

    def _recover(self, why: str) -> None:
        """The open database turned out damaged: rebuild it and read the hive into it."""
        with contextlib.suppress(sqlite3.Error):
            self._db.close()
        path = self.paths.memory_db
        with _open_lock(self.paths):
            self.recovered = [f"memory.db was unusable ({why})", *discard(path)]
            self._db, self.fresh = self._connect()
            # A new connection counts data_version afresh: what was held says nothing.
            self._held = None
            self._reindex()

    def replaced(self) -> bool:
        """True if memory.db is no longer the file this store has open (another process
        found it damaged and rebuilt it): reopen to see the new one."""
        return _inode(self.paths.memory_db) != self._inode

    @staticmethod
    def _ensure_schema(db: sqlite3.Connection) -> bool:
        """Create the tables, or drop and recreate them after a schema change. True if new."""
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is not None and row[0] == SCHEMA_VERSION:
            return False
        drops = "".join(f"DROP TABLE IF EXISTS {table};\n" for table in _TABLES)
        # One script, one transaction (executescript would commit a transaction around it).
        db.executescript(
            f"BEGIN IMMEDIATE;\n{drops}{_SCHEMA}\n"
            f"INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION}');\nCOMMIT;"
        )
        return True

    @contextmanager
    def _tx(self) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front: the office's watcher and a CLI may both
        # write, and a deferred transaction upgrading later can fail instead of waiting.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            # A damaged database may refuse the rollback too; the damage is what is raised.
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        self._commits += 1

    # --- writes ----------------------------------------------------------------------------

    @_serialised
    def apply(self, changes: Changes) -> None:
        """Apply what `sources.entries_for` found, in one transaction."""
        self._apply(changes)

    def _apply(self, changes: Changes) -> None:
        keep = {(e.source, e.external_id) for e in changes.upserts}
        with self._tx():
            for path in changes.deletions:
                rows = self._db.execute(
                    "SELECT rid, source, external_id FROM entries WHERE path = ?", (path,)
                ).fetchall()
                gone = [(r["rid"],) for r in rows if (r["source"], r["external_id"]) not in keep]
                self._db.executemany("DELETE FROM entries WHERE rid = ?", gone)
            self._db.executemany(_UPSERT, [_row(e) for e in changes.upserts])
            # One row per tag, for exact filters by tag (a trigger drops a row's old tags
            # when they change; an unchanged row's are already there).
            self._db.executemany(
                "INSERT OR IGNORE INTO entry_tags(tag, rid) "
                "SELECT ?, rid FROM entries WHERE source = ? AND external_id = ?",
                [(t, e.source, e.external_id) for e in changes.upserts for t in set(e.tags)],
            )
            # Words are only added: one no entry holds any more finds nothing as a piece.
            vocabulary = set().union(*(words_of(e.text) for e in changes.upserts))
            self._db.executemany(
                "INSERT OR IGNORE INTO vocabulary(word) VALUES (?)", [(w,) for w in vocabulary]
            )

    def upsert(self, entry: Entry) -> None:
        """Insert `entry`, or replace the content stored under its (source, external_id)."""
        self.apply(Changes([entry], set()))

    @_serialised
    def delete_source_file(self, path: Path | str) -> int:
        """Remove every entry that came from `path` (absolute, or relative to the hive)."""
        rel = hive_relative(self.paths.hive, path)
        with self._tx():
            return self._db.execute("DELETE FROM entries WHERE path = ?", (rel,)).rowcount

    @_serialised
    def paths_of(self, source: str) -> set[str]:
        """The (hive-relative) files `source`'s entries came from: for a sweep that deletes
        the entries of a file that is gone."""
        rows = self._db.execute("SELECT DISTINCT path FROM entries WHERE source = ?", (source,))
        return {r[0] for r in rows}

    @_serialised
    def reindex(self) -> int:
        """Rebuild the index from the hive: every source file read again, every entry whose
        file is gone removed. Unchanged entries keep their vectors. Returns the entry count;
        `refused` then lists the source files that were not read, and why."""
        return self._reindex()

    def _reindex(self) -> int:
        changes = sources.entries_for(self.paths, sources.source_files(self.paths))
        indexed = {r[0] for r in self._db.execute("SELECT DISTINCT path FROM entries")}
        # Oldest first: a new database then numbers its rows in time order, which is the
        # order a query of only common words takes its window in.
        upserts = sorted(changes.upserts, key=lambda e: e.updated_at)
        self._apply(Changes(upserts, changes.deletions | indexed))
        self.refused = changes.refused
        with self._tx():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('indexed_at', ?)", (now_iso(),))
        return self._count()

    # --- reads -----------------------------------------------------------------------------

    @_serialised
    def count(self) -> int:
        return self._count()

    def _count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0])

    @_serialised
    def lookup(self, entry_id: str) -> Entry | None:
        """The entry with this id, whatever its scope. For `promote` (whose caller is
        checked for its role instead); never hand this to an agent as a search."""
        row = self._db.execute(f"SELECT {_COLUMNS} FROM entries WHERE id = ?", (entry_id,))
        found = row.fetchone()
        return _entry(found) if found else None

    def check_caller(self, caller: str | None) -> str:
        """`caller` if it may search; CallerRefused before any query otherwise."""
        if not caller:
            raise CallerRefused(
                "no caller id: memory is only searched as an agent of the office or the person."
            )
        if caller not in self.callers:
            raise CallerRefused(
                f"{caller!r} is not an agent of this office; memory is only searched as one "
                "of its agents or the person (human)."
            )
        return caller

    def search(
        self,
        query: str,
        caller: str | None,
        scope: SearchScope = "all",
        limit: int = 10,
        mode: Mode = "keyword",
        filters: Filters | None = None,
    ) -> list[Hit]:
        """Entries matching `query` that `caller` may read in `scope`, best first.

        keyword fuses the porter and trigram arms; semantic ranks by embedding cosine;
        hybrid fuses all three. semantic and hybrid raise embed.SemanticUnavailable
        without the `semantic` extra. `filters` narrow every arm inside its query; with
        no query text they list the entries they admit, newest first.
        """
        who = self.check_caller(caller)
        if scope not in ("own", "office", "all"):
            raise ValueError(f"unknown scope {scope!r}: own, office or all")
        if mode not in ("keyword", "semantic", "hybrid"):
            raise ValueError(f"unknown mode {mode!r}: keyword, semantic or hybrid")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        filters = filters or Filters()
        narrow, narrow_params = filter_predicate(filters)
        terms = query_terms(query)
        if not terms:
            if filters.empty:
                return []
            return self._listing(who, scope, limit, filters, narrow, narrow_params)
        return self._search(terms, query, who, scope, limit, mode, narrow, narrow_params)

    @staticmethod
    def _where(who: str, scope: SearchScope, narrow: str) -> tuple[str, str | None]:
        """(the WHERE clause for `who` in `scope` and the filters, the acl match or None
        when every row is readable)."""
        if reads_everything(who, scope):
            return narrow, None
        return f"{scope_predicate(scope)} AND {narrow}", acl_match(scope, who)

    @_serialised
    def _listing(
        self,
        who: str,
        scope: SearchScope,
        limit: int,
        filters: Filters,
        narrow: str,
        narrow_params: dict[str, str],
    ) -> list[Hit]:
        where, acl = self._where(who, scope, narrow)
        params: dict[str, str | int] = {
            "caller": who,
            "member": f",{who},",
            "limit": limit,
            **narrow_params,
        }
        tables = "entries e"
        if filters.tags:
            # The rows holding a tag come from its index, not from a walk of every row
            # (CROSS JOIN keeps that order of the loops with or without ANALYZE).
            tables = "entry_tags t CROSS JOIN entries e ON e.rid = t.rid"
            where += " AND t.tag = :f_indexed"
            params["f_indexed"] = filters.tags[0]
        elif acl is not None:
            # Redundant, for the index: every row an agent may read is its own or the
            # office's (a copy of mail is owned by the mailbox it sits in).
            where += " AND e.owner IN (:caller, 'office')"
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM {tables} WHERE {where} "
            "ORDER BY e.updated_at DESC, e.id LIMIT :limit",
            params,
        )
        return [Hit(id=row["id"], score=0.0, entry=_entry(row)) for row in rows]

    @_serialised
    def _search(
        self,
        terms: list[str],
        query: str,
        who: str,
        scope: SearchScope,
        limit: int,
        mode: Mode,
        narrow: str,
        narrow_params: dict[str, str],
    ) -> list[Hit]:
        params = {"caller": who, "member": f",{who},", **narrow_params}
        where, acl = self._where(who, scope, narrow)
        arms: list[list[str]] = []
        if mode in ("keyword", "hybrid"):
            df = {t: self._df(t) for t in terms}
            # A term no entry holds as a word may be a piece of one (parse_conf, DraftBuilder):
            # it stands for the words of the vocabulary that contain it.
            df |= {w: self._df(w) for piece in pieces(df) for w in self._containing(piece)}
            chosen, common = rarest(df)
            if chosen:
                arms.append(self._arm(chosen, common, where, acl, params))
        if mode in ("semantic", "hybrid"):
            arms.append(self._nearest(query, where, params))
        return self._hits(fuse(arms)[:limit])

    def _df(self, term: str) -> int:
        """How many entries hold `term` (as porter words), counting to COMMON_DF. Without
        a column filter, which would read every row's positions: a word of a query is
        never one of the `acl` tokens, and a count is only a hint for choosing terms."""
        sql = f"SELECT count(*) FROM (SELECT 1 FROM words WHERE words MATCH ? LIMIT {COMMON_DF})"
        return int(self._db.execute(sql, (_phrase(term),)).fetchone()[0])

    def _containing(self, piece: str) -> list[str]:
        """The shortest PIECE_WORDS words of the vocabulary that contain `piece`: a
        substring search over the distinct words, never over every entry's text."""
        rows = self._db.execute(
            "SELECT v.word FROM vocabulary_grams g JOIN vocabulary v ON v.vid = g.rowid "
            f"WHERE vocabulary_grams MATCH ? ORDER BY length(v.word), v.word LIMIT {PIECE_WORDS}",
            (_phrase(piece),),
        )
        return [r[0] for r in rows]

    def _arm(
        self,
        terms: list[str],
        common: bool,
        where: str,
        acl: str | None,
        params: dict[str, str],
    ) -> list[str]:
        if not common:
            # e.id breaks ties (identical text) the same way after any rebuild.
            sql = (
                "SELECT e.id FROM words JOIN entries e ON e.rid = words.rowid "
                f"WHERE words MATCH :match AND {where} "
                f"ORDER BY words.rank, e.id LIMIT {ARM_DEPTH}"
            )
            match = words_match(terms)
            return [r[0] for r in self._db.execute(sql, {**params, "match": match})]
        # Every term is common: the newest WINDOW entries in scope that hold any of them.
        # The acl tokens pick the scope inside the match (no row of another's is walked);
        # the predicate still decides each row.
        within = f" AND {acl}" if acl else ""
        rows = self._db.execute(
            "SELECT e.rid, e.id, length(e.text) FROM words JOIN entries e ON e.rid = words.rowid "
            f"WHERE words MATCH :match AND {where} ORDER BY words.rowid DESC LIMIT {WINDOW}",
            {**params, "match": f"{words_match(terms)}{within}"},
        ).fetchall()
        ids = {r[0]: r[1] for r in rows}
        holders = []
        if len(terms) > 1 and rows:
            # Which of the window holds each term: a walk of the window's rows only.
            for term in terms:
                match = f"{words_match([term])}{within}"
                found = self._db.execute(
                    "SELECT rowid FROM words WHERE words MATCH ? AND rowid >= ?",
                    (match, rows[-1][0]),
                )
                holders.append({ids[r[0]] for r in found if r[0] in ids})
        return rank_window([(r[1], r[2]) for r in rows], holders, ARM_DEPTH)

    def _hits(self, ranked: list[tuple[str, float]]) -> list[Hit]:
        if not ranked:
            return []
        marks = ",".join("?" * len(ranked))
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE id IN ({marks})", [i for i, _ in ranked]
        )
        by_id = {row["id"]: _entry(row) for row in rows}
        return [Hit(id=i, score=score, entry=by_id[i]) for i, score in ranked if i in by_id]

    # --- vectors (the semantic extra) -------------------------------------------------------

    @_serialised
    def embedder(self) -> embed.Embedder:
        """The embedder, loaded once; a change of model re-embeds everything."""
        if self._embedder is None:
            self._adopt(embed.load())
        assert self._embedder is not None
        return self._embedder

    @_serialised
    def adopt(self, model: embed.Embedder) -> None:
        """Search with `model`, loaded by whoever keeps it (the office loads it once for
        every store it opens); a change of model re-embeds everything."""
        self._adopt(model)

    def _adopt(self, model: embed.Embedder) -> None:
        identity = {"embed_model": model.name, "embed_dim": str(model.dim)}
        identity["embed_version"] = model.version
        stored = dict(
            self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'embed_%'").fetchall()
        )
        if stored != identity:
            with self._tx():
                self._db.execute("DELETE FROM vectors")
                self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", identity.items())
        self._embedder = model

    @_serialised
    def embed_pending(self, at_most: int | None = None) -> int:
        """Embed every entry that has no vector yet (new, changed or after a model change),
        or the first `at_most` of them; returns how many are left without one.

        Writes never wait for the model: entries are embedded here, before a semantic
        search reads them, with the same embedder that embeds the query.
        """
        model = self.embedder()
        # A vector never outlives its entry (ON DELETE CASCADE): as many vectors as
        # entries is every entry embedded, told without reading either table again.
        entries = self._db.execute("SELECT count(*) FROM entries").fetchone()[0]
        if entries == len(self._vectors(model.dim)):
            return 0
        pending = self._db.execute(
            "SELECT rid, text FROM entries WHERE rid NOT IN (SELECT rid FROM vectors)"
        ).fetchall()
        doing = pending if at_most is None else pending[:at_most]
        for start in range(0, len(doing), EMBED_BATCH):
            batch = doing[start : start + EMBED_BATCH]
            vectors = model.embed([r["text"] for r in batch])
            with self._tx():
                # Another connection (the office's indexer) may have changed or removed
                # an entry since it was read: its vector then waits for its new text.
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors SELECT rid, ? FROM entries "
                    "WHERE rid = ? AND text = ?",
                    [(v, r["rid"], r["text"]) for r, v in zip(batch, vectors, strict=True)],
                )
        return len(pending) - len(doing)

    def _seen(self) -> tuple[int, int]:
        """What memory.db has been through, as this connection tells: other connections'
        commits (data_version) and its own. Unchanged, no vector has changed."""
        return self._db.execute("PRAGMA data_version").fetchone()[0], self._commits

    def _vectors(self, dim: int) -> embed.Vectors:
        """Every stored vector, read again only after memory.db changed (any commit: a
        change of an entry's text drops its vector, and another process may embed)."""
        seen = self._seen()
        if self._held is None or self._held[0] != seen:
            rows = self._db.execute("SELECT rid, vec FROM vectors ORDER BY rid").fetchall()
            self._held = seen, embed.Vectors([(r[0], r[1]) for r in rows], dim)
        return self._held[1]

    def _nearest(self, query: str, where: str, params: dict[str, str]) -> list[str]:
        model = self.embedder()
        self.embed_pending()
        vectors = self._vectors(model.dim)
        # Brute-force cosine over only the rows the scope admits: exact, and at the size of
        # an office's memory (tens of thousands of entries) a few milliseconds.
        admitted = [
            r[0] for r in self._db.execute(f"SELECT e.rid FROM entries e WHERE {where}", params)
        ]
        near = vectors.nearest(model.embed([query])[0], admitted, ARM_DEPTH)
        ids: dict[int, str] = {}
        # Many rows tie when many entries hold the same text: asked in pieces, as a
        # statement takes a bounded number of parameters.
        for start in range(0, len(near), IDS_AT_ONCE):
            rids = [rid for rid, _ in near[start : start + IDS_AT_ONCE]]
            marks = ",".join("?" * len(rids))
            sql = f"SELECT rid, id FROM entries WHERE rid IN ({marks})"
            ids.update((r[0], r[1]) for r in self._db.execute(sql, rids))
        # Best first; identical text (equal scores) in the order of entry ids.
        ranked = sorted((-score, ids[rid]) for rid, score in near if rid in ids)
        return [entry_id for _, entry_id in ranked[:ARM_DEPTH]]


def open_store(paths: HivePaths) -> MemoryStore:
    """The office's index, rebuilt from the hive first if it is new, its schema changed,
    or it was damaged (`MemoryStore.recovered` then says what was done).

    Reads office.toml for the roster (the ids a search may run as); raises
    config.ConfigError when that file cannot be used.
    """
    config = load_office(paths.office_toml)
    store = MemoryStore(paths, frozenset({HUMAN, *(a.id for a in config.agents)}))
    if store.fresh:
        store.reindex()
    return store
