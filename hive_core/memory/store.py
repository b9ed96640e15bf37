"""memory.db: the search index over the hive (SQLite WAL, FTS5, optional vectors).

The index is a cache: every entry comes from a hive file (`Entry.path`) and
`reindex()` rebuilds it from the hive at any time, so a lost or outdated database
costs a rebuild, never knowledge.

Scope is decided inside every query that reads entries: each ranked arm (porter
words, trigrams, vectors) joins `entries` and applies the caller's scope predicate
before its ORDER BY ... LIMIT, so a caller with three entries in an index of
100,000 still gets all three (the gap of a filter applied after a top-k cut). The
caller is refused before any SQL runs when it is empty or not on the roster.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, NamedTuple

import msgspec

from hive_core.config import load_office
from hive_core.memory import embed
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN

Source = Literal["note", "memory", "archive", "board", "task", "triage", "message", "promoted"]
SOURCES: tuple[Source, ...] = (
    "note",
    "memory",
    "archive",
    "board",
    "task",
    "triage",
    "message",
    "promoted",
)
Scope = Literal["own", "office"]
SearchScope = Literal["own", "office", "all"]
Mode = Literal["keyword", "semantic", "hybrid"]
OFFICE = "office"

# Bump when the tables change: an old database is dropped and rebuilt from the hive.
SCHEMA_VERSION = "1"
# Candidates each ranked arm hands to the fusion; deeper lists change little in RRF.
ARM_DEPTH = 50
# The usual reciprocal rank fusion constant (Cormack et al.): damps the head of each list.
RRF_K = 60
EMBED_BATCH = 64
# A query term in at least this many entries is "common": scoring every entry that holds
# it is what makes an OR query slow at 100k entries, and its low IDF adds little to the
# ranking. Common terms only select candidates when the query has no rarer term.
COMMON_DF = 2000

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


class MemoryStoreError(Exception):
    """A memory operation cannot be done; the message says why and what to do."""


class CallerRefused(MemoryStoreError):
    """The caller is empty or not a member of the office: nothing is read or written."""


class NotAllowed(MemoryStoreError):
    """The caller is known but may not do this (promote by a non-manager)."""


class NotFound(MemoryStoreError):
    """No entry has that id."""


class Entry(msgspec.Struct, kw_only=True, frozen=True):
    """One searchable piece of the hive.

    `external_id` is unique within `source` and is the upsert key. `path` is the
    hive-relative file the entry came from: removing that file removes the entry.
    `participants` restricts an office entry to those agents (a message copy: the
    mailbox it sits in); empty means the whole office.
    """

    source: Source
    external_id: str
    owner: str
    scope: Scope
    text: str
    path: str
    created_at: str
    updated_at: str
    tags: tuple[str, ...] = ()
    participants: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return entry_id(self.source, self.external_id)


class Hit(msgspec.Struct, kw_only=True, frozen=True):
    """A search result: the entry, its id and its fused score (higher is better)."""

    id: str
    score: float
    entry: Entry


class Changes(NamedTuple):
    """What a set of changed hive files means for the index.

    Every entry at a path in `deletions` that is not among `upserts` is removed, so a
    rewritten file loses its old pieces and a deleted file loses all of them.
    """

    upserts: list[Entry]
    deletions: set[str]


def entry_id(source: str, external_id: str) -> str:
    """A stable id for (source, external_id): the same after any reindex."""
    return hashlib.sha256(f"{source}\0{external_id}".encode()).hexdigest()[:16]


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- pure query building ------------------------------------------------------------------


def query_terms(query: str) -> list[str]:
    """The query's distinct lower-case words, stopwords dropped unless nothing else is left."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))
    content = [w for w in words if w not in STOPWORDS]
    return content or words


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def words_match(terms: Sequence[str]) -> str:
    """FTS5 MATCH for the porter table: any term, so an added or dropped word still matches
    and bm25 ranks the entry sharing the most terms first."""
    return " OR ".join(_phrase(t) for t in terms)


def grams_match(terms: Sequence[str]) -> str | None:
    """FTS5 MATCH for the trigram table: each term as a substring (a piece of an
    identifier matches the whole). Terms under three characters have no trigram."""
    long = [t for t in terms if len(t) >= 3]
    return " OR ".join(_phrase(t) for t in long) if long else None


def split_terms(df: dict[str, int]) -> tuple[list[str], list[str]]:
    """(terms for the porter arm, terms for the trigram arm) from each term's document
    frequency in the porter index (capped at COMMON_DF).

    Porter: the terms below COMMON_DF, or all known terms when every one is common.
    Trigram: the terms the porter index does not know as words (pieces of identifiers,
    other spellings): the substring search is what can still find those.
    """
    known = [t for t, n in df.items() if n > 0]
    rare = [t for t in known if df[t] < COMMON_DF]
    return rare or known, [t for t, n in df.items() if n == 0]


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


def fuse(rankings: Iterable[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: sum of 1/(k + rank) over the lists, best first; ties go by
    key, so the order never depends on the order rows were inserted in."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def hive_relative(hive: Path, path: Path | str) -> str:
    """`path` as stored in the index: relative to the hive, POSIX separators."""
    p = Path(path)
    return (p.relative_to(hive) if p.is_absolute() else p).as_posix()


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
    UNIQUE (source, external_id)
);
CREATE INDEX entries_path ON entries(path);
CREATE VIRTUAL TABLE words USING fts5(
    text, tags, content='entries', content_rowid='rid',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE grams USING fts5(
    text, content='entries', content_rowid='rid', tokenize='trigram');
CREATE TABLE vectors(
    rid INTEGER PRIMARY KEY REFERENCES entries(rid) ON DELETE CASCADE,
    vec BLOB NOT NULL);
CREATE TRIGGER entries_ai AFTER INSERT ON entries BEGIN
    INSERT INTO words(rowid, text, tags) VALUES (new.rid, new.text, new.tags);
    INSERT INTO grams(rowid, text) VALUES (new.rid, new.text);
END;
CREATE TRIGGER entries_ad AFTER DELETE ON entries BEGIN
    INSERT INTO words(words, rowid, text, tags) VALUES ('delete', old.rid, old.text, old.tags);
    INSERT INTO grams(grams, rowid, text) VALUES ('delete', old.rid, old.text);
END;
CREATE TRIGGER entries_au AFTER UPDATE ON entries BEGIN
    INSERT INTO words(words, rowid, text, tags) VALUES ('delete', old.rid, old.text, old.tags);
    INSERT INTO grams(grams, rowid, text) VALUES ('delete', old.rid, old.text);
    INSERT INTO words(rowid, text, tags) VALUES (new.rid, new.text, new.tags);
    INSERT INTO grams(rowid, text) VALUES (new.rid, new.text);
    DELETE FROM vectors WHERE rid = old.rid AND old.text IS NOT new.text;
END;
"""
_TABLES = ("entries", "words", "grams", "vectors", "meta")

_COLUMNS = (
    "id, source, external_id, owner, scope, participants, tags, text, path, created_at, updated_at"
)
# Upsert by (source, external_id): new content replaces old. An identical row is left
# alone so its FTS rows and its vector are not rewritten for nothing.
_UPSERT = f"""
INSERT INTO entries({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(source, external_id) DO UPDATE SET
    owner = excluded.owner, scope = excluded.scope, participants = excluded.participants,
    tags = excluded.tags, text = excluded.text, path = excluded.path,
    created_at = excluded.created_at, updated_at = excluded.updated_at
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


class MemoryStore:
    """The index of one office. Open it with `open_store(paths)`; close it (or use `with`)."""

    def __init__(self, paths: HivePaths, callers: frozenset[str]) -> None:
        self.paths = paths
        # The roster (and the person): the only ids a search may run as.
        self.callers = callers
        self._embedder: embed.Embedder | None = None
        paths.memory_db.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(paths.memory_db, isolation_level=None, timeout=10)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode = WAL")
        # WAL + NORMAL loses at most the last commits on power loss; the hive can rebuild them.
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA foreign_keys = ON")
        self.fresh = self._ensure_schema()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def _ensure_schema(self) -> bool:
        """Create the tables, or drop and recreate them after a schema change. True if new."""
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.OperationalError:
            row = None
        if row is not None and row[0] == SCHEMA_VERSION:
            return False
        drops = "".join(f"DROP TABLE IF EXISTS {table};\n" for table in _TABLES)
        # One script, one transaction (executescript would commit a transaction around it).
        self._db.executescript(
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
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- writes ----------------------------------------------------------------------------

    def apply(self, changes: Changes) -> None:
        """Apply what `sources.entries_for` found, in one transaction."""
        keep = {(e.source, e.external_id) for e in changes.upserts}
        with self._tx():
            for path in changes.deletions:
                rows = self._db.execute(
                    "SELECT rid, source, external_id FROM entries WHERE path = ?", (path,)
                ).fetchall()
                gone = [(r["rid"],) for r in rows if (r["source"], r["external_id"]) not in keep]
                self._db.executemany("DELETE FROM entries WHERE rid = ?", gone)
            self._db.executemany(_UPSERT, [_row(e) for e in changes.upserts])

    def upsert(self, entry: Entry) -> None:
        """Insert `entry`, or replace the content stored under its (source, external_id)."""
        self.apply(Changes([entry], set()))

    def delete_source_file(self, path: Path | str) -> int:
        """Remove every entry that came from `path` (absolute, or relative to the hive)."""
        rel = hive_relative(self.paths.hive, path)
        with self._tx():
            return self._db.execute("DELETE FROM entries WHERE path = ?", (rel,)).rowcount

    def reindex(self) -> int:
        """Rebuild the index from the hive: every source file read again, every entry whose
        file is gone removed. Unchanged entries keep their vectors. Returns the entry count."""
        # Imported here: sources builds its Entries from this module.
        from hive_core.memory import sources

        changes = sources.entries_for(self.paths, sources.source_files(self.paths))
        indexed = {r[0] for r in self._db.execute("SELECT DISTINCT path FROM entries")}
        self.apply(Changes(changes.upserts, changes.deletions | indexed))
        with self._tx():
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('indexed_at', ?)", (now_iso(),))
        return self.count()

    # --- reads -----------------------------------------------------------------------------

    def count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0])

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
    ) -> list[Hit]:
        """Entries matching `query` that `caller` may read in `scope`, best first.

        keyword fuses the porter and trigram arms; semantic ranks by embedding cosine;
        hybrid fuses all three. semantic and hybrid raise embed.SemanticUnavailable
        without the `semantic` extra.
        """
        who = self.check_caller(caller)
        if scope not in ("own", "office", "all"):
            raise ValueError(f"unknown scope {scope!r}: own, office or all")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        terms = query_terms(query)
        if not terms:
            return []
        params = {"caller": who, "member": f",{who},"}
        where = scope_predicate(scope)
        arms: list[list[str]] = []
        if mode in ("keyword", "hybrid"):
            word_terms, gram_terms = split_terms({t: self._df(t) for t in terms})
            if word_terms:
                arms.append(self._fts("words", words_match(word_terms), where, params))
            grams = grams_match(gram_terms)
            if grams is not None:
                arms.append(self._fts("grams", grams, where, params))
        if mode in ("semantic", "hybrid"):
            arms.append(self._nearest(query, where, params))
        elif mode != "keyword":
            raise ValueError(f"unknown mode {mode!r}: keyword, semantic or hybrid")
        return self._hits(fuse(arms)[:limit])

    def _df(self, term: str) -> int:
        """How many entries hold `term` as a word (porter-stemmed), counting to COMMON_DF."""
        sql = f"SELECT count(*) FROM (SELECT 1 FROM words WHERE words MATCH ? LIMIT {COMMON_DF})"
        return int(self._db.execute(sql, (_phrase(term),)).fetchone()[0])

    def _fts(self, table: str, match: str, where: str, params: dict[str, str]) -> list[str]:
        # e.id breaks ties (identical text) the same way after any rebuild.
        sql = (
            f"SELECT e.id FROM {table} JOIN entries e ON e.rid = {table}.rowid "
            f"WHERE {table} MATCH :match AND {where} "
            f"ORDER BY {table}.rank, e.id LIMIT {ARM_DEPTH}"
        )
        return [r[0] for r in self._db.execute(sql, {**params, "match": match})]

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

    def embedder(self) -> embed.Embedder:
        """The embedder, loaded once; a change of model re-embeds everything."""
        if self._embedder is None:
            model = embed.load()
            identity = {"embed_model": model.name, "embed_dim": str(model.dim)}
            identity["embed_version"] = model.version
            stored = dict(
                self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'embed_%'").fetchall()
            )
            if stored != identity:
                with self._tx():
                    self._db.execute("DELETE FROM vectors")
                    self._db.executemany(
                        "INSERT OR REPLACE INTO meta VALUES (?, ?)", identity.items()
                    )
            self._embedder = model
        return self._embedder

    def embed_pending(self) -> int:
        """Embed every entry that has no vector yet (new, changed or after a model change).

        Writes never wait for the model: entries are embedded here, before a semantic
        search reads them, with the same embedder that embeds the query.
        """
        model = self.embedder()
        pending = self._db.execute(
            "SELECT rid, text FROM entries WHERE rid NOT IN (SELECT rid FROM vectors)"
        ).fetchall()
        for start in range(0, len(pending), EMBED_BATCH):
            batch = pending[start : start + EMBED_BATCH]
            vectors = model.embed([r["text"] for r in batch])
            with self._tx():
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                    [(r["rid"], v) for r, v in zip(batch, vectors, strict=True)],
                )
        return len(pending)

    def _nearest(self, query: str, where: str, params: dict[str, str]) -> list[str]:
        model = self.embedder()
        self.embed_pending()
        rows = self._db.execute(
            f"SELECT e.id, v.vec FROM vectors v JOIN entries e ON e.rid = v.rid WHERE {where} "
            "ORDER BY e.id",
            params,
        ).fetchall()
        # Brute-force cosine over only the rows the scope admits: exact, and at the size of
        # an office's memory (thousands of entries) a few milliseconds.
        return embed.nearest(
            model.embed([query])[0], [(r[0], r[1]) for r in rows], ARM_DEPTH, model.dim
        )


def open_store(paths: HivePaths) -> MemoryStore:
    """The office's index, rebuilt from the hive first if it is new or its schema changed.

    Reads office.toml for the roster (the ids a search may run as); raises
    config.ConfigError when that file cannot be used.
    """
    config = load_office(paths.office_toml)
    store = MemoryStore(paths, frozenset({HUMAN, *(a.id for a in config.agents)}))
    if store.fresh:
        store.reindex()
    return store
