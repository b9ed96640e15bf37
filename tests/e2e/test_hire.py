"""A growing team: `hive-office hire` on a running office (a real `hive-office serve`
with shell agents) starts the new agent at once, delivers its mail, lists it and tells
the manager; a bad id or provider is refused with a sentence and office.toml is left
byte for byte; the app's hire form adds its pane and its desk on the map."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hive_core.cli import hive
from hive_core.config import DEFAULT_OFFICE_TOML, load_office
from hive_core.mail import iter_inbox
from hive_core.office import Office
from hive_core.team.hire import HireRefused, entry_block, new_spec, plan_hire
from hive_tui.app import HiveApp
from hive_tui.map.widget import OfficeMap
from hive_tui.terminal.pane import TerminalPane
from tests.serve_support import ServedOffice
from tests.support import office_of, until, wait_for

BIN = Path(sys.executable).parent


def roster(root: Path) -> str:
    return (
        "# the team; comments and order are the person's\n"
        '[office]\nmanager = "michael"\n\n'
        f'[[agents]]\nid = "michael"\nname = "Michael"\nprovider = "shell"\ncwd = "{root}"\n'
        'command = ["sh"]   # a quiet shell\n\n'
        f'[[agents]]\nid = "jim"\nname = "Jim"\nprovider = "shell"\ncwd = "{root}"\n'
        'command = ["sh"]\n\n'
        "# prices after the roster stay after it\n"
        '[prices."claude-x"]\ninput = 1.0\n'
    )


@pytest.fixture
def office(short_tmp: Path) -> Iterator[ServedOffice]:
    office = ServedOffice(short_tmp / "home", roster=roster(short_tmp), env={"SHELL": "/bin/sh"})
    try:
        yield office
    finally:
        if office.running():
            assert office.stop() == 0


def test_hire_on_a_running_office_starts_it_and_it_gets_mail(office: ServedOffice) -> None:
    office.start()
    before = office.paths.office_toml.read_text()
    done = office.run(
        "hive-office",
        "hire",
        "dwight",
        "--name",
        "Dwight",
        "--role",
        "Sales",
        "--provider",
        "shell",
    )
    assert done.returncode == 0, done.stderr
    assert "dwight is hired" in done.stdout
    # Written after the last agent, every byte of the person's file kept around it.
    after = office.paths.office_toml.read_text()
    spec = load_office(office.paths.office_toml).agents[-1]
    assert (spec.id, spec.name, spec.role, spec.provider) == ("dwight", "Dwight", "Sales", "shell")
    block = "\n" + "".join(line + "\n" for line in entry_block(spec))
    assert after.replace(block, "", 1) == before
    assert after.index("dwight") < after.index("# prices after the roster")

    # Its CLI runs: a live process the registry names.
    entry = wait_for(
        lambda: (e := office.registry().get("dwight")) and e.get("pid") and e, "dwight's pid"
    )
    os.kill(entry["pid"], 0)
    assert entry["status"] == "running"
    roster_out = office.run("hive", "roster")
    assert roster_out.returncode == 0 and "dwight" in roster_out.stdout, roster_out

    # It receives mail: the person's message is delivered to its inbox.
    sent = office.run("hive", "send", "--to", "dwight", "--subject", "Welcome", "--body", "hi")
    assert sent.returncode == 0, sent.stderr
    [message] = wait_for(lambda: list(iter_inbox(office.paths.mailbox("dwight"))), "delivery")
    assert (message.sender, message.subject) == ("human", "Welcome")

    # The manager was told by the office.
    told = wait_for(
        lambda: [m for m in iter_inbox(office.paths.mailbox("michael")) if "joined" in m.subject],
        "the manager's notice",
    )
    assert told[0].sender == "router" and "dwight" in told[0].body

    # `fire` is archive: it leaves the floor, its mail goes to the manager.
    fired = office.run("hive-office", "fire", "dwight")
    assert fired.returncode == 0, fired.stderr
    wait_for(lambda: office.registry()["dwight"]["status"] == "archived", "dwight archived")


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (["Bad_Id", "--provider", "shell"], "is not a valid agent id"),
        (["oscar", "--provider", "cobol"], "is not a provider the office knows"),
        (["jim", "--provider", "shell"], "already on the roster"),
        (["router", "--provider", "shell"], "is reserved"),
    ],
)
def test_a_bad_hire_is_refused_and_office_toml_is_unchanged(
    office: ServedOffice, args: list[str], sentence: str
) -> None:
    office.start()
    before = office.paths.office_toml.read_bytes()
    refused = office.run("hive-office", "hire", *args, "--name", "X")
    assert refused.returncode == 1
    assert sentence in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert office.paths.office_toml.read_bytes() == before
    assert set(office.registry()) == {"michael", "jim"}
    # The same office takes a good one.
    ok = office.run("hive-office", "hire", "oscar", "--name", "Oscar", "--provider", "shell")
    assert ok.returncode == 0, ok.stderr
    wait_for(lambda: "oscar" in office.registry(), "oscar in the registry")


def test_hire_with_no_office_running_waits_in_office_toml(office: ServedOffice) -> None:
    refused = office.run("hive-office", "hire", "Nope", "--name", "N", "--provider", "shell")
    assert refused.returncode == 1 and "not a valid agent id" in refused.stderr
    done = office.run("hive-office", "hire", "kevin", "--name", "Kevin", "--provider", "shell")
    assert done.returncode == 0, done.stderr
    assert [a.id for a in load_office(office.paths.office_toml).agents] == [
        "michael",
        "jim",
        "kevin",
    ]
    office.start()
    wait_for(lambda: office.registry().get("kevin", {}).get("pid"), "kevin started with the office")


def test_the_default_office_toml_takes_a_hire_after_its_last_agent() -> None:
    spec = new_spec("dwight", name="Dwight", role="Sales", provider="codex", web=True, cwd="~")
    text, config = plan_hire(DEFAULT_OFFICE_TOML, spec)
    assert config.agents[-1] == spec
    # Before the commented [prices] example that follows the roster.
    assert text.index('id = "dwight"') < text.index("# The estimated cost")
    assert text.replace("\n" + "".join(f"{ln}\n" for ln in entry_block(spec)), "", 1) == (
        DEFAULT_OFFICE_TOML
    )
    with pytest.raises(HireRefused, match="already on the roster"):
        plan_hire(text, spec)
    # An entry whose table goes on ([agents.env]) keeps its table: the hire follows it.
    with_env = text + '\n[agents.env]\nFOO = "1"\n'
    later = new_spec("kelly", name="Kelly", role="", provider="shell", web=False, cwd="~")
    _, config = plan_hire(with_env, later)
    assert config.agents[-2].env == {"FOO": "1"} and config.agents[-1].env == {}


async def test_the_app_hires_from_its_form_and_shows_the_new_pane_and_desk(
    monkeypatch: pytest.MonkeyPatch,
    short_tmp: Path,
) -> None:
    serve = ServedOffice(short_tmp / "home", roster=roster(short_tmp), env={"SHELL": "/bin/sh"})
    monkeypatch.setenv("SHELL", "/bin/sh")
    app = HiveApp(Office(serve.paths, program=hive))
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: isinstance(app.focused, TerminalPane), "a focused pane")
        await pilot.press("ctrl+right_square_bracket", "plus")
        await until(pilot, lambda: app.screen.__class__.__name__ == "HireScreen", "the form")
        # A bad id is said on the form, and nothing is sent.
        await pilot.press(*"Bad Id", "ctrl+s")
        assert "not a valid agent id" in str(app.screen.query_one("#error").render())
        await pilot.press(*["backspace"] * 6, *"angela", "tab", *"Angela", "tab", *"Accounts")
        await pilot.press("ctrl+s")
        pane = await until(
            pilot,
            lambda: next(iter(app.query("#pane-angela").results(TerminalPane)), None),
            "the new pane",
        )
        assert app.roster[-1] == "angela"
        # Its desk on the map, after the others.
        assert app.query_one(OfficeMap).position("angela") is not None
        await until(
            pilot,
            lambda: (s := office_of(app).supervisor.sessions.get("angela")) and s.alive,
            "angela's CLI",
        )
        await pilot.press("alt+3")
        assert app.focused is pane
        await pilot.press("ctrl+right_square_bracket", "q")
    assert load_office(serve.paths.office_toml).agents[-1].id == "angela"
