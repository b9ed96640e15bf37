"""The app with real agent processes behind its panes: focus, the bytes a child receives
for each key, pause/resume, sending a message. Agents here are `shell`-provider
processes that record every byte their terminal gives them. The app is attached to a
real `hive-office serve` over the SocketLink, as users get it (tests/app/conftest.py);
the tests that need the office's internals run it in-process and say why."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message as TextualMessage
from textual.widgets import Input, OptionList, Static

from hive_core.cli import hive
from hive_core.hive import init_office
from hive_core.ids import utc_now_iso
from hive_core.mail import iter_inbox, write_draft
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_core.schema import Draft
from hive_core.team import tasks
from hive_tui.app import HiveApp
from hive_tui.bridge import HiveLoaded, MailRouted
from hive_tui.panels.board import BoardPanel
from hive_tui.panels.inbox import InboxPanel
from hive_tui.terminal.pane import TerminalPane
from tests.app.conftest import ServeApp, pane_says, rewritten_until, run_app, settled
from tests.support import office_of, until

# Puts its terminal in raw mode (so every key arrives as the bytes it is), says READY,
# and appends whatever it reads to the file named on its command line. Given a second
# argument, a `?` read makes it ask its terminal who it is (ESC [ c), as Claude Code does
# at start-up.
RECORDER = """
import os, sys, tty
tty.setraw(0)
out = open(sys.argv[1], "ab", buffering=0)
asks = len(sys.argv) > 2
os.write(1, b"READY " + sys.argv[1].encode() + b"\\r\\n")
while True:
    data = os.read(0, 4096)
    if not data:
        break
    out.write(data)
    if asks and data == b"?":
        os.write(1, b"\\x1b[c")
"""
AGENTS = ("michael", "jim", "pam")


def _roster(root: Path, *, missing: str | None = None, asks: str | None = None) -> str:
    """Recorder agents; `missing` is a claude agent whose CLI is not installed; `asks`
    the one whose recorder asks its terminal on a `?`."""
    lines = ['[office]\nmanager = "michael"\n']
    for agent in AGENTS:
        if agent == missing:
            lines.append(
                f'[[agents]]\nid = "{agent}"\nname = "{agent.title()}"\nprovider = "claude"\n'
                f'cwd = "{root}"\ncommand = ["claude-not-installed-here"]\n'
            )
            continue
        argv = [sys.executable, "-c", RECORDER, str(root / f"{agent}.keys")]
        if agent == asks:
            argv.append("asks")
        lines.append(
            f'[[agents]]\nid = "{agent}"\nname = "{agent.title()}"\nprovider = "shell"\ncwd = "{root}"\n'
            f"command = {json.dumps(argv)}\n"
        )
    return "\n".join(lines)


def _home(root: Path, roster: str) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(roster)
    init_office(paths)
    return paths


@pytest.fixture
def app(short_tmp: Path, serve_app: ServeApp) -> HiveApp:
    return serve_app(_home(short_tmp, _roster(short_tmp)))


def focused_pane(app: HiveApp) -> str | None:
    """The agent whose pane has the focus (None: something else has it)."""
    return app.focused.agent_id if isinstance(app.focused, TerminalPane) else None


def keys_of(app: HiveApp, agent: str) -> bytes:
    path = app.link.paths.home.parent / f"{agent}.keys"
    return path.read_bytes() if path.exists() else b""


async def test_manager_pane_has_focus_and_focus_switches(app: HiveApp) -> None:
    async with run_app(app, (160, 48)) as pilot:
        await settled(pilot, app)
        assert focused_pane(app) == "michael"
        await pilot.press("alt+2")
        assert (
            focused_pane(app) == "jim"
            and app.pane("jim").display
            and not app.pane("michael").display
        )
        await pilot.press("ctrl+right_square_bracket", "n")
        assert focused_pane(app) == "pam"
        await pilot.press("ctrl+right_square_bracket", "p")
        assert focused_pane(app) == "jim"
        await pilot.press("ctrl+right_square_bracket", "1")
        assert focused_pane(app) == "michael"
        await pilot.press("ctrl+right_square_bracket", "z")
        assert app.layout_mode == "zoom" and focused_pane(app) == "michael"
        await pilot.press("ctrl+right_square_bracket", "g")
        assert app.layout_mode == "grid" and all(app.pane(a).display for a in AGENTS)


KEYS = [
    ("a", b"a"),
    ("Z", b"Z"),
    ("enter", b"\r"),
    ("tab", b"\t"),
    ("shift+tab", b"\x1b[Z"),
    ("escape", b"\x1b"),
    ("ctrl+c", b"\x03"),
    ("ctrl+r", b"\x12"),
    ("ctrl+b", b"\x02"),
    ("ctrl+d", b"\x04"),
    ("ctrl+q", b"\x11"),
    ("ctrl+p", b"\x10"),
    # Pilot gives backspace the character ^H, which a legacy terminal sends for ctrl+h:
    # the child gets ^H, as in tmux. A terminal's Backspace key comes with DEL and sends
    # DEL (tests/unit/test_terminal_keys.py).
    ("backspace", b"\x08"),
    ("up", b"\x1b[A"),
    ("ctrl+left", b"\x1b[1;5D"),
    ("alt+x", b"\x1bx"),
    ("alt+b", b"\x1bb"),
    ("pagedown", b"\x1b[6~"),
    ("f5", b"\x1b[15~"),
    ("delete", b"\x1b[3~"),
]


async def test_every_key_reaches_the_child_as_xterm_bytes(app: HiveApp) -> None:
    async with run_app(app, (160, 48)) as pilot:
        await until(
            pilot,
            lambda: keys_of(app, "michael") == b"" and app.link.view("michael").pid,
            "michael's recorder",
        )
        await settled(pilot, app)
        await pane_says(pilot, app, "michael", "READY")
        expected = b""
        for key, data in KEYS:
            await pilot.press(key)
            expected += data
        await until(
            pilot,
            lambda: keys_of(app, "michael") == expected,
            f"the child to receive {expected!r}, got {keys_of(app, 'michael')!r}",
        )
        # The prefix twice sends the prefix key itself; alt+digit is the app's.
        await pilot.press("ctrl+right_square_bracket", "ctrl+right_square_bracket", "alt+3")
        await until(
            pilot, lambda: keys_of(app, "michael") == expected + b"\x1d", "ctrl+] passed through"
        )
        assert focused_pane(app) == "pam" and keys_of(app, "pam") == b""


async def test_pause_and_resume_from_the_app(app: HiveApp) -> None:
    async with run_app(app, (160, 48)) as pilot:
        await settled(pilot, app)
        await pilot.press("alt+2", "ctrl+right_square_bracket", "x")
        await until(pilot, lambda: app.link.view("jim").paused, "the office paused jim")
        await until(
            pilot,
            lambda: '"paused":true' in app.link.paths.registry.read_text().replace(" ", ""),
            "registry shows jim paused",
        )
        assert "paused" in str(app.pane("jim").border_title)
        await pilot.press("ctrl+right_square_bracket", "x")
        await until(pilot, lambda: not app.link.view("jim").paused, "the office resumed jim")


async def test_send_a_message_from_the_app(app: HiveApp) -> None:
    async with run_app(app, (160, 48)) as pilot:
        await settled(pilot, app)
        await pilot.press("alt+2", "ctrl+right_square_bracket", "s")
        await until(pilot, lambda: app.screen.__class__.__name__ == "SendScreen", "the send screen")
        await pilot.press(*"Ship it")
        await pilot.press("tab")
        await pilot.press(*"The release is approved.")
        await pilot.press("ctrl+s")
        box = app.link.paths.mailbox("jim")
        [message] = await until(pilot, lambda: list(iter_inbox(box)), "delivery to jim")
        assert (message.sender, message.to, message.act) == ("human", "jim", "request")
        assert (message.subject, message.body) == ("Ship it", "The release is approved.")


async def test_missing_cli_says_what_to_install_and_the_rest_works(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    paths = _home(short_tmp, _roster(short_tmp, missing="jim"))
    app = serve_app(paths)
    async with run_app(app, (160, 48)) as pilot:
        await until(pilot, lambda: app.link.view("jim").missing, "jim's CLI found missing")
        await settled(pilot, app)
        await pilot.press("alt+2")
        notice = await until(pilot, lambda: app.pane("jim").notice, "the notice in jim's pane")
        assert (
            "claude-not-installed-here" in notice
            and "npm install -g @anthropic-ai/claude-code" in notice
        )
        jim = app.pane("jim")
        await until(
            pilot,
            lambda: (
                "npm install" in "".join(jim.render_line(y).text for y in range(jim.size.height))
            ),
            "the notice drawn in jim's pane",
        )
        # The rest of the office works: michael's recorder runs and gets keys.
        await pilot.press("alt+1", "h", "i")
        await until(pilot, lambda: keys_of(app, "michael") == b"hi", "michael gets keys")
    doctor = subprocess.run(
        [str(Path(sys.executable).parent / "hive-office"), "doctor", "--home", str(paths.home)],
        capture_output=True,
        text=True,
    )
    assert doctor.returncode == 1
    assert "jim: `claude-not-installed-here` not found" in doctor.stdout
    assert "npm install -g @anthropic-ai/claude-code" in doctor.stdout


async def test_the_prefix_key_is_configurable(short_tmp: Path, serve_app: ServeApp) -> None:
    roster = _roster(short_tmp).replace(
        'manager = "michael"', 'manager = "michael"\nprefix_key = "ctrl+a"', 1
    )
    app = serve_app(_home(short_tmp, roster))
    async with run_app(app, (160, 48)) as pilot:
        await pane_says(pilot, app, "michael", "READY")
        await settled(pilot, app)
        await pilot.press("ctrl+a", "ctrl+a", "ctrl+right_square_bracket")
        await until(
            pilot,
            lambda: keys_of(app, "michael") == b"\x01\x1d",
            f"ctrl+a twice then ctrl+]: {keys_of(app, 'michael')!r} {app.prefix_armed}",
        )
        await pilot.press("ctrl+a", "2")
        assert focused_pane(app) == "jim"
        assert "ctrl+a then" in str(app.query_one("#keys").render())


# In-process until the office keeps its lock on memory.db: over the socket the tab's first
# search can hide what the office indexes afterwards (the test below).
async def test_memory_tab_finds_office_knowledge_and_opens_its_source(short_tmp: Path) -> None:
    app = HiveApp(Office(_home(short_tmp, _roster(short_tmp)), program=hive))
    paths = app.link.paths
    paths.board.write_text("# Plan\n\nThe flux_capacitor rollout waits for the staging soak.\n")
    paths.mailbox("jim").notes.write_text(
        "- jim's private: flux_capacitor password is in the vault\n"
    )
    async with run_app(app, (160, 48)) as pilot:
        await until(pilot, lambda: isinstance(app.focused, TerminalPane), "a focused pane")
        office_of(app).memory.changed({paths.board, paths.mailbox("jim").notes})
        await pilot.press("ctrl+right_square_bracket", "m")
        box = app.query_one("#memory-query")
        box.focus()
        await pilot.press(*"flux capacitor", "enter")
        results = app.query_one("#memory-results", OptionList)
        await until(pilot, lambda: results.option_count, "a result", timeout=10)
        texts = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
        assert any("board" in t and "staging soak" in t for t in texts), texts
        assert not any("vault" in t for t in texts), "jim's private notes are not the person's"
        await pilot.press("enter")
        shown = str(app.query_one("#memory-text", Static).render())
        assert "board.md" in shown and "staging soak" in shown


# memory.store._head: the office read memory.db's header through a descriptor it then
# closed, which dropped its SQLite locks; the app's search, closing its connection, then
# deleted the -wal the office went on writing into.
async def test_the_memory_tab_finds_what_the_office_indexed_after_its_first_search(
    app: HiveApp,
) -> None:
    paths = app.link.paths
    async with run_app(app, (160, 48)) as pilot:
        await settled(pilot, app)
        await pilot.press("ctrl+right_square_bracket", "m")
        box = app.query_one("#memory-query", Input)
        results = app.query_one("#memory-results", OptionList)

        def found() -> list[str]:
            texts = [
                str(results.get_option_at_index(i).prompt) for i in range(results.option_count)
            ]
            return [t for t in texts if "staging soak" in t]

        async def search() -> None:
            box.focus()
            box.value = "staging soak"
            await pilot.press("enter")

        status = app.query_one("#memory-status", Static)
        await search()
        await until(pilot, lambda: "Nothing found" in str(status.render()), "a first search")
        board = app.query_one(BoardPanel)
        await rewritten_until(
            pilot,
            lambda: paths.board.write_text("# Plan\n\nThe rollout waits for the staging soak.\n"),
            lambda: "staging soak" in board.text,
            "the board",
        )
        # The office indexes what its watcher reported; the person searches again until
        # the tab finds it.
        for _ in range(10):
            await search()
            await pilot.pause(0.5)
            if found():
                break
        assert found(), "the tab never found the board line the office indexed"


# In-process: it plays the agent's output into the office's pty sinks and reads the
# office's typing guard (states.typed_at); neither leaves the office.
async def test_the_terminals_own_replies_are_not_the_persons_typing(short_tmp: Path) -> None:
    app = HiveApp(Office(_home(short_tmp, _roster(short_tmp)), program=hive))
    async with run_app(app, (160, 48)) as pilot:
        await pane_says(pilot, app, "michael", "READY")
        # The agent asks the terminal who it is (Claude Code does at start-up), as its
        # pty's output reaches every sink: the office's screen of the pane and the app's.
        for sink in list(office_of(app).supervisor.sinks):
            sink("michael", b"\x1b[c")
        answer = await until(pilot, lambda: keys_of(app, "michael"), "the terminal's answer")
        assert answer.startswith(b"\x1b[?")
        assert office_of(app).states["michael"].typed_at is None, (
            "an answer to a query is not typing"
        )
        await pilot.press("x")
        # Answered once (by the office's screen), never again by the app's pane.
        await until(pilot, lambda: keys_of(app, "michael").endswith(b"x"), "a key")
        assert keys_of(app, "michael") == answer + b"x"
        assert office_of(app).states["michael"].typed_at is not None
        await pilot.press("ctrl+right_square_bracket", "q")


async def test_an_attached_pane_leaves_the_terminals_replies_to_the_office(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    """Over the socket the agent's query reaches the app's pane too (as Output): the
    office's screen of the pane answers it, the app's pane never does."""
    app = serve_app(_home(short_tmp, _roster(short_tmp, asks="michael")))
    async with run_app(app, (160, 48)) as pilot:
        await pane_says(pilot, app, "michael", "READY")
        await settled(pilot, app)
        await pilot.press("question_mark")
        answer = await until(
            pilot,
            lambda: keys_of(app, "michael").removeprefix(b"?"),
            "the terminal's answer to the agent's query",
        )
        assert answer.startswith(b"\x1b[?")
        await pilot.press("x")
        await until(pilot, lambda: keys_of(app, "michael").endswith(b"x"), "a key")
        assert keys_of(app, "michael") == b"?" + answer + b"x"


# In-process: it holds the office's route thread and records where the router scans.
async def test_a_burst_reaches_the_app_once_per_message_and_each_panel_once(
    short_tmp: Path,
) -> None:
    """60 messages routed in one pass: the app hears of each exactly once (the watcher
    seeing the same inbox files adds nothing), reloads the inbox once, and the routing
    itself runs on the office's route thread, not on the app's loop."""
    paths = _home(short_tmp, _roster(short_tmp))
    # No agent CLIs: nothing but the burst routes mail (no nudges, no notices).
    office = Office(paths, agents=False, program=hive)
    scans_on: set[str] = set()
    scan = office.router.scan

    def recorded_scan(who: str) -> Any:
        scans_on.add(threading.current_thread().name)
        return scan(who)

    office.router.scan = recorded_scan  # type: ignore[method-assign]
    app = HiveApp(office)
    seen: list[TextualMessage] = []
    async with app.run_test(size=(160, 48), message_hook=seen.append) as pilot:
        await until(pilot, lambda: paths.hook_socket.exists(), "the office running")
        await until(pilot, lambda: any(isinstance(m, HiveLoaded) for m in seen), "first load")
        await until(pilot, lambda: app.panels_mounted, "the side's panels (after frame 1)")
        # Hold the route thread so that every file is in the outbox when it scans.
        gate = threading.Event()
        office.routes.thread.submit(gate.wait)
        burst = 60
        for n in range(burst):
            to = "human" if n % 3 == 0 else "michael"
            write_draft(paths.mailbox("jim"), Draft(to=to, subject=f"burst {n}"))
        before = len(seen)
        gate.set()
        inbox = app.query_one(InboxPanel)
        await until(pilot, lambda: len(inbox.rows()) == burst // 3, "the person's mail listed")
        await until(pilot, lambda: app.unread.get("michael") == burst, "michael's count")
        # The watcher reports in order: once it has seen this board change, it has
        # reported the burst's files too.
        paths.board.write_text("# after the burst\n")
        await until(
            pilot,
            lambda: any(
                isinstance(m, HiveLoaded) and m.board and "after the burst" in m.board
                for m in seen[before:]
            ),
            "the board reloaded",
        )
        routed = [m for m in seen[before:] if isinstance(m, MailRouted)]
        routes = [route for m in routed for route in m.routes]
        assert len(routes) == burst and {sender for sender, _ in routes} == {"jim"}
        assert len(routed) == 1, "one pass, one notice"
        loads = [m for m in seen[before:] if isinstance(m, HiveLoaded)]
        assert len([m for m in loads if m.inbox is not None]) == 1
        assert len([m for m in loads if "michael" in m.unread]) == 1
        assert scans_on and all(name.startswith("route") for name in scans_on), scans_on
        await pilot.press("ctrl+right_square_bracket", "q")


async def test_answering_an_escalation_records_it_on_the_task_and_mails_the_manager(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    """The ledger lock and the mail files are worked off the app's loop; the answer
    still lands on the task and in the manager's inbox, and the question is done."""
    paths = _home(short_tmp, _roster(short_tmp))
    ledger, task = tasks.add_task(
        tasks.empty_ledger(), "Pick a vendor", assignable=AGENTS, now=utc_now_iso()
    )
    tasks.save_ledger(paths.tasks, ledger)
    write_draft(
        paths.mailbox("jim"),
        Draft(to="human", act="query", subject="Which vendor?", body="A or B?", task=task.id),
    )
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        [question] = await until(pilot, lambda: list(app.escalations.values()), "the question")
        await pilot.press("ctrl+right_square_bracket", "i", "enter")
        await until(pilot, lambda: app.screen.__class__.__name__ == "AnswerScreen", "the form")
        await pilot.press(*"Vendor B", "ctrl+s")
        manager = paths.mailbox("michael")
        answer = await until(
            pilot,
            lambda: next((m for m in iter_inbox(manager) if m.sender == "human"), None),
            "the answer in the manager's inbox",
        )
        assert (answer.in_reply_to, answer.task) == (question.id, task.id)
        assert answer.body == "Vendor B"
        recorded = tasks.find_task(tasks.load_ledger(paths.tasks), task.id).questions
        assert [(q.question, q.answer) for q in recorded] == [
            ("Which vendor?: A or B?", "Vendor B")
        ]
        assert not list(iter_inbox(paths.mailbox("human"))), "the question is done"


async def test_a_problem_of_the_office_stays_on_screen_until_it_is_repaired(app: HiveApp) -> None:
    """A deleted branch stops the office's commits: the screen says so (not only the log)
    and the line goes once the branch is back and a commit goes through."""
    paths = app.link.paths
    git = ["git", "-C", str(paths.hive)]
    branch = paths.hive / ".git" / "refs" / "heads" / "main"
    async with run_app(app, (160, 48)) as pilot:
        line = app.query_one("#health")
        await until(pilot, branch.exists, "the office's first commit", timeout=30)
        assert not line.display, "no problem, no line"
        tip = branch.read_text().strip()
        branch.unlink()
        board = app.query_one(BoardPanel)
        await rewritten_until(
            pilot,
            lambda: paths.board.write_text("# changed while the branch is gone\n"),
            lambda: "changed while" in board.text,
            "the board's change",
        )
        await until(pilot, lambda: line.display, "the problem shown", timeout=30)
        assert "commit" in str(line.render()) and "refs/heads/main" in str(line.render())
        subprocess.run([*git, "update-ref", "refs/heads/main", tip], check=True)
        await until(pilot, lambda: not line.display, "the problem cleared", timeout=90)
    log = subprocess.run([*git, "log", "--format=%s"], capture_output=True, text=True).stdout
    assert "board" in log
