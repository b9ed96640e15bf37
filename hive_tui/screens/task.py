"""One task opened from the Tasks tab: its fields, its questions and the answers, and its
history, oldest first: the ledger's dated facts (created, each question asked and
answered) and every change to it the hive's git history holds (the office commits the
ledger as it changes: status, assignee, priority, title, dependencies, result). Agents
write titles, specs and questions: all shown as Text."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import msgspec
import pygit2
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from hive_core.cli.render import clean, one_line
from hive_core.schema import Ledger, Task
from hive_tui.panels.tasks import task_detail

EVENT_WIDTH = 70
# Commits walked back for one task's history (the office commits at most twice a second).
HISTORY_COMMITS = 5000
# The fields whose changes the history lists.
TRACKED = ("status", "assignee", "priority", "title", "depends_on", "result")

Event = tuple[str, str]  # (ISO time, what happened)


def ledger_facts(task: Task) -> list[Event]:
    """The dated facts the ledger itself keeps of a task."""
    events = [(task.created_at, "created")]
    for n, q in enumerate(task.questions, start=1):
        asker = f" by {clean(q.asked_by)}" if q.asked_by else ""
        if q.asked_at:
            events.append((q.asked_at, f"question #{n} asked{asker}: {q.question}"))
        if q.answer is not None:
            events.append((q.answered_at or task.updated_at, f"question #{n} answered: {q.answer}"))
    return events


def changes(versions: list[tuple[str, Task | None]]) -> list[Event]:
    """What changed between consecutive committed versions of a task (oldest first)."""
    events = []
    before: Task | None = None
    for when, task in versions:
        if task is not None and before is not None:
            for name in TRACKED:
                old, new = getattr(before, name), getattr(task, name)
                if old != new:
                    events.append((when, f"{name}: {_shown(old)} -> {_shown(new)}"))
        elif task is None and before is not None:
            events.append((when, "removed from the ledger"))
        before = task
    return events


def _shown(value: object) -> str:
    if value is None or value == []:
        return "-"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def committed_versions(repo_path: Path, task_id: str) -> list[tuple[str, Task | None]]:
    """Each committed version of tasks.json that differs from the one before, with the
    task as it stood then (None: not in it), oldest first. Reads git: on a thread."""
    try:
        repo = pygit2.Repository(str(repo_path))
        head = repo.head.target
    except (pygit2.GitError, KeyError):
        return []  # no commit yet: the ledger's own facts are the history
    versions: list[tuple[str, Task | None]] = []
    last_blob = None
    for n, commit in enumerate(repo.walk(head)):
        if n >= HISTORY_COMMITS:
            break
        try:
            blob = commit.tree["tasks.json"]
        except KeyError:
            continue
        if blob.id == last_blob:
            continue
        last_blob = blob.id
        try:
            ledger = msgspec.json.decode(repo[blob.id].read_raw(), type=Ledger)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        when = datetime.fromtimestamp(commit.commit_time, UTC).isoformat(timespec="seconds")
        versions.append((when, next((t for t in ledger.tasks if t.id == task_id), None)))
    return versions[::-1]


def task_text(task: Task, committed: list[Event]) -> Text:
    text = task_detail(task)
    text.append("\n\nHistory\n", "bold underline")
    for when, what in sorted([*ledger_facts(task), *committed], key=lambda e: e[0][:19]):
        text.append(f"{when[:19].replace('T', ' ')}  ", "dim")
        text.append(one_line(what, EVENT_WIDTH) + "\n")
    text.append("\nesc closes this; open questions are answered from the Inbox.", "dim")
    return text


class TaskScreen(ModalScreen[None]):
    """The task at once; its git history is read on a thread and added when it is in."""

    DEFAULT_CSS = """
    TaskScreen { align: center middle; }
    #task { width: 100; max-width: 100%; height: auto; max-height: 100%; border: round $accent; background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss", "close")]

    def __init__(self, task: Task, repo_path: Path) -> None:
        super().__init__()
        self.task_shown = task
        self.repo_path = repo_path
        # Set once the git history is read and shown.
        self.history_read = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="task"):
            yield Static(task_text(self.task_shown, []), markup=False)

    def on_mount(self) -> None:
        self.query_one("#task").focus()
        self.run_worker(self._read_history(), exclusive=True)

    async def _read_history(self) -> None:
        versions = await asyncio.to_thread(committed_versions, self.repo_path, self.task_shown.id)
        self.query_one("#task Static", Static).update(task_text(self.task_shown, changes(versions)))
        self.history_read = True
