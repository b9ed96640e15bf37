"""The tidy's decisions, pure: fold an agent's notes into its memory index within a budget.

    parse_notes(notes_md) -> [Note]
    fold_by_rule(index, notes, budget) -> Fold          never loses a note
    summary_prompt(index, notes, budget)               what the agent's CLI is asked
                                                       (with SYSTEM_PROMPT, ANSWER_SCHEMA)
    check_answer(answer, notes, budget) -> Fold        its answer, checked
    choose_fold(index, notes, budget, summariser) -> Fold
    should_tidy(notes_bytes, index_bytes, idle, budget, notes=0) -> bool

The effects (locks, the order of writes, the CLI run) are in memory/tidy.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import msgspec

from hive_core.errors import OfficeError

# Below this an index cannot hold its title and a single useful line.
MIN_BUDGET = 256
# Notes pile up past either of these: fold them before the agent's next start.
PILE_BYTES = 2 * 1024
PILE_NOTES = 20
# A change names its item by its first line, cut to this many characters.
ITEM_CHARS = 120

ChangeKind = Literal["added", "updated", "removed"]
Method = Literal["rule", "cli"]


class Change(msgspec.Struct, frozen=True):
    kind: ChangeKind
    item: str
    reason: str


@dataclass(frozen=True)
class Note:
    """One note from notes.md; `id` (n1, n2, ...) names it within one tidy."""

    id: str
    text: str
    at: str | None = None
    # As written in notes.md (list marker and time included): what the archive keeps.
    raw: str = ""


@dataclass(frozen=True)
class Fold:
    """What a tidy decided: the new index, its changes and what goes to the archive."""

    index: str
    changes: tuple[Change, ...]
    archived: tuple[str, ...]
    method: Method
    # Why the summariser's answer was not used, when it was asked and failed.
    fallback: str | None = None


class SummaryError(OfficeError):
    """The summariser gave no usable answer; the message says what was wrong."""


Summariser = Callable[[str, Sequence[Note], int], Fold]


# --- when to tidy -----------------------------------------------------------------------


def should_tidy(
    notes_bytes: int, index_bytes: int, idle: bool, budget: int, *, notes: int = 0
) -> bool:
    """Fold when notes pile up, when the agent is idle with notes waiting, or when the
    index has outgrown its budget (a hand edit, or a smaller budget in office.toml)."""
    if index_bytes > budget:
        return True
    if notes_bytes == 0:
        return False
    return idle or notes_bytes > PILE_BYTES or notes > PILE_NOTES


# --- reading notes and the index (pure) -------------------------------------------------


_ITEM = re.compile(r"(?:[-*+]|\d+[.)])\s")
_BLOCK_START = re.compile(rf"{_ITEM.pattern}|#")


def split_blocks(index: str) -> list[str]:
    """The index as blocks of whole lines, each ending with its trailing blank lines:
    a block starts at an unindented bullet or heading, or at unindented text after a
    blank line; indented lines continue the block above. Joining gives `index` back."""
    blocks: list[str] = []
    after_blank = True
    for line in index.splitlines(keepends=True):
        blank = not line.strip()
        starts = not blank and not line[0].isspace() and (after_blank or _BLOCK_START.match(line))
        if starts or not blocks:
            blocks.append(line)
        else:
            blocks[-1] += line
        after_blank = blank
    return blocks


def unmarked(text: str) -> str:
    """`text` without the list marker it starts with, if any."""
    marker = _ITEM.match(text)
    return text[marker.end() :] if marker else text


# How `sources.note_line` starts a note: "- 2026-11-30T09:00:00Z text".
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+")


def parse_notes(text: str) -> list[Note]:
    """Every note of notes.md, one per block (`split_blocks`): a note as `note()` writes
    it is one list item, and text added by hand still falls into some block, so joining
    the blocks gives the file back and nothing in it is skipped."""
    notes: list[Note] = []
    for block in split_blocks(text):
        raw = block.strip()
        if not raw:
            continue
        body = unmarked(raw)
        stamp = _STAMP.match(body)
        body = body[stamp.end() :] if stamp else body
        lines = [line.strip() for line in body.splitlines()]
        notes.append(
            Note(f"n{len(notes) + 1}", "\n".join(lines), stamp.group(1) if stamp else None, raw)
        )
    return notes


def is_title(block: str) -> bool:
    return block.startswith("# ")


def bullet(note: Note) -> str:
    """A note as an index bullet: dated when the note is, continuation lines indented
    so they stay inside the bullet."""
    lines = [line.rstrip() for line in note.text.strip().splitlines()] or [""]
    date = f"({note.at[:10]}) " if note.at else ""
    rest = "".join(f"\n  {line}" if line else "\n" for line in lines[1:])
    return f"- {date}{lines[0]}{rest}\n"


def excerpt(block: str) -> str:
    """A block's first meaningful line, short: how a change names its item."""
    first = next((line.strip() for line in block.splitlines() if line.strip()), "")
    first = unmarked(first).lstrip()
    return first if len(first) <= ITEM_CHARS else first[: ITEM_CHARS - 1] + "…"


def size(text: str) -> int:
    return len(text.encode())


# --- the rule: never loses a note (pure) ------------------------------------------------


def fold_by_rule(index: str, notes: Sequence[Note], budget: int) -> Fold:
    """Append every note as a bullet, then move the oldest blocks (the title last) to
    the archive until the index fits its budget."""
    check_budget(budget)
    blocks = split_blocks(index)
    if blocks and not blocks[-1].endswith("\n"):
        blocks[-1] += "\n"
    if notes and blocks and not blocks[-1].endswith("\n\n") and not _ITEM.match(blocks[-1]):
        blocks[-1] += "\n"  # the notes' list starts after a paragraph or a heading
    changes = []
    for note in notes:
        blocks.append(bullet(note))
        when = f" of {note.at}" if note.at else ""
        changes.append(Change("added", excerpt(blocks[-1]), f"note{when} folded into the index"))
    archived = []
    over = size("".join(blocks))
    reason = f"moved to archive.md: the index was {over} bytes, over its {budget}-byte budget"
    while size("".join(blocks)) > budget:
        # The oldest material is at the top; the title goes only if nothing else is left.
        victim = next((i for i, b in enumerate(blocks) if not is_title(b)), 0)
        archived.append(blocks.pop(victim))
        changes.append(Change("removed", excerpt(archived[-1]), reason))
    return Fold("".join(blocks), tuple(changes), tuple(archived), "rule")


def check_budget(budget: int) -> None:
    if budget < MIN_BUDGET:
        raise ValueError(
            f"a memory budget of {budget} bytes is too small; use at least {MIN_BUDGET}."
        )


# --- the summariser's question and its answer (pure) -----------------------------


class _Change(msgspec.Struct, forbid_unknown_fields=True):
    kind: ChangeKind
    item: str
    reason: str
    notes: list[str]


class _Answer(msgspec.Struct, forbid_unknown_fields=True):
    index: str
    changes: list[_Change]


# The answer's JSON Schema (a provider hands it to its CLI: claude's --json-schema).
ANSWER_SCHEMA = msgspec.json.encode(
    {
        "type": "object",
        "properties": {
            "index": {"type": "string"},
            "changes": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"enum": ["added", "updated", "removed"]},
                        "item": {"type": "string"},
                        "reason": {"type": "string"},
                        "notes": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["kind", "item", "reason", "notes"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["index", "changes"],
        "additionalProperties": False,
    }
).decode()

SYSTEM_PROMPT = (
    "You keep the long-term memory index of a software agent. You have no tools and need "
    "none: read the index and the notes you are given and return the new index and the "
    "itemised changes through the StructuredOutput tool, nothing else."
)


def summary_prompt(index: str, notes: Sequence[Note], budget: int) -> str:
    listed = "\n".join(
        f'<note id="{n.id}"{f" at={n.at!r}" if n.at else ""}>\n{n.text.strip()}\n</note>'
        for n in notes
    )
    return f"""\
Fold the notes below into the memory index below.

Rules:
- The new index is Markdown, at most {budget} bytes of UTF-8 (it is {size(index)} now).
  Keep its first line (the title). Short lines, one fact each, grouped under headings.
  Keep what will matter in later sessions; drop what is stale or duplicated.
- List every change: "added" (a new item), "updated" (an existing item changed),
  "removed" (an item or a note dropped). Each has the item's text and a short reason.
- Every note must be listed, by id, in the "notes" of at least one change: a note you
  drop is a "removed" change that says why. Changes to old items have "notes": [].
- The notes' own words are archived and stay searchable, so condense freely.

<index>
{index}</index>

<notes>
{listed}
</notes>
"""


def check_answer(answer: object, notes: Sequence[Note], budget: int) -> Fold:
    """The summariser's answer (the structured value its CLI returned) as a Fold;
    SummaryError says what is wrong with it."""
    try:
        checked = msgspec.convert(answer, _Answer)
    except msgspec.ValidationError as e:
        raise SummaryError(f"the answer does not have the required shape ({e})") from None
    index = checked.index if checked.index.endswith("\n") else checked.index + "\n"
    if not index.strip():
        raise SummaryError("the new index is empty")
    if size(index) > budget:
        raise SummaryError(f"the new index is {size(index)} bytes, over the {budget}-byte budget")
    known = {n.id for n in notes}
    named = {i for c in checked.changes for i in c.notes}
    if named - known:
        raise SummaryError(f"the changes name notes that do not exist: {sorted(named - known)}")
    if known - named:
        raise SummaryError(f"notes not accounted for by any change: {sorted(known - named)}")
    for c in checked.changes:
        if not c.reason.strip() or not c.item.strip():
            raise SummaryError(f"a {c.kind!r} change has no item or no reason")
    changes = tuple(Change(c.kind, excerpt(c.item), c.reason.strip()) for c in checked.changes)
    # The model condenses; the notes' own words go to the archive so none is lost.
    return Fold(index, changes, tuple(f"{n.raw}\n" for n in notes), "cli")


# --- choosing a fold and recording it (pure) -------------------------------------


def choose_fold(
    index: str, notes: Sequence[Note], budget: int, summariser: Summariser | None
) -> Fold:
    """The summariser's fold when it gives a valid one, else the rule's, saying why."""
    if summariser is None or not notes:
        return fold_by_rule(index, notes, budget)
    try:
        return summariser(index, notes, budget)
    except SummaryError as e:
        fold = fold_by_rule(index, notes, budget)
        return Fold(fold.index, fold.changes, fold.archived, "rule", fallback=str(e))


def changes_section(fold: Fold, notes: int, budget: int, now: datetime) -> str:
    how = "folded by the agent's CLI" if fold.method == "cli" else "folded by rule"
    head = f"## {now:%Y-%m-%dT%H:%M:%SZ}: {notes} notes {how}; index {size(fold.index)}/{budget} bytes\n\n"
    why = f"The summariser's answer was not used: {fold.fallback}\n\n" if fold.fallback else ""
    items = "".join(f"- {c.kind}: {c.item} ({c.reason})\n" for c in fold.changes)
    return f"{head}{why}{items}\n"


def archive_section(fold: Fold, now: datetime) -> str:
    what = "notes folded by the agent's CLI" if fold.method == "cli" else "moved out of the index"
    return f"## {now:%Y-%m-%dT%H:%M:%SZ}: {what}\n\n{''.join(fold.archived)}\n"
