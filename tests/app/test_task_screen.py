"""Issue 16 in the app: the task screen (Enter on a task) shows the attempt and the last
checkpoint, and `r` retries the task as the person through the function `hive task
retry` uses: one more attempt, doing, and the assignee mailed the checkpoint. A task
with nobody to give it to is refused with the sentence, the form kept open. A real
office (its router delivers the mail; `hive-office serve`, no agent CLIs) with the app
attached over the SocketLink (tests/app/conftest.py), driven by Pilot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from hive_core.ids import utc_now_iso
from hive_core.mail import iter_inbox
from hive_core.paths import HivePaths
from hive_core.schema import Ledger, Task
from hive_core.team import tasks
from hive_tui.app import HiveApp
from hive_tui.screens.task import RetryScreen, TaskScreen
from tests.app.conftest import ServeApp, run_app
from tests.app.test_app_keys import PREFIX, _home
from tests.support import until

CHECKPOINT = "Parser done and tested; next: error messages with line numbers"


@pytest.fixture
def paths(short_tmp: Path) -> Iterator[HivePaths]:
    p = _home(short_tmp)
    now = utc_now_iso()
    with tasks.locked(p):
        ledger = tasks.load_ledger(p.tasks)
        ledger, _ = tasks.add_task(
            ledger, "Parse office.toml", spec="Use tomllib.", assignee="jim",
            assignable=["jim"], now=now,
        )  # fmt: skip
        ledger, _ = tasks.record_checkpoint(ledger, "t1", CHECKPOINT, by="jim", now=now)
        ledger, _ = tasks.add_task(ledger, "Nobody's yet", assignable=[], now=now)
        tasks.save_ledger(p.tasks, ledger)
    yield p


def on_disk(paths: HivePaths, task_id: str) -> Task:
    ledger = msgspec.json.decode(paths.tasks.read_bytes(), type=Ledger)
    return next(t for t in ledger.tasks if t.id == task_id)


async def open_task(pilot: Pilot[None], app: HiveApp, row: int) -> TaskScreen:
    table = app.query_one("#tasks-table", DataTable)
    await until(pilot, lambda: table.row_count == 2, "both tasks listed")
    await pilot.press(PREFIX, "t")
    table.move_cursor(row=row)
    await pilot.press("enter")
    screen = app.screen
    assert isinstance(screen, TaskScreen)
    return screen


def text_of(screen: TaskScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def test_r_retries_the_task_with_its_checkpoint(
    paths: HivePaths, serve_app: ServeApp
) -> None:
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        screen = await open_task(pilot, app, 0)
        shown = text_of(screen, "#task-text")
        assert "Attempt 1" in shown and CHECKPOINT in shown and "checkpoint by jim" in shown
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RetryScreen), "the retry form")
        assert app.screen.query_one("#retry-to", Input).value == "jim"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen, "back on the task")
        said = text_of(screen, "#task-said")
        assert "t1 is attempt 2, assigned to jim" in said, said
        assert "with the last checkpoint goes to jim" in said, said
        assert "Attempt 2" in text_of(screen, "#task-text")
        task = on_disk(paths, "t1")
        assert (task.attempts, task.status, task.assignee) == (2, "doing", "jim")
        [request] = await until(
            pilot,
            lambda: [m for m in iter_inbox(paths.mailbox("jim")) if "attempt 2" in m.subject],
            "the retry delivered to jim",
        )
        assert request.sender == "human" and request.act == "request" and request.task == "t1"
        assert CHECKPOINT in request.body and "Use tomllib." in request.body
        await pilot.press("escape")


async def test_a_task_with_no_assignee_is_refused_until_one_is_named(
    paths: HivePaths, serve_app: ServeApp
) -> None:
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        screen = await open_task(pilot, app, 1)
        assert "no checkpoint recorded" in text_of(screen, "#task-text")
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RetryScreen), "the retry form")
        form = app.screen
        assert form.query_one("#retry-to", Input).value == ""
        await pilot.press("enter")
        error = form.query_one("#error")
        await until(pilot, lambda: "has no assignee" in str(error.render()), "the refusal said")
        assert app.screen is form
        task = on_disk(paths, "t2")
        assert (task.attempts, task.status, task.assignee) == (1, "todo", None)
        # Named, the same form retries it.
        await pilot.press(*"pam", "enter")
        await until(pilot, lambda: app.screen is screen, "back on the task")
        said = text_of(screen, "#task-said")
        assert "t2 is attempt 2, assigned to pam" in said and "(no checkpoint)" in said, said
        task = on_disk(paths, "t2")
        assert (task.attempts, task.status, task.assignee) == (2, "doing", "pam")
        await until(
            pilot,
            lambda: any(m.task == "t2" for m in iter_inbox(paths.mailbox("pam"))),
            "the request delivered to pam",
        )
        await pilot.press("escape")
