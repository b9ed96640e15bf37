"""Every one of the person's actions (hive_core/actions.py ACTIONS) driven as a person
drives it in the app users get: HiveApp attached over the SocketLink to a real
`hive-office serve` whose desks are shells (bash --norc: no model API). The keys after
the prefix, the confirm question, the hire form, the answer screen and the why view
are pressed as a person presses them; what each action did is read where the office
keeps it (registry.json, the office's log, office.toml, the mailboxes, what the desk's
shell did), not from the app. Where the app shows a refusal, the sentence is asserted
on screen and an allowed action on the same desk works. An action added to ACTIONS
fails `test_every_action_has_a_test_here` until it has a test in this file."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Select, Static

from hive_core.actions import ACTIONS, BY_NAME
from hive_core.config import load_office
from hive_core.mail import iter_inbox
from hive_core.schema import HUMAN, Message
from hive_core.team.hire import PROVIDERS
from hive_tui.app import HiveApp
from hive_tui.commands import VIEW_COMMANDS
from hive_tui.link import SocketLink
from hive_tui.screens.answer import AnswerScreen
from hive_tui.screens.confirm import ConfirmScreen
from hive_tui.screens.hire import HireScreen
from hive_tui.screens.send import SendScreen
from tests.serve_support import ServedOffice
from tests.support import until, wait_for

PREFIX = "ctrl+right_square_bracket"
SHELL = '["bash", "--norc", "--noprofile"]'
F = TypeVar("F", bound=Callable[..., Any])

# The actions each test below drives (filled by `covers` as the module loads).
COVERED: set[str] = set()


def covers(*names: str) -> Callable[[F], F]:
    def mark(test: F) -> F:
        COVERED.update(names)
        return test

    return mark


def roster(root: Path) -> str:
    # The desks work in a folder of their own (not the one holding the office's home):
    # `why` would otherwise add that they are uncontained.
    desk = root / "desk"
    desk.mkdir()
    return (
        '[office]\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\nprovider = "shell"\ncwd = "{desk}"\n'
        f"command = {SHELL}\n\n"
        f'[[agents]]\nid = "pam"\nname = "Pam"\nprovider = "shell"\ncwd = "{desk}"\n'
        f"command = {SHELL}\n"
    )


def desk(office: ServedOffice) -> Path:
    """Where the desks work, and so may write (a shell desk is contained to it)."""
    return office.home.parent / "desk"


def logged(office: ServedOffice, agent: str, detail: str) -> bool:
    """The office's log (hive/log.jsonl, `hive log`) has this line about `agent`."""
    return detail in office.agent_log(agent)


def cli(office: ServedOffice, *argv: str) -> str:
    """A console script against the office; what it printed."""
    done = office.run(*argv)
    assert done.returncode == 0, done.stderr
    return done.stdout


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def said(app: HiveApp) -> list[str]:
    """The notifications on screen."""
    return [str(n.message) for n in app._notifications]


@pytest.fixture
def office(short_tmp: Path) -> Iterator[ServedOffice]:
    served = ServedOffice(short_tmp / "home", roster=roster(short_tmp), env={"SHELL": "/bin/sh"})
    served.start()
    try:
        wait_for(served.paths.client_socket.exists, "the client socket")
        wait_for(
            lambda: {"michael", "pam"} <= {a for a, e in served.registry().items() if e["pid"]},
            "both shells running",
        )
        yield served
    finally:
        assert served.stop() == 0


@asynccontextmanager
async def attached(office: ServedOffice) -> AsyncIterator[tuple[HiveApp, Pilot[None]]]:
    """The app as `hive-office` attaches it, on pam's pane; it detaches at the end and
    the office goes on."""
    app = HiveApp(SocketLink.connect(office.paths))
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.pane("pam").is_mounted, "the panes")
        await focus(pilot, app, 2, "pam")
        yield app, pilot
        await pilot.press(PREFIX, "d")
        await until(pilot, lambda: app.ended, "the app to detach")
    assert office.running(), "the office outlives its screen"


async def focus(pilot: Pilot[None], app: HiveApp, n: int, agent: str) -> None:
    await pilot.press(PREFIX, str(n))
    await until(pilot, lambda: app.focused is app.pane(agent), f"{agent}'s pane focused")


async def type_line(pilot: Pilot[None], text: str) -> None:
    await pilot.press(*["space" if c == " " else c for c in text], "enter")


@covers("type")
async def test_typing_in_a_pane_runs_in_the_desks_shell(office: ServedOffice) -> None:
    # The app's way to `type`: keys in the focused pane go to the agent's terminal.
    out = desk(office) / "typed.txt"
    async with attached(office) as (_app, pilot):
        await type_line(pilot, f"echo $((6*7)) > {out}")
        await until(pilot, lambda: out.exists() and out.read_text() == "42\n", "pam's shell ran it")


@covers("pause", "resume")
async def test_x_pauses_then_resumes_the_focused_desk(office: ServedOffice) -> None:
    async with attached(office) as (_app, pilot):
        await pilot.press(PREFIX, "x")
        await until(pilot, lambda: office.registry()["pam"]["paused"] is True, "pam paused")
        await until(pilot, lambda: logged(office, "pam", "paused by the person"), "the log")
        assert office.registry()["michael"]["paused"] is False
        await pilot.press(PREFIX, "x")
        await until(pilot, lambda: office.registry()["pam"]["paused"] is False, "pam resumed")
        await until(pilot, lambda: logged(office, "pam", "resumed by the person"), "the log")


@covers("halt")
async def test_halting_a_shell_desk_is_refused_on_screen_and_pausing_it_works(
    office: ServedOffice,
) -> None:
    # A halt is allowed only on a CLI with hooks (a model's); tests/e2e/test_serve.py's
    # headless office halts one. A shell desk has none: the office says so, and changes nothing.
    async with attached(office) as (app, pilot):
        await pilot.press(PREFIX, "h")
        refusal = await until(
            pilot,
            lambda: next((s for s in said(app) if s.startswith("pam cannot be halted")), None),
            "the refusal on screen",
        )
        assert "(shell) has no hooks" in refusal and "nothing was changed" in refusal
        assert "archive pam" in refusal  # what to do instead
        assert office.registry()["pam"]["state"] != "halted"
        assert not logged(office, "pam", "halted by the person")
        # The same desk takes what it can take.
        await pilot.press(PREFIX, "x")
        await until(pilot, lambda: office.registry()["pam"]["paused"] is True, "pam paused")
        assert office.registry()["pam"]["state"] != "halted"


@covers("archive", "spawn")
async def test_archive_asks_first_and_stops_the_cli_then_r_brings_it_back(
    office: ServedOffice,
) -> None:
    first = office.registry()["pam"]["pid"]
    async with attached(office) as (app, pilot):
        await pilot.press(PREFIX, "a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        question = BY_NAME["archive"].confirm
        assert question is not None
        shown = str(app.screen.query_one("#confirm Static", Static).render())
        assert question.format(agent="pam") in shown
        # Enter, typed out of habit, is not a yes; n: nothing happens.
        await pilot.press("enter")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the answer")
        out = desk(office) / "still.txt"
        await type_line(pilot, f"echo still > {out}")
        await until(pilot, lambda: out.exists(), "pam's shell still there")
        assert office.registry()["pam"]["status"] != "archived" and alive(first)
        # y: archived, its shell stopped, its mail goes to the manager.
        await pilot.press(PREFIX, "a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question again")
        await pilot.press("y")
        await until(pilot, lambda: office.registry()["pam"]["status"] == "archived", "archived")
        await until(pilot, lambda: not alive(first), "pam's shell stopped")
        await until(pilot, lambda: logged(office, "pam", "archived by the person"), "the log")
        cli(office, "hive", "send", "--to", "pam", "--subject", "Lunch?", "--body", "noon")
        bounces = office.paths.mailbox("michael").inbox
        await until(pilot, lambda: list(bounces.glob("*-bounce.json")), "the bounce to michael")
        # r: pam is back on the floor with a new shell that takes keys.
        await pilot.press(PREFIX, "r")
        await until(
            pilot,
            lambda: (
                office.registry()["pam"]["status"] != "archived"
                and office.registry()["pam"]["pid"] not in (None, first)
            ),
            "pam started again",
        )
        assert alive(office.registry()["pam"]["pid"])
        await until(pilot, lambda: logged(office, "pam", "started by the person"), "the log")
        back = desk(office) / "back.txt"
        await type_line(pilot, f"echo back > {back}")
        await until(pilot, lambda: back.exists(), "the new shell ran it")


@covers("hire")
async def test_the_hire_form_refuses_a_bad_id_then_hires_a_desk_that_runs(
    office: ServedOffice,
) -> None:
    before = office.paths.office_toml.read_bytes()
    async with attached(office) as (app, pilot):
        await pilot.press(PREFIX, "plus")
        await until(pilot, lambda: isinstance(app.screen, HireScreen), "the form")
        form = app.screen
        await pilot.press(*"Bad Id", "ctrl+s")
        assert "not a valid agent id" in str(form.query_one("#error").render())
        assert app.screen is form and office.paths.office_toml.read_bytes() == before
        await pilot.press(*["backspace"] * 6, *"dwight", "tab", *"Dwight", "tab", *"Sales")
        # The provider: tab to it, open its list (on the first), down to shell, enter.
        provider = form.query_one("#provider", Select)
        assert provider.value == PROVIDERS[0]
        await pilot.press("tab", "enter", *["down"] * PROVIDERS.index("shell"), "enter")
        await until(pilot, lambda: provider.value == "shell", "shell chosen")
        await pilot.press("ctrl+s")
        done = "dwight is hired and on the floor; the manager was told."
        await until(pilot, lambda: done in said(app), "the office's sentence")
        await until(pilot, lambda: office.registry().get("dwight", {}).get("pid"), "dwight runs")
        hired = load_office(office.paths.office_toml).agents[-1]
        assert (hired.id, hired.name, hired.role, hired.provider) == (
            "dwight",
            "Dwight",
            "Sales",
            "shell",
        )
        michael = office.paths.mailbox("michael")
        await until(
            pilot, lambda: any("dwight" in m.body for m in iter_inbox(michael)), "michael told"
        )
        # Its pane is the third and takes keys.
        await until(pilot, lambda: app.pane("dwight").is_mounted, "dwight's pane")
        await focus(pilot, app, 3, "dwight")
        out = desk(office) / "dwight.txt"
        await type_line(pilot, f"echo hired > {out}")
        await until(pilot, lambda: out.exists(), "dwight's shell ran it")
        # The person's mail reaches the new desk: the app knows the roster the hire made.
        await pilot.press(PREFIX, "s")
        await until(pilot, lambda: isinstance(app.screen, SendScreen), "the send form")
        await pilot.press(*"Welcome", "ctrl+s")
        await until(pilot, lambda: "Sent to dwight." in said(app), "sent")
        dwight = office.paths.mailbox("dwight")
        await until(
            pilot,
            lambda: any(m.subject == "Welcome" for m in iter_inbox(dwight)),
            "the message in dwight's inbox",
        )


def waiting(office: ServedOffice) -> list[dict[str, Any]]:
    """`hive-office escalations --json`: what waits for the person, from the office."""
    listed: list[dict[str, Any]] = json.loads(cli(office, "hive-office", "escalations", "--json"))
    return listed


def the_answer(office: ServedOffice, agent: str) -> Message | None:
    """The person's answer in the agent's inbox."""
    inbox = iter_inbox(office.paths.mailbox(agent))
    return next((m for m in inbox if m.subject == "Answer: Budget?"), None)


@covers("answer", "escalations")
async def test_an_escalation_is_listed_and_answered_from_the_inbox(office: ServedOffice) -> None:
    # `escalations` has no key: the app's Inbox panel (prefix i) shows what waits, read
    # from the hive's files; the action itself is the CLI's (`hive-office escalations`).
    assert BY_NAME["escalations"].key is None
    async with attached(office) as (app, pilot):
        # pam asks the person from its own shell, as an agent does.
        await type_line(
            pilot, "hive send --to human --act query --subject Budget? --body Over-budget?"
        )
        [item] = await until(pilot, lambda: waiting(office), "the question waits for the person")
        assert (item["from"], item["subject"]) == ("pam", "Budget?")
        table = app.query_one("#inbox-table", DataTable)
        await until(pilot, lambda: table.row_count == 1, "listed in the Inbox panel")
        await pilot.press(PREFIX, "i", "enter")
        await until(pilot, lambda: isinstance(app.screen, AnswerScreen), "the answer screen")
        screen = app.screen
        assert isinstance(screen, AnswerScreen) and screen.message.id == item["id"]
        # An empty answer is refused on the screen; nothing is sent.
        await pilot.press("ctrl+s")
        assert "Write an answer first" in str(screen.query_one("#error").render())
        assert app.screen is screen and waiting(office) == [item]
        await pilot.press(*"Go ahead", "ctrl+s")
        done = f"Your answer to {item['id']} went to pam and michael (the manager)."
        await until(pilot, lambda: done in said(app), "the office's sentence")
        for agent in ("pam", "michael"):
            answer = await until(
                pilot, partial(the_answer, office, agent), f"the answer in {agent}'s inbox"
            )
            assert answer.sender == HUMAN and answer.body == "Go ahead"
            assert answer.in_reply_to == item["id"]
        assert waiting(office) == []
        await until(pilot, lambda: table.row_count == 0, "the Inbox panel empty")


@covers("why")
async def test_w_says_why_as_the_cli_does(office: ServedOffice) -> None:
    async with attached(office) as (app, pilot):
        cli_lines = cli(office, "hive-office", "why", "pam").splitlines()
        head = cli_lines[0]
        assert head.startswith("pam: ") and cli_lines[-1].startswith("evidence: "), cli_lines
        await pilot.press(PREFIX, "w")
        shown = await until(
            pilot,
            lambda: next((s for s in said(app) if s.startswith("pam: ")), None),
            "pam's why on screen",
        )
        lines = shown.splitlines()
        assert lines[0] == head and lines[-1].startswith("evidence: ")


@covers("status")
def test_status_is_the_clis_and_says_what_the_registry_says(office: ServedOffice) -> None:
    # The app has no key for `status`: its map and pane titles show each desk's state.
    # The action is the CLI's: the registry of the running office, as JSON.
    assert BY_NAME["status"].key is None
    assert not any(c.action == "status" for c in VIEW_COMMANDS)
    cli(office, "hive-office", "pause", "pam")
    status = json.loads(cli(office, "hive-office", "status"))
    agents = {a["id"]: a for a in status["agents"]}
    assert set(agents) == {"michael", "pam"}
    assert agents["pam"]["paused"] is True and agents["michael"]["paused"] is False
    assert agents["pam"]["pid"] == office.registry()["pam"]["pid"]


def test_every_action_has_a_test_here() -> None:
    assert {a.name for a in ACTIONS} == COVERED
