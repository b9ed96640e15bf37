"""The writes memory makes to the hive: an agent's note, a private entry promoted to
office knowledge, and forgetting or editing an entry. Each writes its hive file and
indexes it at once.

Who may forget or edit (`refusal`): a private entry (note, memory, archive) only its
owner; office knowledge (board, promoted) the manager or the person. Mail, tasks and
triage are not memory to change by hand: they have their own verbs and history.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator
from pathlib import Path

import msgspec

from hive_core.config import load_office
from hive_core.fsio import append_line, atomic_write
from hive_core.memory.entry import Entry, hive_relative, now_iso
from hive_core.memory.sources import (
    ITEM,
    STAMP,
    OutsideOwner,
    Promoted,
    chunks,
    confined,
    entries_for,
    find_piece,
    note_line,
    piece_key,
    spans,
    to_chunk,
)
from hive_core.memory.store import (
    MemoryStore,
    MemoryStoreError,
    NotAllowed,
    NotFound,
    open_store,
)
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, is_agent_id

NOTE_MAX = 16 * 1024


def index_files(
    paths: HivePaths, files: Collection[Path], store: MemoryStore | None = None
) -> list[Entry]:
    """Read `files` (sources that changed) into the index; the entries they hold now."""
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
        real = confined(paths, file)
    except OutsideOwner as e:
        raise ValueError(str(e)) from None
    append_line(real, f"\n{line}\n".encode())
    rel = hive_relative(paths.hive, file)
    # The note's first piece as the file will be split (a line of it that reads as a
    # heading ends the piece).
    digest = piece_key(chunks(line)[0].raw)
    entries = index_files(paths, {file}, store)
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
    paths.promoted.mkdir(exist_ok=True)
    file = paths.promoted / f"{entry.id}.json"
    atomic_write(file, msgspec.json.format(msgspec.json.encode(record)) + b"\n")
    return index_files(paths, {file}, store)[0]


# --- forget and edit ---------------------------------------------------------------------

# Sources whose entries are pieces of a markdown file: forgetting one removes its lines,
# editing one rewrites them in place.
_PIECES = frozenset({"note", "memory", "archive", "board"})
# A board rewritten between this module's read and write is read again, at most this often.
BOARD_RETRIES = 5


def refusal(entry: Entry, who: str, manager: str) -> str | None:
    """Why `who` may not forget or edit `entry`, or None if they may (pure)."""
    if entry.source in ("message", "triage"):
        return (
            f"{entry.id} is a message; mail is kept as sent. File it with `hive done ID`, "
            "or put what should be remembered in a note."
        )
    if entry.source == "task":
        return f"{entry.id} is a task; tasks change through `hive task`, which keeps their history."
    if entry.source not in _PIECES and entry.source != "promoted":
        return f"{entry.id} is a {entry.source} entry the office keeps; it is not changed by hand."
    if entry.scope == "own":
        if who != entry.owner:
            return (
                f"{entry.id} is not in your memory: private memory is forgotten or edited "
                "only by the agent it belongs to."
            )
        return None
    if who not in (manager, HUMAN):
        return (
            f"{entry.id} is office knowledge; only the manager ({manager}) or the person can "
            f'forget or edit it. Ask {manager}: `hive send --to god --subject "Forget {entry.id}"`.'
        )
    return None


def changeable(paths: HivePaths, store: MemoryStore, entry_id: str, by: str) -> Entry:
    """The entry `by` may forget or edit; NotFound or NotAllowed (saying why) otherwise.
    For the CLI to check before an editor shows an entry's text."""
    entry = store.lookup(entry_id)
    if entry is None:
        raise NotFound(f"no memory entry {entry_id!r}. `hive memory search` shows entry ids.")
    manager = load_office(paths.office_toml).office.manager
    if (why := refusal(entry, by, manager)) is not None:
        raise NotAllowed(why)
    return entry


def _key_of(entry: Entry) -> str:
    return entry.external_id.rpartition("#")[2]


def piece_lines(old: list[str], text: str) -> list[str]:
    """The lines that replace piece `old` with `text`, in its form: a note keeps its time,
    a list item its marker, a paragraph stays one (pure). Blank lines are dropped (they
    would end the piece) and a line that markdown would read as a heading is refused."""
    body = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not body:
        raise ValueError("the new text is empty; to drop the entry, forget it.")
    if any(line.startswith("#") for line in body):
        raise ValueError(
            "a line of the new text starts with '#', which markdown reads as a heading; reword it."
        )
    first = old[0]
    marker = ITEM.match(first)
    if marker is None:
        # A paragraph: a line that reads as a list item would start a piece of its own.
        return [body[0], *(line if not ITEM.match(line) else f"  {line}" for line in body[1:])]
    stamp = STAMP.match(first[marker.end() :])
    if stamp is not None:
        return note_line(stamp.group(1), "\n".join(body)).splitlines()
    return [f"{marker.group(0)}{body[0]}", *(f"  {line}" for line in body[1:])]


def without_piece(lines: list[str], start: int, end: int) -> list[str]:
    """`lines` without the piece at [start, end), and without the blank line that would
    then double the one before it (pure)."""
    out = lines[:start] + lines[end:]
    if 0 < start < len(out) and not out[start].strip() and not out[start - 1].strip():
        del out[start]
    return out


def key_at(lines: list[str], start: int) -> str:
    """The key (`digest` or `digest-N`) the index gives the piece starting at `start`."""
    target = piece_key(to_chunk(lines[start : next(b for a, b in spans(lines) if a == start)]).raw)
    seen = 0
    for a, b in spans(lines):
        chunk = to_chunk(lines[a:b])
        if chunk.text and piece_key(chunk.raw) == target:
            seen += 1
        if a == start:
            break
    return target if seen <= 1 else f"{target}-{seen}"


@contextlib.contextmanager
def _piece_locks(paths: HivePaths, entry: Entry) -> Iterator[None]:
    """What keeps the file's other writers out: an agent's memory files are the tidy's
    (its lock), notes.md also the appenders' (the notes lock)."""
    # Here, not at the top: tidy loads the providers, which searching never needs.
    from hive_core.memory.tidy import notes_lock, tidy_lock

    if entry.scope != "own":
        yield
        return
    box = paths.mailbox(entry.owner)
    with tidy_lock(box):
        if entry.source == "note":
            with notes_lock(box):
                yield
        else:
            yield


def _rewrite_piece(
    paths: HivePaths, entry: Entry, text: str | None, store: MemoryStore
) -> Entry | None:
    """Forget (text None) or rewrite the piece `entry` is; the new entry when rewritten."""
    file = paths.hive / entry.path
    if entry.scope == "own":
        try:
            real = confined(paths, file)
        except OutsideOwner as e:
            raise NotAllowed(str(e)) from None
    else:
        real = file
    with _piece_locks(paths, entry):
        for _ in range(BOARD_RETRIES):
            try:
                data = real.read_bytes()
            except FileNotFoundError:
                data = b""
            lines = data.decode("utf-8", errors="replace").splitlines()
            found = find_piece(lines, _key_of(entry))
            if found is None:
                index_files(paths, {file}, store)  # the index was behind the file: catch it up
                raise NotFound(f"{entry.id} is no longer in {entry.path} (it changed meanwhile).")
            start, end = found
            if text is None:
                new = without_piece(lines, start, end)
            else:
                new = [*lines[:start], *piece_lines(lines[start:end], text), *lines[end:]]
            out = "\n".join(new) + ("\n" if new else "")
            # The board has no lock of its own (`hive board` replaces it whole): write only
            # over the very file that was read, or read it again.
            if entry.scope == "own" or real.read_bytes() == data:
                atomic_write(real, out.encode())
                break
        else:
            raise MemoryStoreError(f"{entry.path} kept changing; try again.")
    entries = index_files(paths, {file}, store)
    if text is None:
        return None
    key = f"{entry.path}#{key_at(new, start)}"
    return next(e for e in entries if e.external_id == key)


def forget(paths: HivePaths, entry_id: str, by: str, store: MemoryStore | None = None) -> Entry:
    """Remove entry `entry_id` from the hive file it came from (and so from the index);
    the entry as it was. NotAllowed for anyone `refusal` names, NotFound for no entry."""
    if store is None:
        with open_store(paths) as own:
            return forget(paths, entry_id, by, own)
    entry = changeable(paths, store, entry_id, by)
    if entry.source == "promoted":
        # promoted/<id>.json is the office's own file (promote wrote it); deleting it demotes.
        file = paths.hive / entry.path
        file.unlink(missing_ok=True)
        index_files(paths, {file}, store)
    else:
        _rewrite_piece(paths, entry, None, store)
    return entry


def edit(
    paths: HivePaths, entry_id: str, by: str, text: str, store: MemoryStore | None = None
) -> Entry:
    """Replace the text of entry `entry_id` in its hive file; the entry as it now is (a
    new id: an entry's id follows its text). Permissions as for `forget`; ValueError for
    an empty or oversized text."""
    if len(text.encode()) > NOTE_MAX:
        raise ValueError(f"the text is {len(text.encode())} bytes; the limit is {NOTE_MAX}.")
    if store is None:
        with open_store(paths) as own:
            return edit(paths, entry_id, by, text, own)
    entry = changeable(paths, store, entry_id, by)
    if entry.source != "promoted":
        changed = _rewrite_piece(paths, entry, text, store)
        assert changed is not None
        return changed
    if not text.strip():
        raise ValueError("the new text is empty; to drop the entry, forget it.")
    file = paths.hive / entry.path
    record = msgspec.json.decode(file.read_bytes(), type=Promoted)
    record.text = text.strip()
    atomic_write(file, msgspec.json.format(msgspec.json.encode(record)) + b"\n")
    return index_files(paths, {file}, store)[0]
