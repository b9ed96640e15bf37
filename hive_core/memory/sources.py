"""What in the hive becomes a memory entry, and the two writes memory makes to the hive.

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

A message is indexed once per mailbox copy: the sender's `.sent` copy is visible to
the sender, each recipient's inbox copy to that recipient, so exactly the agents who
sent or received a message find it. Its external id (`<mailbox>/<msgid>`) survives the
move from inbox/ to inbox/.done/.

`entries_for` is what the office's watcher calls with the paths that changed: it reads
only those files. `note` and `promote` write a hive file and index it at once.

A source is read only where its real path stays inside its owner's folder
(`owner_folder`): a symlink an agent plants in its own folder (memory/archive.md ->
another agent's notes) is refused with a reason, never followed, so nobody's private
memory shows in another's search.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Literal, NamedTuple

import msgspec

from hive_core.config import load_office
from hive_core.fsio import append_line, atomic_write, is_temp_name
from hive_core.memory.store import (
    OFFICE,
    Changes,
    Entry,
    MemoryStore,
    NotAllowed,
    NotFound,
    Scope,
    Source,
    hive_relative,
    now_iso,
    open_store,
)
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Ledger, Message, is_agent_id

PROMOTED_DIR = "promoted"
NOTE_MAX = 16 * 1024
MESSAGE_FOLDERS = (("inbox",), ("inbox", ".done"), ("outbox", ".sent"))

Kind = Literal["note", "memory", "archive", "board", "task", "triage", "promoted", "message"]


class Located(NamedTuple):
    """A source file: its kind, and the agent (or person) whose folder holds it."""

    kind: Kind
    owner: str


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


class OutsideOwner(Exception):
    """A source file whose real path leaves its owner's folder; the message says where."""


def owner_folder(rel: PurePosixPath) -> PurePosixPath:
    """What a source at `rel` must stay inside (pure): an agent's or the person's folder,
    triage/ or promoted/, or for board.md and tasks.json the file itself."""
    top = rel.parts[0]
    if top == "agents":
        return PurePosixPath(*rel.parts[:2])
    if top in (HUMAN, "triage", PROMOTED_DIR):
        return PurePosixPath(top)
    return rel


@functools.lru_cache(maxsize=8)
def _real_root(hive: str) -> str:
    # Asked for every file of a burst. If the hive's own real path changed since, every
    # real path lands outside the cached one and is refused: this errs towards not reading.
    return os.path.realpath(hive)


def _confined(hive: Path, rel: PurePosixPath, folders: dict[str, str] | None = None) -> str:
    """`folders` keeps real paths of folders for one batch: a burst is thousands of files
    in a few folders, and realpath walks every component of every path it is given."""
    root = os.fspath(hive)
    base = f"{_real_root(root)}/{owner_folder(rel)}"
    path = f"{root}/{rel}"
    if folders is None or os.path.islink(path):
        real = os.path.realpath(path)
    else:
        folder, name = os.path.split(path)
        if (real_folder := folders.get(folder)) is None:
            real_folder = folders[folder] = os.path.realpath(folder)
        real = f"{real_folder}/{name}"
    if real != base and not real.startswith(base + "/"):
        raise OutsideOwner(
            f"{rel} leads out of {owner_folder(rel)} (to {real}) through a symlink; "
            "it is not read. Replace the symlink with the file itself."
        )
    return real


def confined(hive: Path, rel: PurePosixPath) -> Path:
    """The real path of hive/`rel`, if it stays inside its owner's folder; OutsideOwner
    if a symlink on the way leads out (a symlinked owner folder included)."""
    return Path(_confined(hive, rel))


def read_confined(
    hive: Path, rel: PurePosixPath, folders: dict[str, str] | None = None
) -> tuple[bytes, float]:
    """(content, mtime) of a source file read without following a symlink out of its
    owner's folder. OSError if it is not a regular file (a FIFO is never waited on)."""
    real = _confined(hive, rel, folders)
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{rel} is not a regular file")
        return f.read(), st.st_mtime


def archive_file(paths: HivePaths, agent_id: str) -> Path:
    """Where tidying moves an agent's older memory (still searchable, scope own)."""
    return paths.mailbox(agent_id).root / "memory" / "archive.md"


def locate(rel: PurePosixPath) -> Located | None:
    """Which kind of source a hive-relative path is, if any (pure)."""
    parts = rel.parts
    if not parts or is_temp_name(parts[-1]):
        return None
    if parts == ("board.md",):
        return Located("board", OFFICE)
    if parts == ("tasks.json",):
        return Located("task", OFFICE)
    if len(parts) == 2 and parts[1].endswith(".json") and parts[0] in ("triage", PROMOTED_DIR):
        return Located("triage" if parts[0] == "triage" else "promoted", OFFICE)
    if parts[0] == HUMAN:
        owner, rest = HUMAN, parts[1:]
    elif parts[0] == "agents" and len(parts) >= 3 and is_agent_id(parts[1]):
        owner, rest = parts[1], parts[2:]
    else:
        return None
    if not rest:
        return None
    if rest[-1].endswith(".json") and rest[:-1] in MESSAGE_FOLDERS:
        return Located("message", owner)
    if owner == HUMAN:
        return None
    own_files: dict[tuple[str, ...], Kind] = {
        ("memory.md",): "memory",
        ("memory", "notes.md"): "note",
        ("memory", "archive.md"): "archive",
    }
    kind = own_files.get(rest)
    return Located(kind, owner) if kind else None


# --- markdown into pieces (pure) ------------------------------------------------------------

_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
# A note written by `note()` starts with its time: "- 2026-11-30T09:00:00Z text".
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+")


class Chunk(NamedTuple):
    raw: str  # as written, the piece's identity
    text: str  # what is indexed: list marker and note time removed
    stamp: str | None


def _chunk(lines: list[str]) -> Chunk:
    raw = "\n".join(lines).strip()
    text = _ITEM.sub("", raw, count=1)
    stamp = _STAMP.match(text)
    if stamp:
        text = text[stamp.end() :]
    text = "\n".join(line.strip() for line in text.splitlines())
    return Chunk(raw, text.strip(), stamp.group(1) if stamp else None)


def chunks(markdown: str) -> list[Chunk]:
    """Paragraphs and top-level list items, each a piece; headings separate pieces and are
    not pieces themselves (a heading alone says nothing to find)."""
    pieces: list[list[str]] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            pieces.append(current.copy())
            current.clear()

    for line in markdown.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            flush()
        elif _ITEM.match(line):  # only unindented items start a piece; nested ones belong
            flush()
            current.append(line)
        else:
            current.append(line)
    flush()
    return [c for c in map(_chunk, pieces) if c.text]


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
        digest = hashlib.sha256(chunk.raw.encode()).hexdigest()[:16]
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


def _read(
    hive: Path, rel: str, pure: PurePosixPath, found: Located, folders: dict[str, str]
) -> list[Entry]:
    data, mtime = read_confined(hive, pure, folders)
    kind, owner = found
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
    its owner's folder leaves nothing either, and is named in `refused`.
    """
    upserts: list[Entry] = []
    deletions: set[str] = set()
    refused: list[str] = []
    folders: dict[str, str] = {}
    for path in changed:
        try:
            rel = hive_relative(paths.hive, path)
        except ValueError:
            continue  # outside the hive
        pure = PurePosixPath(rel)
        found = locate(pure)
        if found is None:
            continue
        deletions.add(rel)
        try:
            upserts.extend(_read(paths.hive, rel, pure, found, folders))
        except OutsideOwner as e:
            refused.append(str(e))
        except (OSError, msgspec.DecodeError, RecursionError):
            continue  # gone meanwhile, a directory, or not (yet) valid
    return Changes(upserts, deletions, tuple(refused))


def source_files(paths: HivePaths) -> list[Path]:
    """Every memory source in the hive now (what `reindex` reads)."""
    hive = paths.hive
    found = [paths.board, paths.tasks]
    found += sorted(paths.triage.glob("*.json")) + sorted((hive / PROMOTED_DIR).glob("*.json"))
    boxes = [paths.mailbox(HUMAN).root, *sorted(paths.agents_dir.glob("*"))]
    for box in boxes:
        found += [box / "memory.md", box / "memory" / "notes.md", box / "memory" / "archive.md"]
        for folder in MESSAGE_FOLDERS:
            found += sorted(box.joinpath(*folder).glob("*.json"))
    return [p for p in found if p.is_file()]


# --- the writes -------------------------------------------------------------------------------


def _index(paths: HivePaths, store: MemoryStore | None, files: set[Path]) -> list[Entry]:
    changes = entries_for(paths, files)
    if store is not None:
        store.apply(changes)
    else:
        with open_store(paths) as own:
            own.apply(changes)
    return changes.upserts


def note(paths: HivePaths, agent_id: str, text: str, store: MemoryStore | None = None) -> Entry:
    """Append `text` to the agent's notes.md and index it; the new note's entry.

    One O_APPEND write, so notes from concurrent processes never interleave. Raises
    ValueError for an empty or oversized note or an id that has no notes (the person).
    """
    if agent_id == HUMAN or not is_agent_id(agent_id):
        raise ValueError(
            f"{agent_id!r} has no notes: notes belong to an agent (set HIVE_AGENT_ID)."
        )
    body = text.strip()
    if not body:
        raise ValueError("the note is empty: say what to remember.")
    if len(body.encode()) > NOTE_MAX:
        raise ValueError(
            f"the note is {len(body.encode())} bytes; the limit is {NOTE_MAX}. "
            "Keep notes short and point to files for the rest."
        )
    file = paths.mailbox(agent_id).notes
    file.parent.mkdir(parents=True, exist_ok=True)
    stamp = now_iso()
    line = note_line(stamp, body)
    # A note must start its own piece: a blank line ends whatever the file ended with.
    # Written where the file really is, and only inside the agent's folder.
    try:
        real = confined(paths.hive, PurePosixPath(hive_relative(paths.hive, file)))
    except OutsideOwner as e:
        raise ValueError(str(e)) from None
    append_line(real, f"\n{line}\n".encode())
    rel = hive_relative(paths.hive, file)
    raw = _chunk(line.splitlines()).raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:16]
    entries = _index(paths, store, {file})
    # The last piece with this text is the one just appended (entries keep file order).
    return [e for e in entries if e.external_id.startswith(f"{rel}#{digest}")][-1]


def promote(paths: HivePaths, entry_id: str, by: str, store: MemoryStore | None = None) -> Entry:
    """Make a private entry (note, memory, archive) office knowledge: promoted/<id>.json.

    Only the manager or the person may; anyone else gets NotAllowed. Promoting again
    refreshes the snapshot. Deleting the file demotes it.
    """
    manager = load_office(paths.office_toml).office.manager
    if by not in (manager, HUMAN):
        raise NotAllowed(
            f"only the manager ({manager}) or the person can promote memory to the office. "
            f'Ask {manager}: `hive send --to god --subject "Promote {entry_id}"`.'
        )
    if store is None:
        with open_store(paths) as own:
            return promote(paths, entry_id, by, own)
    entry = store.lookup(entry_id)
    if entry is None:
        raise NotFound(f"no memory entry {entry_id!r}. `hive memory search` shows entry ids.")
    if entry.scope != "own":
        raise NotAllowed(
            f"{entry_id} is a {entry.source} entry already in office scope; only private "
            "memory (notes, memory, archive) is promoted."
        )
    record = Promoted(
        entry_id=entry.id,
        source=entry.source,
        owner=entry.owner,
        text=entry.text,
        promoted_by=by,
        promoted_at=now_iso(),
        tags=list(entry.tags),
    )
    folder = paths.hive / PROMOTED_DIR
    folder.mkdir(exist_ok=True)
    file = folder / f"{entry.id}.json"
    atomic_write(file, msgspec.json.format(msgspec.json.encode(record)) + b"\n")
    return _index(paths, store, {file})[0]
