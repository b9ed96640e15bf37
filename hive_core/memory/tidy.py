"""The tidy step: fold an agent's notes into its bounded memory index.

    tidy(paths, agent_id, budget=..., summariser=None) -> Fold | None
    fold_by_rule(index, notes, budget) -> Fold                        (pure)
    summarise_with_cli(program, index, notes, budget, ...) -> Fold    (runs claude -p)
    should_tidy(notes_bytes, index_bytes, idle, budget, notes=0) -> bool

`agents/<id>/memory.md` is the index the agent reads at start; `hive memory note` appends
to `memory/notes.md`. A tidy writes, in this order, so that a crash between two steps
duplicates material at worst and never loses it:

1. `memory/archive.md`: what leaves the index, and (on the summariser path) the notes'
   own words; append-only and indexed by the search, so nothing folded is unfindable;
2. `memory.md`: the new index, atomically, within the budget;
3. `memory/changes.md`: a dated section listing every change (added, updated, removed)
   with its reason, so `git log -p` of the hive shows what the tidy did and why;
4. `memory/notes.md`: the notes just folded are dropped; any appended meanwhile stay.

The summariser path asks the agent's own CLI, headless and without tools, to condense;
its answer is checked (within budget, every note accounted for) and anything wrong
falls back to `fold_by_rule`, which never loses a note: each becomes a bullet of the
index, and the oldest material moves to the archive when the index outgrows its budget.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Literal

import click
import msgspec

from hive_core.caller import CallerError, authenticated_caller
from hive_core.config import ConfigError, agent, load_office
from hive_core.fsio import atomic_write
from hive_core.memory.sources import OutsideOwner, archive_file, confined, entries_for
from hive_core.memory.store import MemoryStore, open_store
from hive_core.paths import HivePaths, Mailbox, resolve_home
from hive_core.schema import HUMAN, AgentSpec

DEFAULT_BUDGET = 8 * 1024
# Below this an index cannot hold its title and a single useful line.
MIN_BUDGET = 256
# Notes pile up past either of these: fold them before the agent's next start.
PILE_BYTES = 2 * 1024
PILE_NOTES = 20
# How long the summariser may take before the rule does the job instead.
SUMMARY_TIMEOUT_S = 300.0
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


class SummaryError(Exception):
    """The summariser gave no usable answer; the message says what was wrong."""


Summariser = Callable[[str, Sequence[Note], int], Fold]


# --- where the tidy writes (beside notes.md) --------------------------------------------


def changes_path(box: Mailbox) -> Path:
    return box.notes.parent / "changes.md"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    # Dotfiles beside notes.md: never committed, never read as data (fsio.is_temp_name).
    # Not notes.md itself: it is replaced by a rename, and a lock on a replaced inode
    # guards nothing.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def notes_lock(box: Mailbox) -> contextlib.AbstractContextManager[None]:
    """Held only while notes.md is read and while the folded notes are dropped, so a
    note written meanwhile is never lost (an appender that takes it too cannot slip in
    between the last read and the rename) and never waits on a summariser."""
    return _locked(box.notes.parent / ".notes.lock")


def tidy_lock(box: Mailbox) -> contextlib.AbstractContextManager[None]:
    """One tidy at a time per agent; a second one waits and then finds the notes gone."""
    return _locked(box.notes.parent / ".tidy.lock")


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


# --- the summariser: the agent's own CLI, headless, no tools ---------------------------


class _Change(msgspec.Struct, forbid_unknown_fields=True):
    kind: ChangeKind
    item: str
    reason: str
    notes: list[str]


class _Answer(msgspec.Struct, forbid_unknown_fields=True):
    index: str
    changes: list[_Change]


# Given to `claude --json-schema`: the CLI offers the model a StructuredOutput tool with
# this input schema and returns its input as `structured_output`.
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


def parse_answer(raw: bytes, notes: Sequence[Note], budget: int) -> Fold:
    """Check the CLI's JSON result and turn it into a Fold; SummaryError says what is
    wrong with it."""
    try:
        result = msgspec.json.decode(raw)
    except msgspec.DecodeError as e:
        raise SummaryError(f"the CLI printed no JSON result ({e})") from None
    if not isinstance(result, dict) or result.get("is_error"):
        raise SummaryError(f"the CLI reported an error: {str(result)[:200]}")
    if "structured_output" not in result:
        raise SummaryError("the model did not return the structured answer")
    try:
        answer = msgspec.convert(result["structured_output"], _Answer)
    except msgspec.ValidationError as e:
        raise SummaryError(f"the answer does not have the required shape ({e})") from None
    index = answer.index if answer.index.endswith("\n") else answer.index + "\n"
    if not index.strip():
        raise SummaryError("the new index is empty")
    if size(index) > budget:
        raise SummaryError(f"the new index is {size(index)} bytes, over the {budget}-byte budget")
    known = {n.id for n in notes}
    named = {i for c in answer.changes for i in c.notes}
    if named - known:
        raise SummaryError(f"the changes name notes that do not exist: {sorted(named - known)}")
    if known - named:
        raise SummaryError(f"notes not accounted for by any change: {sorted(known - named)}")
    for c in answer.changes:
        if not c.reason.strip() or not c.item.strip():
            raise SummaryError(f"a {c.kind!r} change has no item or no reason")
    changes = tuple(Change(c.kind, excerpt(c.item), c.reason.strip()) for c in answer.changes)
    # The model condenses; the notes' own words go to the archive so none is lost.
    return Fold(index, changes, tuple(f"{n.raw}\n" for n in notes), "cli")


def summarise_with_cli(
    program: Sequence[str],
    index: str,
    notes: Sequence[Note],
    budget: int,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = SUMMARY_TIMEOUT_S,
) -> Fold:
    """Ask Claude Code (`program`, e.g. ["claude"] or the roster's command) to fold the
    notes, headless: `--tools ""` leaves it no tool but the StructuredOutput one that
    `--json-schema` adds, no session is saved, and the prompt goes on stdin (an index
    and notes can outgrow an argv string)."""
    argv = [
        *program,
        "-p",
        "--output-format=json",
        "--tools=",
        f"--json-schema={ANSWER_SCHEMA}",
        "--no-session-persistence",
        f"--system-prompt={SYSTEM_PROMPT}",
    ]
    try:
        done = subprocess.run(
            argv,
            input=summary_prompt(index, notes, budget).encode(),
            capture_output=True,
            env=None if env is None else dict(env),
            cwd=cwd,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SummaryError(f"could not run {program[0]}: {e}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).decode(errors="replace").strip()[-300:]
        raise SummaryError(f"{program[0]} exited with {done.returncode}: {tail}")
    return parse_answer(done.stdout, notes, budget)


def claude_summariser(
    program: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Summariser:
    def summarise(index: str, notes: Sequence[Note], budget: int) -> Fold:
        return summarise_with_cli(program, index, notes, budget, env=env, cwd=cwd)

    return summarise


# --- the tidy itself (effects) ---------------------------------------------------------


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


def append_text(path: Path, text: str) -> None:
    # A single O_APPEND write: readers and a concurrent appender never see half of it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def tidy(
    paths: HivePaths,
    agent_id: str,
    *,
    budget: int = DEFAULT_BUDGET,
    summariser: Summariser | None = None,
    store: MemoryStore | None = None,
    now: datetime | None = None,
) -> Fold | None:
    """Fold `agent_id`'s notes into its index (see the module docstring for the order of
    writes) and bring the search index up to date, through `store` or one opened for the
    call. None when there was nothing to do: no notes and the index within budget.
    OutsideOwner if one of the agent's memory files is a symlink out of its folder."""
    check_budget(budget)
    box = paths.mailbox(agent_id)
    archive = archive_file(paths, agent_id)
    now = now or datetime.now(UTC)
    # Everything the tidy reads or appends to stays in the agent's folder: a symlink out
    # (archive.md -> another's notes) stops it before it reads or writes anything.
    for file in (box.notes, box.memory, archive, changes_path(box)):
        confined(paths.hive, PurePosixPath(file.relative_to(paths.hive).as_posix()))
    with tidy_lock(box):
        with notes_lock(box):
            raw = _read(box.notes)
        index = _read(box.memory)
        notes = parse_notes(raw)
        if not notes and size(index) <= budget:
            return None
        fold = choose_fold(index, notes, budget, summariser)
        if fold.archived:
            append_text(archive, archive_section(fold, now))
        atomic_write(box.memory, fold.index.encode())
        append_text(changes_path(box), changes_section(fold, len(notes), budget, now))
        with notes_lock(box):
            # Notes appended while the summariser ran stay for the next tidy.
            atomic_write(box.notes, _read(box.notes).removeprefix(raw).encode())
    changes = entries_for(paths, [box.memory, box.notes, archive])
    if store is not None:
        store.apply(changes)
    else:
        with open_store(paths) as own:
            own.apply(changes)
    return fold


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


# --- `hive memory tidy` -------------------------------------------------------------------

# ctx.meta is shared with `hive --home` and `hive memory --home` (the same key).
_HOME_KEY = "hive.home"


def summariser_for(spec: AgentSpec, cwd: Path) -> Summariser | None:
    """The agent's own CLI as a summariser, where one is supported (claude)."""
    if spec.provider != "claude":
        return None
    program = [*(spec.command or ["claude"]), *(["--model", spec.model] if spec.model else [])]
    return claude_summariser(program, cwd=cwd)


def _remember_home(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.meta[_HOME_KEY] = value


@click.command("tidy")
@click.option("--agent", "agent_id", metavar="ID", help="Whose memory (default: yours).")
@click.option(
    "--budget",
    type=click.IntRange(MIN_BUDGET),
    default=DEFAULT_BUDGET,
    show_default=True,
    help="Most bytes memory.md may hold.",
)
@click.option("--rule", is_flag=True, help="Fold by rule; do not ask the agent's CLI.")
@click.option(
    "--home",
    metavar="DIR",
    expose_value=False,
    callback=_remember_home,
    help="Office home (default: $HIVE_HOME, else ~/.hive-office).",
)
def tidy_command(agent_id: str | None, budget: int, rule: bool) -> None:
    """Fold your notes into memory.md, keeping it within its budget.

    Every change (added, updated, removed, with its reason) is appended to
    agents/<id>/memory/changes.md; what leaves memory.md goes to memory/archive.md,
    which stays searchable. A claude agent's own CLI condenses the notes (headless,
    no tools); without one, or if its answer does not check out, every note becomes
    a line of memory.md and the oldest lines move to the archive.

    \b
      hive memory tidy
      hive memory tidy --agent jim --rule          (the person)
    """
    paths = HivePaths(resolve_home(click.get_current_context().meta.get(_HOME_KEY)))
    try:
        config = load_office(paths.office_toml)
        caller = authenticated_caller(paths, config)
    except (ConfigError, CallerError) as e:
        raise click.ClickException(str(e)) from None
    target = agent_id or caller
    if target == HUMAN:
        raise click.UsageError("the person has no memory to tidy; name an agent with --agent ID.")
    if caller not in (HUMAN, target):
        raise click.UsageError(f"you are {caller}: you can tidy only your own memory.")
    spec = agent(config, target)
    if spec is None:
        raise click.UsageError(f"there is no agent {target!r} in this office (`hive roster`).")
    box = paths.mailbox(target)
    summariser = None if rule else summariser_for(spec, box.notes.parent)
    try:
        fold = tidy(paths, target, budget=budget, summariser=summariser)
    except OutsideOwner as e:
        raise click.ClickException(str(e)) from None
    if fold is None:
        click.echo(f"{target}: nothing to tidy (no notes, memory.md within {budget} bytes).")
        return
    how = "by the agent's CLI" if fold.method == "cli" else "by rule"
    click.echo(
        f"{target}: {len(fold.changes)} changes {how}; memory.md {size(fold.index)}/{budget} "
        f"bytes; {len(fold.archived)} pieces to archive.md; see {changes_path(box)}"
    )
    if fold.fallback:
        click.echo(f"the agent's CLI was not used: {fold.fallback}", err=True)
