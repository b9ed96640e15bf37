"""Retention for what piles up in an agent's memory: its notes (notes.md) and the archive
(memory/archive.md), by age and by size. Off unless office.toml sets
`memory_retention_days` or `memory_retention_mb`; the office's MemoryKeeper sweeps every
agent periodically.

memory.md is not touched: the tidy keeps it within `memory_budget`. A note is as old as
the time `note()` stamped it; an archive section as old as the time in its heading (the
tidy writes "## <time>: ..."). A piece with no time (written by hand) is never dropped for
its age. The size cap counts notes.md and archive.md together and drops the oldest first:
archive sections (in file order), then notes. What was dropped is counted in changes.md,
so `git log -p` of the hive still shows it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec

from hive_core.fsio import atomic_write
from hive_core.memory.sources import confined, entries_for, read_whole, spans, to_chunk
from hive_core.memory.store import MemoryStore, open_store
from hive_core.paths import HivePaths
from hive_core.schema import OfficeSettings

# A section of archive.md as the tidy writes it: its heading holds the time.
_SECTION = re.compile(r"^## (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\b")
MIB = 1024 * 1024


class Retention(msgspec.Struct, kw_only=True, frozen=True):
    """How long notes are kept and how many bytes of notes and archive an agent keeps;
    None: no limit. Both None: retention is off."""

    days: float | None = None
    max_bytes: int | None = None

    @property
    def on(self) -> bool:
        return self.days is not None or self.max_bytes is not None

    @classmethod
    def of(cls, settings: OfficeSettings) -> Retention:
        mb = settings.memory_retention_mb
        return cls(
            days=settings.memory_retention_days,
            max_bytes=None if mb is None else int(mb * MIB),
        )


class Block(msgspec.Struct, frozen=True):
    """A droppable part of a file: its text (lines joined, newline-ended) and its time."""

    text: str
    at: str | None


def note_blocks(text: str) -> tuple[str, list[Block]]:
    """(what precedes the first note, the notes) of notes.md (pure). Lines between pieces
    (blank, headings) travel with the piece before them, so joining gives the file back."""
    lines = text.splitlines(keepends=True)
    found = spans([line.rstrip("\n") for line in lines])
    if not found:
        return text, []
    head = "".join(lines[: found[0][0]])
    blocks = []
    for i, (a, b) in enumerate(found):
        end = found[i + 1][0] if i + 1 < len(found) else len(lines)
        chunk = to_chunk([line.rstrip("\n") for line in lines[a:b]])
        blocks.append(Block("".join(lines[a:end]), chunk.stamp))
    return head, blocks


def archive_blocks(text: str) -> tuple[str, list[Block]]:
    """(what precedes the first dated section, the sections) of archive.md (pure)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _SECTION.match(line)]
    if not starts:
        return text, []
    head = "".join(lines[: starts[0]])
    blocks = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(lines)
        match = _SECTION.match(lines[start])
        assert match is not None
        blocks.append(Block("".join(lines[start:end]), match.group(1)))
    return head, blocks


def keep(
    archive: list[Block], notes: list[Block], rule: Retention, now: datetime
) -> tuple[list[Block], list[Block]]:
    """(the archive sections kept, the notes kept) under `rule` (pure): anything dated
    before the cutoff goes, then the oldest while the two together exceed the size cap."""
    if rule.days is not None:
        cutoff = (now - timedelta(days=rule.days)).strftime("%Y-%m-%dT%H:%M:%SZ")
        archive = [b for b in archive if b.at is None or b.at >= cutoff]
        notes = [b for b in notes if b.at is None or b.at >= cutoff]
    if rule.max_bytes is not None:
        total = sum(len(b.text.encode()) for b in (*archive, *notes))
        while total > rule.max_bytes and (archive or notes):
            dropped = archive.pop(0) if archive else notes.pop(0)
            total -= len(dropped.text.encode())
    return archive, notes


def sweep(
    paths: HivePaths,
    agent_id: str,
    rule: Retention,
    *,
    store: MemoryStore | None = None,
    now: datetime | None = None,
) -> int:
    """Apply `rule` to the agent's notes.md and archive.md; how many pieces were dropped.
    Under the tidy's locks, so a tidy or a note written meanwhile is never lost."""
    from hive_core.memory.tidy import notes_lock, tidy_lock  # tidy loads the providers

    if not rule.on:
        return 0
    now = now or datetime.now(UTC)
    box = paths.mailbox(agent_id)
    archive_file, notes_file = confined(paths, box.archive), confined(paths, box.notes)
    with tidy_lock(box), notes_lock(box):
        archive_text, notes_text = _read(archive_file), _read(notes_file)
        archive_head, archive = archive_blocks(archive_text)
        notes_head, notes = note_blocks(notes_text)
        kept_archive, kept_notes = keep(list(archive), list(notes), rule, now)
        dropped = len(archive) - len(kept_archive) + len(notes) - len(kept_notes)
        if not dropped:
            return 0
        if len(kept_archive) != len(archive):
            atomic_write(
                archive_file, (archive_head + "".join(b.text for b in kept_archive)).encode()
            )
        if len(kept_notes) != len(notes):
            atomic_write(notes_file, (notes_head + "".join(b.text for b in kept_notes)).encode())
        with open(confined(paths, box.changes), "a", encoding="utf-8") as log:
            log.write(
                f"## {now:%Y-%m-%dT%H:%M:%SZ}: retention dropped {dropped} piece(s) of notes "
                f"and archive ({_describe(rule)})\n\n"
            )
    changes = entries_for(paths, [box.notes, box.archive])
    if store is not None:
        store.apply(changes)
    else:
        with open_store(paths) as own:
            own.apply(changes)
    return dropped


def _describe(rule: Retention) -> str:
    parts = []
    if rule.days is not None:
        parts.append(f"older than {rule.days:g} days")
    if rule.max_bytes is not None:
        parts.append(f"over {rule.max_bytes / MIB:g} MB")
    return ", ".join(parts)


def _read(path: Path) -> str:
    return read_whole(path, "swept by retention")
