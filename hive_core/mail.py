"""Reading and writing mailboxes: the operations behind `hive send/inbox/read/done`.

The sender side only ever writes a Draft into its own outbox; ids, times and hops are
the router's business.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from hive_core.config import agent
from hive_core.errors import OfficeError
from hive_core.fsio import UnsafeFile, atomic_write, ensure_dir, is_temp_name, read_regular
from hive_core.kick import kick
from hive_core.paths import HivePaths, Mailbox
from hive_core.schema import (
    BODY_MAX,
    JSON_DEPTH_MAX,
    MESSAGE_FILE_MAX,
    SPECIAL_RECIPIENTS,
    SUBJECT_MAX,
    TOKEN_MAX,
    Act,
    Cursor,
    Draft,
    Message,
    OfficeConfig,
    is_agent_id,
    json_depth,
)

_decoder = msgspec.json.Decoder(Message)


def outbox_name() -> str:
    """A sortable, collision-free file name for a new outbox entry."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}-{os.urandom(4).hex()}.json"


def write_draft(box: Mailbox, draft: Draft) -> Path:
    """Put a draft in the outbox atomically (the router never sees half a file). An
    outbox that is not a real folder is moved aside first, as the router would: a draft
    never goes where a symlink points."""
    box.root.mkdir(parents=True, exist_ok=True)
    ensure_dir(box.outbox)
    path = box.outbox / outbox_name()
    atomic_write(path, msgspec.json.encode(draft))
    return path


def message_names(folder: Path) -> list[str]:
    """Names of the message files in a folder, oldest first (ids sort by time)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return [n for n in sorted(names) if n.endswith(".json") and not is_temp_name(n)]


def message_files(folder: Path) -> list[Path]:
    """Message files in a folder, oldest first (ids sort by time)."""
    return [folder / n for n in message_names(folder)]


class BadMessage(OfficeError, msgspec.DecodeError):
    """A file in a mailbox that is not a message the office can read; the text says why.
    A DecodeError, so callers that catch the decoder's errors catch this too."""


def load_message(path: Path) -> Message:
    """One message file, read without following a symlink and decoded within the
    office's limits. FileNotFoundError if it is gone; BadMessage (never a decoder's or
    the interpreter's own error) if it is not a message."""
    try:
        raw = read_regular(path, MESSAGE_FILE_MAX)
    except UnsafeFile as e:
        raise BadMessage(str(e)) from None
    if json_depth(raw) > JSON_DEPTH_MAX:
        raise BadMessage(f"it is JSON nested deeper than {JSON_DEPTH_MAX} levels.")
    try:
        return _decoder.decode(raw)
    except msgspec.DecodeError as e:  # ValidationError included
        raise BadMessage(f"it is not a message ({e}).") from None


def iter_inbox(
    box: Mailbox, on_bad: Callable[[Path, str], None] | None = None
) -> Iterator[Message]:
    """Unread messages, oldest first. A file that vanished meanwhile is skipped; one that
    is not a message is skipped and passed to `on_bad` with the reason. Never raises for
    a file: one bad file must not hide the rest of the mail."""
    for path in message_files(box.inbox):
        try:
            yield load_message(path)
        except FileNotFoundError:
            continue
        except (BadMessage, OSError) as e:
            if on_bad is not None:
                on_bad(path, str(e))


def is_safe_id(message_id: str) -> bool:
    """Usable as a file name inside a mailbox folder: an id can never name a path."""
    return (
        0 < len(message_id) <= TOKEN_MAX
        and "/" not in message_id
        and not message_id.startswith(".")
        and message_id.isprintable()
    )


def find_message(box: Mailbox, message_id: str) -> tuple[Message, Path] | None:
    """A message this mailbox received (unread or done) or sent, by id. A file under
    that name that is not a readable message is passed over."""
    if not is_safe_id(message_id):
        return None
    for folder in (box.inbox, box.done, box.sent):
        path = folder / f"{message_id}.json"
        try:
            return load_message(path), path
        except (BadMessage, OSError):
            continue
    return None


def mark_done(box: Mailbox, message_id: str) -> bool:
    """Move an unread message to inbox/.done and advance the cursor. False if not unread."""
    if not is_safe_id(message_id):
        return False
    src = box.inbox / f"{message_id}.json"
    ensure_dir(box.done)
    try:
        os.rename(src, box.done / src.name)
    except FileNotFoundError:
        return False
    cursor = read_cursor(box)
    if cursor.last_processed is None or message_id > cursor.last_processed:
        # No fsync: the cursor is a hint (a lost one reads as fresh), and `hive done`
        # should not wait on the disk for it.
        cursor_json = msgspec.json.encode(Cursor(last_processed=message_id)) + b"\n"
        atomic_write(box.cursor, cursor_json, fsync=False)
    return True


def read_cursor(box: Mailbox) -> Cursor:
    """The cursor, or a fresh one if it is missing or not one (it is only a hint)."""
    try:
        raw = read_regular(box.cursor, 4 * TOKEN_MAX)
    except (OSError, UnsafeFile):
        return Cursor()
    if json_depth(raw) > JSON_DEPTH_MAX:
        return Cursor()
    try:
        return msgspec.json.decode(raw, type=Cursor)
    except msgspec.DecodeError:
        return Cursor()


# --- composing drafts (pure: the CLI validates with these before writing anything) -------


def check_recipient(config: OfficeConfig, sender: str, to: str) -> str | None:
    """Why `sender` cannot address `to`, as a sentence with the fix; None if it can."""
    if to == sender or (to == "god" and sender == config.office.manager):
        return f"{to!r} is you; mail to yourself goes nowhere. Pick a teammate from `hive roster`."
    if to in SPECIAL_RECIPIENTS:
        return None
    if not is_agent_id(to):
        return (
            f"{to!r} is not an address. Use an agent id from `hive roster`, "
            "or god, human, broadcast or triage."
        )
    spec = agent(config, to)
    if spec is None:
        return (
            f"there is no agent {to!r} in this office. `hive roster` lists the ids; "
            "god, human, broadcast and triage also work."
        )
    if spec.archived:
        return f"{to!r} is archived and reads no mail. Send it to god if it still matters."
    return None


def check_draft(draft: Draft) -> str | None:
    """What makes a draft undeliverable (empty, limits, encoding), as a sentence; None
    if fine. Every sender (the CLI, MCP, the app, the person's answers) asks this, so each
    rule is said one way."""
    if not draft.body.strip():
        # A reply's subject is made for it ("Re: ..."), so it says nothing by itself.
        if draft.in_reply_to is not None:
            return "the reply is empty: give it a body."
        if not draft.subject.strip():
            return "the message is empty: give it a body, or at least a subject."
    if len(draft.subject) > SUBJECT_MAX:
        return (
            f"the subject is {len(draft.subject)} characters; the limit is {SUBJECT_MAX}. "
            "Shorten it and put the details in the body."
        )
    if "\n" in draft.subject or "\r" in draft.subject:
        return "the subject must be one line. Put the rest in the body."
    try:
        # A str from argv or a file can hold lone surrogates; they cannot be encoded.
        draft.subject.encode()
        size = len(draft.body.encode())
    except UnicodeEncodeError:
        return "the text is not valid UTF-8. Convert it to UTF-8 and try again."
    if size > BODY_MAX:
        return (
            f"the body is {size} bytes; the limit is {BODY_MAX}. "
            "Shorten it or point to a file instead of pasting it."
        )
    return None


def draft_problem(config: OfficeConfig, sender: str, draft: Draft) -> str | None:
    """Why `sender` cannot send `draft`, as a sentence with the fix; None if it can."""
    return check_recipient(config, sender, draft.to) or check_draft(draft)


class DraftRefused(OfficeError, ValueError):
    """The draft cannot be sent; the message is draft_problem's sentence."""


def send(paths: HivePaths, config: OfficeConfig, sender: str, draft: Draft) -> tuple[Path, bool]:
    """The one way a draft leaves its sender: checked, queued in the sender's outbox,
    and the office nudged. Returns where it was queued and whether an office listened;
    raises DraftRefused before writing anything."""
    problem = draft_problem(config, sender, draft)
    if problem:
        raise DraftRefused(problem)
    path = write_draft(paths.mailbox(sender), draft)
    return path, kick(paths, sender)


def reply_subject(subject: str) -> str:
    """`Re: <subject>`, never `Re: Re: ...`, within the subject limit."""
    subject = subject.strip()
    if subject[:3].lower() == "re:":
        return subject[:SUBJECT_MAX]
    return f"Re: {subject}".rstrip()[:SUBJECT_MAX]


def reply_draft(parent: Message, act: Act, body: str, *, needs_human: bool = False) -> Draft:
    """A reply to `parent`: to its sender, in its thread, about its task."""
    return Draft(
        to=parent.sender,
        act=act,
        subject=reply_subject(parent.subject),
        body=body,
        in_reply_to=parent.id,
        conversation=parent.conversation,
        task=parent.task,
        needs_human=needs_human,
    )


def triage_draft(text: str) -> Draft:
    """A request for the manager's triage queue; its first line is the subject."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if len(first) > SUBJECT_MAX:
        first = first[: SUBJECT_MAX - 1] + "…"
    return Draft(to="triage", act="request", subject=first, body=text)
