"""One task opened from the Tasks tab: its fields, its questions and the answers, and its
history, oldest first: the ledger's dated facts (created, each question asked and
answered) and every change to it the hive's git history holds (the office commits the
ledger as it changes: status, assignee, priority, title, dependencies, result). Agents
write titles, specs and questions: all shown as Text.

`r` retries the task as the person: `hive task retry ID [--to AGENT]`, run by the office
(hive_tui/verbs.py): one more attempt, status doing, and the assignee mailed the spec with
the last checkpoint."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import msgspec
from rich.markup import escape
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from hive_core.paths import HivePaths
from hive_core.schema import Ledger, Task
from hive_core.text import one_line
from hive_core.text import shown as clean
from hive_tui import verbs
from hive_tui.panels.tasks import task_detail
from hive_tui.screens.form import FormScreen

if TYPE_CHECKING:
    import pygit2

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
    """Each committed version of tasks.json that differs from the one before, dated by
    the commit that introduced it (not a later one that only kept it), with the task as
    it stood then (None: not in it), oldest first. Reads git: on a thread."""
    # Imported here, when a task's history is first read: libgit2's binding is ~35 ms of
    # the app's start, before a first frame that never needs it.
    import pygit2

    try:
        repo = pygit2.Repository(str(repo_path))
        head = repo.head.target
    except (pygit2.GitError, KeyError):
        return []  # no commit yet: the ledger's own facts are the history
    # Newest first, as git walks: (blob, when, task) of each run of commits holding one
    # version; a run's date is its oldest commit's, which the walk reaches last.
    runs: list[tuple[pygit2.Oid, str, Task | None]] = []
    last_blob = None
    for n, commit in enumerate(repo.walk(head)):
        if n >= HISTORY_COMMITS:
            break
        try:
            blob = commit.tree["tasks.json"]
        except KeyError:
            last_blob = None
            continue
        when = datetime.fromtimestamp(commit.commit_time, UTC).isoformat(timespec="seconds")
        if blob.id == last_blob:
            if runs and runs[-1][0] == blob.id:
                runs[-1] = (blob.id, when, runs[-1][2])
            continue
        last_blob = blob.id
        try:
            ledger = msgspec.json.decode(repo[blob.id].read_raw(), type=Ledger)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        runs.append((blob.id, when, next((t for t in ledger.tasks if t.id == task_id), None)))
    return [(when, task) for _, when, task in reversed(runs)]


def task_text(task: Task, committed: list[Event]) -> Text:
    text = task_detail(task)
    text.append(f"\n\nAttempt {task.attempts}\n", "bold underline")
    if task.checkpoint:
        by, at = clean(task.checkpoint_by or "-"), task.checkpoint_at or "-"
        text.append(f"checkpoint by {by}, {at}\n", "dim")
        text.append(clean(task.checkpoint).strip())
    else:
        text.append("no checkpoint recorded (`hive task checkpoint ID TEXT`)", "dim")
    text.append("\n\nHistory\n", "bold underline")
    for when, what in sorted([*ledger_facts(task), *committed], key=lambda e: e[0][:19]):
        text.append(f"{when[:19].replace('T', ' ')}  ", "dim")
        text.append(one_line(what, EVENT_WIDTH) + "\n")
    text.append(
        "\nr retries it; esc closes this; open questions are answered from the Inbox.", "dim"
    )
    return text


def read_task(paths: HivePaths, task_id: str) -> Task | None:
    """The task as the ledger holds it now (None: gone, or the ledger unreadable)."""
    try:
        ledger = msgspec.json.decode(paths.tasks.read_bytes(), type=Ledger)
    except (OSError, msgspec.ValidationError, msgspec.DecodeError):
        return None
    return next((t for t in ledger.tasks if t.id == task_id), None)


class RetryScreen(FormScreen[str]):
    """Who takes the task again (its assignee unless the person names another); the
    retry runs here so a refusal is said while the form stays open. Returns what was
    done, or None if the person cancelled."""

    DEFAULT_CSS = """
    RetryScreen { align: center middle; }
    #retry { width: 72; height: auto; border: round $warning; background: $surface; padding: 0 1; }
    #retry Horizontal { height: auto; }
    #error { color: $error; height: auto; }
    """

    def __init__(self, task: Task, paths: HivePaths, hive: verbs.Run) -> None:
        super().__init__()
        self.task_retried = task
        self.paths = paths
        self._hive = hive
        # What the retry left the task as (None until it is retried).
        self.retried: Task | None = None
        self._busy = False

    def compose(self) -> ComposeResult:
        task = self.task_retried
        with Vertical(id="retry"):
            yield Label(
                f"Retry {clean(task.id)} as attempt {task.attempts + 1} "
                "(ctrl+s or enter retries, esc cancels)"
            )
            yield Label("Give it to (empty: its assignee):")
            yield Input(task.assignee or "", placeholder="agent id", id="retry-to")
            yield Label("", id="error")
            with Horizontal():
                yield Button("Retry", variant="warning", id="send-button")
                yield Button("Cancel", id="cancel-button")

    def on_mount(self) -> None:
        self.query_one("#retry-to", Input).focus()

    @on(Input.Submitted, "#retry-to")
    async def submitted(self) -> None:
        await self.run_action("send")

    def action_send(self) -> None:
        if self._busy:
            return
        self._busy = True
        to = self.query_one("#retry-to", Input).value.strip() or None
        self.run_worker(self._retry(to), exclusive=True)

    async def _retry(self, to: str | None) -> None:
        task_id = self.task_retried.id
        done = await self._hive(verbs.retry(task_id, to), b"")
        self._busy = False
        if done.code != 0:
            self.error(escape(done.said))
            return
        self.retried = await asyncio.to_thread(read_task, self.paths, task_id)
        self.dismiss(done.out.strip())


class TaskScreen(ModalScreen[None]):
    """The task at once; its git history is read on a thread and added when it is in."""

    DEFAULT_CSS = """
    TaskScreen { align: center middle; }
    #task { width: 100; max-width: 100%; height: auto; max-height: 100%; border: round $accent; background: $surface; padding: 1 2; }
    #task-said { height: auto; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "dismiss", "close"),
        Binding("r", "retry", "retry"),
    ]

    def __init__(self, task: Task, paths: HivePaths, hive: verbs.Run) -> None:
        super().__init__()
        self.task_shown = task
        self.paths = paths
        self._hive = hive
        # Set once the git history is read and shown.
        self.history_read = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="task"):
            yield Static(task_text(self.task_shown, []), markup=False, id="task-text")
            yield Static("", markup=False, id="task-said")

    def on_mount(self) -> None:
        self.query_one("#task").focus()
        self.run_worker(self._read_history(), exclusive=True)

    async def _read_history(self) -> None:
        self.history_read = False
        versions = await asyncio.to_thread(committed_versions, self.paths.hive, self.task_shown.id)
        self.query_one("#task-text", Static).update(task_text(self.task_shown, changes(versions)))
        self.history_read = True

    def action_retry(self) -> None:
        form = RetryScreen(self.task_shown, self.paths, self._hive)

        def done(said: str | None) -> None:
            if said is None or form.retried is None:
                return
            self.task_shown = form.retried
            self.query_one("#task-said", Static).update(Text(f"\n{said}", "bold green"))
            self.query_one("#task-text", Static).update(task_text(self.task_shown, []))
            self.run_worker(self._read_history(), exclusive=True)

        self.app.push_screen(form, done)
