"""Issue 14 in the app: an answered escalation leaves the Inbox and the manager's `!`; a
task question reaches the Inbox and is answered with Enter; Enter on a task opens it
with its history; a message to `human` rings the terminal once. The app is attached to a
real `hive-office serve` (no agent CLIs) over the SocketLink (tests/app/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from hive_core.ids import utc_now_iso
from hive_core.mail import iter_inbox, write_draft
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Draft, Task
from hive_core.team import tasks
from hive_core.team.escalations import task_item_id
from hive_tui.app import HiveApp
from hive_tui.panels.board import BoardPanel
from hive_tui.screens.answer import AnswerScreen
from hive_tui.screens.task import TaskScreen, changes, committed_versions
from tests.app.conftest import ServeApp, run_app
from tests.app.test_app_keys import PREFIX, _home
from tests.support import until


@pytest.fixture
def paths(short_tmp: Path) -> Iterator[HivePaths]:
    p = _home(short_tmp)
    yield p


def _ask_on_task(paths: HivePaths, question: str) -> None:
    now = utc_now_iso()
    with tasks.locked(paths):
        ledger = tasks.load_ledger(paths.tasks)
        if not ledger["tasks"]:
            ledger, _ = tasks.add_task(ledger, "Pick a DB", assignable=["jim"], now=now)
        ledger, _ = tasks.ask_question(ledger, "t1", question, asked_by="jim", now=now)
        tasks.save_ledger(paths.tasks, ledger)


async def _watching(pilot: Pilot[None], app: HiveApp, paths: HivePaths) -> None:
    """The office's watcher runs: a board written now is shown (one written before it
    started is not seen, so it is written again until it is)."""
    board = app.query_one(BoardPanel)
    for n in range(100):
        paths.board.write_text(f"# watched {n}\n")
        for _ in range(10):
            await pilot.pause(0.05)
            if "watched" in board.text:
                return
    raise AssertionError("the watcher never reported the board")


async def test_an_answered_escalation_leaves_the_inbox_and_the_managers_mark(
    paths: HivePaths, serve_app: ServeApp
) -> None:
    write_draft(
        paths.mailbox("jim"),
        Draft(to="michael", act="query", subject="Budget?", body="Over?", needs_human=True),
    )
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        [item] = await until(pilot, lambda: list(app.escalations.values()), "the escalation")
        manager = app.link.view("michael")
        assert app.info(manager).needs_you
        await until(pilot, lambda: app.query_one("#inbox-table", DataTable).row_count, "listed")
        await pilot.press(PREFIX, "i", "enter")
        assert isinstance(app.screen, AnswerScreen)
        await pilot.press(*"Fine", "ctrl+s")
        await until(pilot, lambda: not app.escalations, "the escalation off the Inbox")
        assert not app.info(manager).needs_you
        # The manager's copy is kept (it reads it in its own time).
        assert item.id in {m.id for m in iter_inbox(paths.mailbox("michael"))}


async def test_a_task_question_reaches_the_inbox_and_is_answered_with_enter(
    paths: HivePaths, serve_app: ServeApp
) -> None:
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        await _watching(pilot, app, paths)
        _ask_on_task(paths, "Postgres or SQLite?")  # as `hive task update --question` does
        item = task_item_id("t1", 1)
        await until(pilot, lambda: item in app.escalations, "the question in the Inbox")
        await until(pilot, lambda: app.query_one("#inbox-table", DataTable).row_count, "listed")
        await pilot.press(PREFIX, "i", "enter")
        assert isinstance(app.screen, AnswerScreen)
        assert app.screen.message.id == item
        await pilot.press(*"SQLite", "ctrl+s")
        await until(pilot, lambda: item not in app.escalations, "the question answered")
        [t] = tasks.tasks_of(tasks.load_ledger(paths.tasks))
        assert t.questions[0].answer == "SQLite"


async def test_enter_on_a_task_opens_it_with_its_history(
    paths: HivePaths, serve_app: ServeApp
) -> None:
    _ask_on_task(paths, "Postgres or SQLite?")
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        await _watching(pilot, app, paths)
        # The first commit holds the task as added (todo); the office commits the change.
        await until(pilot, lambda: committed_versions(paths.hive, "t1"), "the task committed")
        with tasks.locked(paths):
            ledger, _ = tasks.update_task(
                tasks.load_ledger(paths.tasks),
                "t1",
                {"status": "doing", "assignee": "jim"},
                assignable=["jim"],
                now=utc_now_iso(),
            )
            tasks.save_ledger(paths.tasks, ledger)
        await until(
            pilot,
            lambda: any(t and t.status == "doing" for _, t in committed_versions(paths.hive, "t1")),
            "the change committed",
        )
        await until(pilot, lambda: app.query_one("#tasks-table", DataTable).row_count, "listed")
        await pilot.press(PREFIX, "t", "enter")
        screen = app.screen
        assert isinstance(screen, TaskScreen)
        await until(pilot, lambda: screen.history_read, "the history read")
        shown = str(screen.query_one("#task Static").render())
        assert "Pick a DB" in shown and "History" in shown and "created" in shown
        assert "question #1 asked by jim: Postgres or SQLite?" in shown
        assert "status: todo -> doing" in shown and "assignee: - -> jim" in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, TaskScreen)


async def test_a_message_to_human_rings_once(paths: HivePaths, serve_app: ServeApp) -> None:
    app = serve_app(paths, agents=False)
    written: list[str] = []
    app.write_terminal = written.append  # type: ignore[method-assign,assignment]
    async with run_app(app, (160, 48)) as pilot:
        write_draft(paths.mailbox("jim"), Draft(to=HUMAN, act="query", subject="Vendor A?"))
        await until(pilot, lambda: written, "a ring")
        [first] = written
        assert first.startswith("\x07") and "\x1b]9;hive-office: jim: Vendor A?\x07" in first
        assert "\x1b]777;notify;hive-office;jim: Vendor A?\x07" in first
        # The next item rings on its own; the first is never rung again.
        write_draft(paths.mailbox("pam"), Draft(to=HUMAN, act="query", subject="Vendor B?"))
        await until(pilot, lambda: len(written) == 2, "the second ring")
        assert "Vendor B?" in written[1] and "Vendor A?" not in written[1]


def test_the_history_lists_each_change_between_committed_versions() -> None:
    now = utc_now_iso()
    todo = Task(id="t1", title="Pick a DB", created_at=now, updated_at=now)
    doing = msgspec.structs.replace(todo, status="doing", assignee="jim", depends_on=["t0"])
    assert changes([("1", None), ("2", todo), ("3", doing), ("4", doing), ("5", None)]) == [
        ("3", "status: todo -> doing"),
        ("3", "assignee: - -> jim"),
        ("3", "depends_on: - -> t0"),
        ("5", "removed from the ledger"),
    ]
