"""The standup the manager gets when the office opens: who is here, what is open, what
waits in triage. Built from the hive; delivered as a message, and the manager's CLI is
started with a one-line first prompt pointing at it (nothing is typed into its pane)."""

from __future__ import annotations

import os
from collections.abc import Iterable

import msgspec

from hive_core.ids import created_at_of, new_message_id
from hive_core.paths import HivePaths
from hive_core.schema import ROUTER, Ledger, Message, OfficeConfig, RegistryEntry

FIRST_PROMPT = (
    "The office just opened. Your standup is in your inbox: run `hive inbox`, read it, "
    "then run the floor."
)


def open_tasks(paths: HivePaths) -> list[str]:
    try:
        ledger = msgspec.json.decode(paths.tasks.read_bytes(), type=Ledger)
    except (FileNotFoundError, msgspec.DecodeError, msgspec.ValidationError):
        return []
    return [
        f"- {t.id} [{t.status}] {t.title} ({t.assignee or 'unassigned'})"
        + (f", {sum(q.answer is None for q in t.questions)} question(s) for the person"
           if any(q.answer is None for q in t.questions) else "")
        for t in ledger.tasks if t.status != "done"
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


def standup_message(paths: HivePaths, config: OfficeConfig, team: Iterable[RegistryEntry]) -> Message:
    manager = config.office.manager
    roster = [f"- {e.id} ({e.name}, {e.role or 'no role'}): {e.status}" for e in team if e.id != manager]
    tasks = open_tasks(paths)
    triage = unhandled_triage(paths, manager)
    body = "\n".join([
        f"Standup for {config.office.name}.",
        "",
        "Team:", *(roster or ["- nobody else yet"]),
        "",
        "Open tasks:", *(tasks or ["- none"]),
        "",
        "Triage waiting (oldest first):", *(triage or ["- none"]),
        "",
        "Read the board (`hive board`), settle the plan, and get everyone working.",
    ])
    msg_id = f"{new_message_id()}-standup"
    return Message(
        id=msg_id, conversation=msg_id, in_reply_to=None, sender=ROUTER, to=manager, act="inform",
        subject=f"Standup: {len(tasks)} open task(s), {len(triage)} triage request(s)", body=body,
        created_at=created_at_of(msg_id),
    )
