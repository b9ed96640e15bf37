"""What the index holds: one Entry per searchable piece of the hive, and the changes a
set of hive files calls for. Shared by `sources` (which builds them from files) and
`store` (which keeps them in memory.db); neither is imported here.
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, NamedTuple

import msgspec

Source = Literal[
    "note", "memory", "archive", "board", "task", "triage", "message", "promoted", "ci"
]
SOURCES: tuple[Source, ...] = (
    "note",
    "memory",
    "archive",
    "board",
    "task",
    "triage",
    "message",
    "promoted",
    "ci",
)
Scope = Literal["own", "office"]

OFFICE = "office"


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

    @property
    def whose(self) -> str:
        """Whose it is, as a search shows it: an agent's private memory, a copy of mail
        in someone's mailbox, or the office's knowledge."""
        if self.scope == "own":
            return f"private:{self.owner}"
        return f"mail:{self.owner}" if self.participants else "office"


class Changes(NamedTuple):
    """What a set of changed hive files means for the index.

    Every entry at a path in `deletions` that is not among `upserts` is removed, so a
    rewritten file loses its old pieces and a deleted file loses all of them. `refused`
    says which source files were not read and why (a symlink out of its owner's folder).
    """

    upserts: list[Entry]
    deletions: set[str]
    refused: tuple[str, ...] = ()


def entry_id(source: str, external_id: str) -> str:
    """A stable id for (source, external_id): the same after any reindex."""
    return hashlib.sha256(f"{source}\0{external_id}".encode()).hexdigest()[:16]


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def hive_relative(hive: Path, path: Path | str) -> str:
    """`path` as stored in the index: relative to the hive, POSIX separators. A source
    beside the hive (the CI-log cache under the home) reads `../ci-logs/...`."""
    p = Path(path)
    return (Path(os.path.relpath(p, hive)) if p.is_absolute() else p).as_posix()
