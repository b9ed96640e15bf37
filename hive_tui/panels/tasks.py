"""The Tasks tab: the ledger (tasks.json) as a table, the highlighted task in full below.

Every cell is a rich Text, never a markup string: titles and specs are written by
agents, and `[b]` in a title must show as typed.
"""

from __future__ import annotations

from rich.text import Text
from textual.message import Message

from hive_core.schema import Ledger, Task
from hive_core.text import one_line
from hive_core.text import shown as clean
from hive_tui.panels.rows import Row, RowsPanel

EMPTY_TASKS = "No tasks yet: the manager adds them with `hive task add`."
COLUMNS = ("id", "title", "assignee", "status", "pri", "depends on", "?", "cost")
TITLE_WIDTH = 48

# Work in progress first, finished work last.
_STATUS_ORDER = {"doing": 0, "blocked": 1, "review": 2, "todo": 3, "done": 4}
_STATUS_STYLE = {
    "doing": "bold green",
    "blocked": "bold red",
    "review": "yellow",
    "todo": "",
    "done": "dim",
}


def open_questions(task: Task) -> int:
    """Questions for the person that have no answer yet."""
    return sum(1 for q in task.questions if q.answer is None)


def ordered(ledger: Ledger) -> list[Task]:
    """The ledger as the table lists it: by status, then priority (1 before 2), then id."""
    return sorted(ledger.tasks, key=lambda t: (_STATUS_ORDER.get(t.status, 5), t.priority, t.id))


def task_row(task: Task, done: set[str], cost: str = "") -> tuple[Text, ...]:
    """The table cells of `task`; `done` holds the ids of finished tasks, so the
    dependencies still holding it up stand out; `cost` is the estimated cost of the
    usage while its assignee held it (hive_core/cost/__init__.py)."""
    depends = Text()
    for index, dep in enumerate(task.depends_on):
        if index:
            depends.append(", ")
        depends.append(clean(dep), "dim" if dep in done else "bold")
    waiting = open_questions(task)
    return (
        Text(clean(task.id)),
        Text(one_line(task.title, TITLE_WIDTH), "dim" if task.status == "done" else ""),
        Text(clean(task.assignee or "-")),
        Text(task.status, _STATUS_STYLE.get(task.status, "")),
        Text(str(task.priority)),
        depends,
        Text(f"?{waiting}", "bold reverse yellow") if waiting else Text(""),
        Text(cost, "dim"),
    )


def task_detail(task: Task) -> Text:
    """Everything about one task, for the pane under the table."""
    text = Text()
    text.append(f"{clean(task.id)}  ", "bold")
    text.append(clean(task.title), "bold")
    text.append(f"\n{task.status}, priority {task.priority}", _STATUS_STYLE.get(task.status, ""))
    text.append(f", assignee {clean(task.assignee)}" if task.assignee else ", unassigned")
    if task.depends_on:
        text.append(f", depends on {', '.join(clean(d) for d in task.depends_on)}")
    text.append(f"\ncreated {task.created_at}, updated {task.updated_at}", "dim")
    text.append("\n\nSpec\n", "bold underline")
    text.append(clean(task.spec).strip() or "(no spec)")
    if task.questions:
        text.append("\n\nQuestions for the person\n", "bold underline")
        for question in task.questions:
            asker = f" ({clean(question.asked_by)})" if question.asked_by else ""
            if question.answer is None:
                text.append("? ", "bold reverse yellow")
                text.append(f"{clean(question.question)}{asker}\n  ")
                text.append("not answered yet\n", "italic yellow")
            else:
                text.append(f"- {clean(question.question)}{asker}\n  ")
                text.append(f"{clean(question.answer)}\n", "green")
    if task.result:
        text.append("\n\nResult\n", "bold underline")
        text.append(clean(task.result).strip())
    return text


class TasksPanel(RowsPanel):
    """The task ledger. Keys: up/down (and pageup/pagedown, home/end) move through the
    tasks, the highlighted one shows in full below; enter posts `TasksPanel.Open` (the
    app opens it with its history). A `?N` marks N unanswered questions
    for the person. Fed by the app with `show(ledger)`.
    """

    DEFAULT_CSS = """
    TasksPanel > DataTable { height: auto; max-height: 60%; }
    TasksPanel > #task-detail { height: 1fr; border-top: solid $primary-muted; padding: 0 1; }
    TasksPanel > #tasks-empty { color: $text-muted; text-style: italic; padding: 0 1; }
    """
    EMPTY_TEXT = EMPTY_TASKS
    COLUMNS = COLUMNS
    EMPTY_ID, TABLE_ID, DETAIL_ID = "tasks-empty", "tasks-table", "task-detail"

    class Open(Message):
        """The person pressed enter on a task."""

        def __init__(self, task_id: str) -> None:
            super().__init__()
            self.task_id = task_id

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._tasks: dict[str, Task] = {}
        self._costs: dict[str, str] = {}

    def show(self, ledger: Ledger) -> None:
        """Replace the table; the highlighted task stays highlighted if it still exists."""
        self._tasks = {task.id: task for task in ordered(ledger)}
        self.refill()

    def show_costs(self, costs: dict[str, str]) -> None:
        """Each task's cost as the office last summed it."""
        if costs != self._costs:
            self._costs = costs
            self.refill()

    def task_of(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def rows(self) -> list[Row]:
        done = {task.id for task in self._tasks.values() if task.status == "done"}
        return [
            (task.id, task_row(task, done, self._costs.get(task.id, "")))
            for task in self._tasks.values()
        ]

    def detail(self, key: str) -> Text:
        task = self._tasks.get(key)
        return task_detail(task) if task else Text()

    def opened(self, key: str) -> Message:
        return self.Open(key)
