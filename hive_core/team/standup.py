"""The standup the manager gets when the office opens: who is here, what is open, what
waits in triage. Built from the hive once the team's CLIs have started (so it says who
runs), delivered as a message; the manager's CLI is started first (its pane is where a
login is settled) with a one-line first prompt pointing at it (nothing is typed into its
pane). One standup per start: an unread one the office left at an earlier start is
replaced, never a read one, never mail the office did not write."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

import msgspec

from hive_core.ids import created_at_of, new_message_id
from hive_core.paths import HivePaths
from hive_core.schema import ROUTER, Ledger, Message, OfficeConfig, RegistryEntry

FIRST_PROMPT = (
    "The office just opened. Your standup comes to your inbox as soon as the team has "
    "started: run `hive inbox`, read it, then run the floor."
)
# The tail of a standup's message id (the router's ids never end in it).
STANDUP = "-standup"


def open_tasks(paths: HivePaths) -> list[str]:
    try:
        ledger = msgspec.json.decode(paths.tasks.read_bytes(), type=Ledger)
    except (FileNotFoundError, msgspec.DecodeError, msgspec.ValidationError):
        return []
    return [
        f"- {t.id} [{t.status}] {t.title} ({t.assignee or 'unassigned'})"
        + (
            f", {sum(q.answer is None for q in t.questions)} question(s) for the person"
            if any(q.answer is None for q in t.questions)
            else ""
        )
        for t in ledger.tasks
        if t.status != "done"
    ]


def unhandled_triage(paths: HivePaths, manager: str) -> list[str]:
    """Triage requests whose notice the manager has not marked done."""
    done = paths.mailbox(manager).done
    items = []
    for name in sorted(os.listdir(paths.triage)) if paths.triage.is_dir() else []:
        if not name.endswith(".json") or name.startswith("."):
            continue
        msg_id = name.removesuffix(".json")
        if (done / f"{msg_id}-triage.json").exists():
            continue
        try:
            message = msgspec.json.decode((paths.triage / name).read_bytes(), type=Message)
        except msgspec.DecodeError:
            continue
        items.append(f"- {msg_id} from {message.sender}: {message.subject or message.body[:80]}")
    return items


def replaced(unread: Iterable[Message], ours: Callable[[str], bool]) -> list[str]:
    """The unread standups a new one replaces: those the office wrote (`ours`: by its
    own record of what it delivered), never one the manager read (not in `unread`)."""
    return [m.id for m in unread if m.id.endswith(STANDUP) and m.sender == ROUTER and ours(m.id)]


def presence(entry: RegistryEntry) -> str:
    """What the standup says of a teammate: a CLI spawned but not yet reporting its
    session is starting, not offline; one that is not running says why."""
    if entry.status == "offline" and entry.pid is not None:
        return "starting"
    if entry.status in ("offline", "exited") and entry.why:
        return f"{entry.status}: {entry.why}"
    return entry.status


def standup_message(
    paths: HivePaths, config: OfficeConfig, team: Iterable[RegistryEntry]
) -> Message:
    manager = config.office.manager
    roster = [
        f"- {e.id} ({e.name}, {e.role or 'no role'}): {presence(e)}"
        for e in team
        if e.id != manager
    ]
    tasks = open_tasks(paths)
    triage = unhandled_triage(paths, manager)
    body = "\n".join(
        [
            f"Standup for {config.office.name}.",
            "",
            "Team:",
            *(roster or ["- nobody else yet"]),
            "",
            "Open tasks:",
            *(tasks or ["- none"]),
            "",
            "Triage waiting (oldest first):",
            *(triage or ["- none"]),
            "",
            "Read the board (`hive board`), settle the plan, and get everyone working.",
        ]
    )
    msg_id = f"{new_message_id()}{STANDUP}"
    return Message(
        id=msg_id,
        conversation=msg_id,
        in_reply_to=None,
        sender=ROUTER,
        to=manager,
        act="inform",
        subject=f"Standup: {len(tasks)} open task(s), {len(triage)} triage request(s)",
        body=body,
        created_at=created_at_of(msg_id),
    )
