"""What in the hive becomes a memory entry.

Every entry is derived from one hive file, so the index can always be rebuilt:

| file (hive-relative)                          | source   | scope, owner                  |
| --------------------------------------------- | -------- | ----------------------------- |
| agents/<id>/memory/notes.md, per note          | note     | own, the agent                |
| agents/<id>/memory.md, per paragraph or item   | memory   | own, the agent                |
| agents/<id>/memory/archive.md, per paragraph   | archive  | own, the agent                |
| board.md, per paragraph or item                | board    | office                        |
| tasks.json, per task                           | task     | office                        |
| triage/<msgid>.json                            | triage   | office                        |
| promoted/<entry id>.json                       | promoted | office                        |
| <mailbox>/inbox/, inbox/.done/, outbox/.sent/  | message  | office, only that mailbox's   |
|                                                |          | owner (participants)          |
| ../ci-logs/<owner>/<repo>/<run>/<attempt>/     | ci       | office (hive_core/ci/:        |
| run.json, the run and each failed job          |          | the CI-log cache, home level) |

A message is indexed once per mailbox copy: the sender's `.sent` copy is visible to
the sender, each recipient's inbox copy to that recipient, so exactly the agents who
sent or received a message find it. Its external id (`<mailbox>/<msgid>`) survives the
move from inbox/ to inbox/.done/.

`entries_for` is what the office's watcher calls with the paths that changed: it reads
only those files. Which file is which comes from `HivePaths.locate`, the layout's one
reverse lookup. `memory/write.py` makes the two writes memory makes to the hive.

A source is read only where its real path stays inside its owner's folder
(`Located.folder`): a symlink an agent plants in its own folder (memory/archive.md ->
another agent's notes) is refused with a reason, never followed, so nobody's private
memory shows in another's search.

A source is read up to SOURCE_MAX bytes: an agent can make its archive.md any size (a
256 MiB sparse one had the office at 843 MB and memory.db at 540 MB). Markdown past it
is indexed up to its last whole line within the cap, a JSON source past it not at all;
either is named in `refused`, so the office says so.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, NamedTuple

import msgspec

from hive_core import ci
from hive_core.errors import OfficeError
from hive_core.fsio import is_temp_name
from hive_core.memory import ci_runs
from hive_core.memory.entry import OFFICE, Changes, Entry, Scope, Source, hive_relative
from hive_core.paths import HivePaths, PlaceKind
from hive_core.schema import HUMAN, Ledger, Message, is_agent_id

Kind = Literal["note", "memory", "archive", "board", "task", "triage", "promoted", "message", "ci"]


class Located(NamedTuple):
    """A source file: its kind, the agent (or person) whose folder holds it, its path as
    the index keeps it (relative to the hive, POSIX), and the hive-relative folder its
    real path must stay inside (its owner's folder, triage/, promoted/, or itself)."""

    kind: Kind
    owner: str
    rel: str
    folder: str


class Promoted(msgspec.Struct, kw_only=True):
    """promoted/<entry id>.json: a private entry the manager or the person made office
    knowledge. A snapshot of its text: promoting is a decision about that content."""

    entry_id: str
    source: Source
    owner: str
    text: str
    promoted_by: str
    promoted_at: str
    tags: list[str] = []


# Bytes of one source file read at most (see the module docstring). Far past what the
# tidy keeps (memory_budget) or a message file holds.
SOURCE_MAX = 4 << 20


class OutsideOwner(OfficeError):
    """A source file whose real path leaves its owner's folder; the message says where."""


# The places (HivePaths.locate) in a mailbox that are memory sources, and the source each is.
_OWN_SOURCES: dict[PlaceKind, Kind] = {"memory": "memory", "notes": "note", "archive": "archive"}
_MESSAGE_PLACES: frozenset[PlaceKind] = frozenset({"inbox", "done", "sent"})

# The layout as hive-relative strings, from HivePaths, cached: the watcher's bursts ask
# for thousands of files of a few owners, and pathlib would cost more than the rest.


@functools.lru_cache(maxsize=8)
def _office_sources(paths: HivePaths) -> tuple[dict[str, Kind], dict[str, Kind]]:
    """(the office's files that are sources, the folders whose `*.json` are)."""
    hive = paths.hive
    files: dict[str, Kind] = {
        hive_relative(hive, paths.board): "board",
        hive_relative(hive, paths.tasks): "task",
    }
    folders: dict[str, Kind] = {
        hive_relative(hive, paths.triage): "triage",
        hive_relative(hive, paths.promoted): "promoted",
    }
    return files, folders


@functools.lru_cache(maxsize=1024)
def _mailbox_folders(paths: HivePaths, owner: str) -> tuple[str, frozenset[str]]:
    """(the owner's folder, the folders its messages are kept in)."""
    box = paths.mailbox(owner)
    kept = frozenset(hive_relative(paths.hive, d) for d in box.message_dirs())
    return hive_relative(paths.hive, box.root), kept


def _in_hive(paths: HivePaths, path: Path | str) -> str | None:
    """`path` (absolute, or relative to the home) relative to the hive, normalised; None
    outside it."""
    hive = os.path.normpath(paths.hive)
    file = os.path.normpath(os.path.join(paths.home, path))
    return file[len(hive) + 1 :] if file.startswith(hive + "/") else None


def locate(paths: HivePaths, path: Path | str) -> Located | None:
    """Which kind of source `path` (absolute, or relative to the home) is, if any (pure).
    A message is a `*.json` right inside a mailbox's inbox, inbox/.done or outbox/.sent;
    triage and promoted entries are `*.json` right inside their folders."""
    place = paths.locate(path)
    if place is not None and place.kind == "ci_logs":
        run = ci.summary_run(paths, path)
        if run is None:
            return None
        summary = hive_relative(paths.hive, run.summary)
        return Located("ci", OFFICE, summary, summary)
    rel = _in_hive(paths, path)
    if place is None or rel is None:
        return None
    parent, _, name = rel.rpartition("/")
    if is_temp_name(name):
        return None
    kind, owner = place
    json = name.endswith(".json")
    if owner is None:
        files, folders = _office_sources(paths)
        if rel in files:
            return Located(files[rel], OFFICE, rel, rel)
        if json and parent in folders:
            return Located(folders[parent], OFFICE, rel, parent)
        return None
    if owner != HUMAN and not is_agent_id(owner):
        return None
    root, kept = _mailbox_folders(paths, owner)
    if kind in _MESSAGE_PLACES:
        return Located("message", owner, rel, root) if json and parent in kept else None
    own = _OWN_SOURCES.get(kind)
    return Located(own, owner, rel, root) if own and owner != HUMAN else None


@functools.lru_cache(maxsize=8)
def _real_root(hive: str) -> str:
    # Asked for every file of a burst. If the hive's own real path changed since, every
    # real path lands outside the cached one and is refused: this errs towards not reading.
    return os.path.realpath(hive)


def _confined(
    paths: HivePaths, rel: str, folder: str, folders: dict[str, str] | None = None
) -> str:
    """The real path of hive/`rel` if it stays inside hive/`folder`. `folders` keeps
    real paths of folders for one batch: a burst is thousands of files in a few
    folders, and realpath walks every component of every path it is given."""
    hive = os.fspath(paths.hive)
    base = f"{_real_root(hive)}/{folder}"
    path = f"{hive}/{rel}"
    if folders is None or os.path.islink(path):
        real = os.path.realpath(path)
    else:
        parent, name = os.path.split(path)
        if (real_parent := folders.get(parent)) is None:
            real_parent = folders[parent] = os.path.realpath(parent)
        real = f"{real_parent}/{name}"
    if real != base and not real.startswith(base + "/"):
        raise OutsideOwner(
            f"{rel} leads out of {folder} (to {real}) through a symlink; it is not read. "
            "Replace the symlink with the file itself."
        )
    return real


def confined(paths: HivePaths, file: Path) -> Path:
    """The real path of `file`, a file in a mailbox, if it stays inside that mailbox;
    OutsideOwner if a symlink on the way leads out (a symlinked mailbox included).
    ValueError for a file in no mailbox."""
    place = paths.locate(file)
    rel = _in_hive(paths, file)
    if place is None or place.owner is None or rel is None:
        raise ValueError(f"{file} is in no mailbox of the office at {paths.home}")
    return Path(_confined(paths, rel, _mailbox_folders(paths, place.owner)[0]))


def read_confined(
    paths: HivePaths, found: Located, folders: dict[str, str] | None = None
) -> tuple[bytes, float, bool]:
    """(content, mtime, cut) of a source file read without following a symlink out of
    its owner's folder: its first SOURCE_MAX bytes, `cut` if there is more. OSError if it
    is not a regular file (a FIFO is never waited on)."""
    real = _confined(paths, found.rel, found.folder, folders)
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{found.rel} is not a regular file")
        data = f.read(SOURCE_MAX + 1)
        return data[:SOURCE_MAX], st.st_mtime, len(data) > SOURCE_MAX


# --- markdown into pieces (pure) ------------------------------------------------------------

ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
# A note written by `note()` starts with its time: "- 2026-11-30T09:00:00Z text".
STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+")


class Chunk(NamedTuple):
    raw: str  # as written, the piece's identity
    text: str  # what is indexed: list marker and note time removed
    stamp: str | None


def to_chunk(lines: list[str]) -> Chunk:
    raw = "\n".join(lines).strip()
    text = ITEM.sub("", raw, count=1)
    stamp = STAMP.match(text)
    if stamp:
        text = text[stamp.end() :]
    text = "\n".join(line.strip() for line in text.splitlines())
    return Chunk(raw, text.strip(), stamp.group(1) if stamp else None)


def spans(lines: list[str]) -> list[tuple[int, int]]:
    """The line ranges [start, end) of the pieces of a file's lines: paragraphs and
    top-level list items; headings and blank lines separate pieces and belong to none."""
    found: list[tuple[int, int]] = []
    start: int | None = None
    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#"):
            if start is not None:
                found.append((start, i))
            start = None
        elif ITEM.match(line):  # only unindented items start a piece; nested ones belong
            if start is not None:
                found.append((start, i))
            start = i
        elif start is None:
            start = i
    if start is not None:
        found.append((start, len(lines)))
    return found


def chunks(markdown: str) -> list[Chunk]:
    """Paragraphs and top-level list items, each a piece; headings separate pieces and are
    not pieces themselves (a heading alone says nothing to find)."""
    lines = markdown.splitlines()
    return [c for c in (to_chunk(lines[a:b]) for a, b in spans(lines)) if c.text]


def piece_key(raw: str) -> str:
    """What a piece's external id holds after the file's path: its text's digest."""
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def find_piece(lines: list[str], key: str) -> tuple[int, int] | None:
    """The line range of the piece whose external id ends in `key` (`digest` or
    `digest-N` for the Nth repeat of the same text), as `_markdown_entries` numbers them."""
    digest, _, nth = key.partition("-")
    want = int(nth) if nth.isdigit() else 1
    seen = 0
    for a, b in spans(lines):
        chunk = to_chunk(lines[a:b])
        if chunk.text and piece_key(chunk.raw) == digest:
            seen += 1
            if seen == want:
                return a, b
    return None


def note_line(stamp: str, text: str) -> str:
    """A note as `note()` appends it: a list item with its time, continuation indented.
    Blank lines inside the note are dropped: in markdown they would end the item."""
    first, *rest = text.strip().splitlines()
    return "\n".join([f"- {stamp} {first}", *(f"  {line}" for line in rest if line.strip())])


# --- files into entries -----------------------------------------------------------------------


def _iso(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _markdown_entries(data: bytes, mtime: float, rel: str, kind: Kind, owner: str) -> list[Entry]:
    scope: Scope = "office" if owner == OFFICE else "own"
    modified = _iso(mtime)
    seen: dict[str, int] = {}
    entries = []
    for chunk in chunks(data.decode("utf-8", errors="replace")):
        # The piece's own text is its key: an untouched paragraph keeps its id (and its
        # vector) when the file around it changes; a repeated one gets a counter.
        digest = piece_key(chunk.raw)
        seen[digest] = seen.get(digest, 0) + 1
        suffix = f"-{seen[digest]}" if seen[digest] > 1 else ""
        entries.append(
            Entry(
                source=kind,
                external_id=f"{rel}#{digest}{suffix}",
                owner=owner,
                scope=scope,
                text=chunk.text,
                path=rel,
                created_at=chunk.stamp or modified,
                updated_at=chunk.stamp or modified,
            )
        )
    return entries


def _task_entries(data: bytes, rel: str) -> list[Entry]:
    ledger = msgspec.json.decode(data, type=Ledger)
    entries = []
    for task in ledger.tasks:
        parts = [task.title, task.spec, task.result or ""]
        parts += [f"{q.question} {q.answer or ''}" for q in task.questions]
        tags = [f"status:{task.status}", *([f"assignee:{task.assignee}"] if task.assignee else [])]
        entries.append(
            Entry(
                source="task",
                external_id=task.id,
                owner=OFFICE,
                scope="office",
                text="\n".join(p.strip() for p in parts if p.strip()),
                path=rel,
                created_at=task.created_at,
                updated_at=task.updated_at,
                tags=(f"task:{task.id}", *tags),
            )
        )
    return entries


def _message_text(message: Message) -> str:
    return f"{message.subject}\n{message.body}".strip()


def _message_tags(message: Message) -> tuple[str, ...]:
    task = (f"task:{message.task}",) if message.task else ()
    return (f"from:{message.sender}", f"to:{message.to}", f"act:{message.act}", *task)


def _message_entry(data: bytes, rel: str, kind: Kind, owner: str) -> Entry:
    message = msgspec.json.decode(data, type=Message)
    if kind == "triage":
        return Entry(
            source="triage",
            external_id=message.id,
            owner=OFFICE,
            scope="office",
            text=_message_text(message),
            path=rel,
            created_at=message.created_at,
            updated_at=message.created_at,
            tags=_message_tags(message),
        )
    return Entry(
        source="message",
        external_id=f"{owner}/{message.id}",
        owner=owner,
        scope="office",
        text=_message_text(message),
        path=rel,
        created_at=message.created_at,
        updated_at=message.created_at,
        tags=_message_tags(message),
        participants=(owner,),
    )


def _promoted_entry(data: bytes, rel: str) -> Entry:
    promoted = msgspec.json.decode(data, type=Promoted)
    return Entry(
        source="promoted",
        external_id=promoted.entry_id,
        owner=OFFICE,
        scope="office",
        text=promoted.text,
        path=rel,
        created_at=promoted.promoted_at,
        updated_at=promoted.promoted_at,
        tags=(
            f"from:{promoted.owner}",
            f"promoted-by:{promoted.promoted_by}",
            f"was:{promoted.source}",
            *promoted.tags,
        ),
    )


# The sources read as markdown: what is within the cap of one is still worth indexing.
_MARKDOWN: frozenset[Kind] = frozenset({"note", "memory", "archive", "board"})


class TooLarge(OfficeError):
    """A JSON source over SOURCE_MAX: not read; the message says so."""


def _too_large(rel: str, read: str) -> str:
    return (
        f"{rel} is over {SOURCE_MAX >> 20} MiB; {read} (memory sources are read up to "
        f"{SOURCE_MAX >> 20} MiB). Move what is older out of it to have it found."
    )


def read_whole(path: Path, doing: str) -> str:
    """The text of a memory file that the tidy or retention rewrites, so reads whole:
    "" if it is missing, TooLarge over SOURCE_MAX (`doing`: what is then not done to it),
    never waiting on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{path.name} is not a regular file")
        data = f.read(SOURCE_MAX + 1)
    if len(data) > SOURCE_MAX:
        raise TooLarge(_too_large(str(path), f"it is not {doing}"))
    return data.decode("utf-8")


def _read(
    paths: HivePaths, found: Located, folders: dict[str, str]
) -> tuple[list[Entry], str | None]:
    """The file's entries, and what to say about it (a markdown file cut at the cap)."""
    if found.kind == "ci":
        # Beside the hive, in the office's own cache: read as the cache reads it, never
        # through a link.
        return ci_runs.indexed(paths, found.rel), None
    data, mtime, cut = read_confined(paths, found, folders)
    kind, rel = found.kind, found.rel
    if cut:
        if kind not in _MARKDOWN:
            raise TooLarge(_too_large(rel, "it is not indexed"))
        # The last line within the cap may be cut short: it is left out whole.
        data = data[: data.rfind(b"\n") + 1]
        return _entries(data, mtime, found), _too_large(rel, "only its beginning is indexed")
    return _entries(data, mtime, found), None


def _entries(data: bytes, mtime: float, found: Located) -> list[Entry]:
    kind, owner, rel, _ = found
    if kind == "task":
        return _task_entries(data, rel)
    if kind in ("triage", "message"):
        return [_message_entry(data, rel, kind, owner)]
    if kind == "promoted":
        return [_promoted_entry(data, rel)]
    return _markdown_entries(data, mtime, rel, kind, owner)


def entries_for(paths: HivePaths, changed: Iterable[Path]) -> Changes:
    """The index changes that `changed` (absolute paths, any files) call for.

    Reads only the changed files that are memory sources; everything else is ignored.
    Each source path is in `deletions`, so its old pieces go unless re-upserted, and a
    file that is gone, unreadable or malformed leaves nothing behind. A symlink out of
    its owner's folder leaves nothing either, and is named in `refused`; so is a file
    over SOURCE_MAX (read up to it, or not at all).
    """
    upserts: list[Entry] = []
    deletions: set[str] = set()
    refused: list[str] = []
    folders: dict[str, str] = {}
    for path in changed:
        found = locate(paths, path)
        if found is None:
            continue
        deletions.add(found.rel)
        try:
            entries, note = _read(paths, found, folders)
        except (OutsideOwner, TooLarge) as e:
            refused.append(str(e))
            continue
        except (OSError, msgspec.DecodeError, RecursionError):
            continue  # gone meanwhile, a directory, or not (yet) valid
        upserts.extend(entries)
        if note is not None:
            refused.append(note)
    return Changes(upserts, deletions, tuple(refused))


def source_files(paths: HivePaths) -> list[Path]:
    """Every memory source in the hive now (what `reindex` reads)."""
    found = [paths.board, paths.tasks]
    found += sorted(paths.triage.glob("*.json")) + sorted(paths.promoted.glob("*.json"))
    owners = [HUMAN, *sorted(p.name for p in paths.agents_dir.glob("*") if is_agent_id(p.name))]
    for owner in owners:
        box = paths.mailbox(owner)
        found += [box.memory, box.notes, box.archive]
        for folder in box.message_dirs():
            found += sorted(folder.glob("*.json"))
    found += ci.summaries(paths)
    return [p for p in found if p.is_file()]
