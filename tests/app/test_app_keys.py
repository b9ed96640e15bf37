"""The app's keys (issue 12, keyboard reach; issue 10, keys from the two tables): the key
line at 80 and 160 columns, the armed prefix and its timeout, every panel reached and used
from the keyboard with nothing typed into the agent (and the agent getting keys again
after esc), prefix commands while an Input has the focus, alt+N from a panel, an
escalation answered with Enter, and archive asked first. Agents are recorders: every byte
their terminal gives them lands in a file, so "the agent got nothing" is checked on the
child's side. The app is attached to a real `hive-office serve` over the SocketLink
(tests/app/conftest.py); the last test runs `hive-office` in a real tmux at 80x24."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, TabbedContent

from hive_core.actions import ACTIONS, BY_NAME
from hive_core.cli import hive
from hive_core.hive import init_office
from hive_core.ids import utc_now_iso
from hive_core.mail import iter_inbox, write_draft
from hive_core.office import Office
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN, Draft, LogEvent
from hive_core.team import tasks
from hive_tui import app as app_module
from hive_tui.app import HiveApp, KeyLine
from hive_tui.commands import VIEW_COMMANDS, help_rows, key_line, person_action, view_action
from hive_tui.link import LocalLink
from hive_tui.panels.board import BoardPanel
from hive_tui.panels.log import LogLines, LogPanel
from hive_tui.screens.answer import AnswerScreen
from hive_tui.screens.confirm import ConfirmScreen
from hive_tui.screens.help import HelpScreen
from hive_tui.screens.quit import QuitScreen
from hive_tui.terminal.pane import TerminalPane
from tests.app.conftest import ServeApp, pane_says, run_app, settled
from tests.app.test_app import _roster, keys_of
from tests.support import until, wait_for

PREFIX = "ctrl+right_square_bracket"


# --- the tables (pure) -----------------------------------------------------------------


@pytest.mark.parametrize("width", [200, 160, 120, 80, 60, 40])
def test_the_key_line_fits_and_always_keeps_help_and_quit(width: int) -> None:
    for armed in (False, True):
        line = key_line("ctrl+]", width, armed=armed)
        assert cell_len(line) <= width, (width, line)
        assert "? help" in line and "q quit" in line, line
        assert line.startswith(" ctrl+] …" if armed else " ctrl+] then:")
    assert "b/t/l/i/m panels" in key_line("ctrl+]", 80)
    full = key_line("ctrl+]", 200)
    for action in ACTIONS:
        if action.label:
            assert f"{action.key} {action.label}" in full, action.name


def test_every_key_after_the_prefix_comes_from_one_of_the_two_tables() -> None:
    keys = [key for key, _ in help_rows()]
    assert keys == [
        *[c.key for c in VIEW_COMMANDS if not c.always],
        *[a.key for a in ACTIONS if a.key],
        "?",
        "q",
    ]
    assert len({c.key for c in VIEW_COMMANDS}) == len(VIEW_COMMANDS), "a key used twice"
    assert not {c.key for c in VIEW_COMMANDS} & {a.key for a in ACTIONS}
    assert view_action("3") == "focus_agent(3)" and view_action("0") is None
    assert view_action("m") == "panel('memory')"
    # One key toggles: pause, or resume what is paused or halted.
    assert person_action("x", held=False) == BY_NAME["pause"]
    assert person_action("x", held=True) == BY_NAME["resume"]
    assert person_action("a", held=True) == BY_NAME["archive"]
    assert person_action("?", held=False) is None


# --- the app ---------------------------------------------------------------------------


def _home(root: Path, prefix_key: str | None = None) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    roster = _roster(root)
    if prefix_key:
        roster = roster.replace(
            'manager = "michael"', f'manager = "michael"\nprefix_key = "{prefix_key}"', 1
        )
    paths.office_toml.write_text(roster)
    init_office(paths)
    return paths


@pytest.fixture
def app(short_tmp: Path, serve_app: ServeApp) -> HiveApp:
    return serve_app(_home(short_tmp))


async def _ready(pilot: Pilot[None], app: HiveApp, agent: str = "michael") -> None:
    """The app has started and the agent's recorder runs (its terminal is raw): bytes
    typed now are recorded."""
    await settled(pilot, app)
    await pane_says(pilot, app, agent, "READY")


def _shown(app: HiveApp) -> str:
    """The key line as drawn on screen (not as computed)."""
    return app.query_one(KeyLine).render_line(0).text


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_key_line_is_whole_on_screen(
    size: tuple[int, int], short_tmp: Path, serve_app: ServeApp
) -> None:
    app = serve_app(_home(short_tmp), agents=False)
    async with run_app(app, size) as pilot:
        line = app.query_one(KeyLine)
        await until(pilot, lambda: line.size.width == size[0], "the key line laid out")
        drawn = _shown(app).rstrip()
        assert drawn == key_line("ctrl+]", size[0]).rstrip(), drawn
        assert "? help" in drawn and "q quit" in drawn
        assert line.region.right <= size[0] and line.region.y == size[1] - 1
        # Every key is on the help screen, which scrolls by keys where it does not fit.
        await pilot.press(PREFIX, "?")
        assert isinstance(app.screen, HelpScreen)
        body = app.screen.query_one("#help")
        static = body.query_one("Static")
        text = "\n".join(static.render_line(y).text for y in range(static.size.height))
        assert all(f"{key} " in text for key, _ in help_rows())
        assert "alt+1..9" in text, "the app's one key outside the prefix"
        if size == (80, 24):
            assert body.max_scroll_y > 0
            await pilot.press("pagedown")
            assert body.scroll_y > 0
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_the_armed_prefix_shows_and_times_out(
    app: HiveApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with run_app(app, (160, 48)) as pilot:
        await _ready(pilot, app)
        line = app.query_one(KeyLine)
        await pilot.press(PREFIX)
        assert app.prefix_armed and line.armed and _shown(app).startswith(" ctrl+] …")
        # Armed, `t` is a command: the tasks tab, nothing typed.
        await pilot.press("t")
        assert not app.prefix_armed and _shown(app).startswith(" ctrl+] then:")
        assert app.query_one(TabbedContent).active == "tab-tasks"
        await pilot.press("escape")
        assert isinstance(app.focused, TerminalPane)
        # Left alone, it disarms by itself; the next `t` is the agent's again.
        monkeypatch.setattr(app_module, "PREFIX_TIMEOUT_S", 0.2)
        await pilot.press(PREFIX)
        assert app.prefix_armed
        await until(pilot, lambda: not app.prefix_armed, "the prefix to time out")
        assert _shown(app).startswith(" ctrl+] then:")
        await pilot.press("l")
        await until(pilot, lambda: keys_of(app, "michael") == b"l", "l typed into michael")
        assert app.query_one(TabbedContent).active == "tab-tasks", "no command ran"
        # esc after the prefix is "never mind": nothing typed, nothing run.
        await pilot.press(PREFIX, "escape", "k")
        await until(pilot, lambda: keys_of(app, "michael") == b"lk", "k typed into michael")


async def test_memory_after_prefix_m_gets_the_keys_and_esc_gives_them_back(app: HiveApp) -> None:
    app.link.paths.board.write_text("# Plan\n\nThe flux_capacitor rollout waits for the soak.\n")
    async with run_app(app, (160, 48)) as pilot:
        await _ready(pilot, app)
        # The command and the query in one go, as a fast typist (or a paste) sends them.
        await pilot.press(PREFIX, "m", *"flux", "enter")
        box = app.query_one("#memory-query", Input)
        assert box.value == "flux"
        results = app.query_one("#memory-results")
        await until(pilot, lambda: app.focused is results, "the results take the keys")
        await pilot.press("down", "enter")
        await pilot.press("escape")
        assert app.focused is app.pane("michael")
        await pilot.press(*"ok")
        await until(pilot, lambda: keys_of(app, "michael") == b"ok", "ok typed into michael")


async def test_every_panel_is_reached_and_scrolled_by_keys(app: HiveApp) -> None:
    paths = app.link.paths
    paths.board.write_text("# Long board\n\n" + "".join(f"- line {n}\n" for n in range(300)))
    ledger = tasks.empty_ledger()
    for n in range(40):
        ledger, _ = tasks.add_task(ledger, f"task {n}", assignable=["jim"], now=utc_now_iso())
    tasks.save_ledger(paths.tasks, ledger)
    async with run_app(app, (160, 48)) as pilot:
        await _ready(pilot, app)
        board = app.query_one(BoardPanel)
        await until(pilot, lambda: board.row_count > 100, "the board loaded")
        await pilot.press(PREFIX, "b", "pagedown", "down")
        assert app.focused is board and board.scroll_y > 0
        log = app.query_one(LogPanel)
        log.add(
            [
                LogEvent(
                    ts=f"2026-12-01T06:{n // 60:02}:{n % 60:02}Z",
                    kind="agent",
                    agent="jim",
                    detail=f"event {n}",
                )
                for n in range(200)
            ]
        )
        await pilot.press(PREFIX, "l", "pagedown")
        lines = app.query_one(LogLines)
        assert app.focused is lines and lines.scroll_y > 0
        table = app.query_one("#tasks-table", DataTable)
        await until(pilot, lambda: table.row_count == 40, "the tasks loaded")
        await pilot.press(PREFIX, "t", "pagedown", "down")
        assert app.query_one(TabbedContent).active == "tab-tasks"
        assert app.focused is table and table.cursor_row > 1 and table.scroll_y > 0
        # A panel with nothing in it still takes the keys (its empty line has the focus).
        await pilot.press(PREFIX, "i")
        assert app.focused is not None and app.focused.id == "inbox-empty"
        await pilot.press(PREFIX, "o", "right")
        assert app.focused is app.query_one("#map")
        await pilot.press("escape")
        assert app.focused is app.pane("michael")
        await pilot.press(PREFIX, "?")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        # Scrolled, picked, navigated: and not one byte reached the agent.
        await pilot.press("z")
        await until(pilot, lambda: keys_of(app, "michael") == b"z", "z typed into michael")


async def test_prefix_commands_work_while_an_input_has_the_focus(app: HiveApp) -> None:
    async with run_app(app, (160, 48)) as pilot:
        await _ready(pilot, app)
        box = app.query_one("#memory-query", Input)
        app.query_one(TabbedContent).active = "tab-memory"
        await pilot.pause()
        await pilot.click("#memory-query")  # the mouse, as the issue found it
        await until(pilot, lambda: app.focused is box, "the box focused")
        await pilot.press(*"ab", PREFIX, "t")
        assert app.query_one(TabbedContent).active == "tab-tasks"
        await pilot.press(PREFIX, "b")
        assert app.query_one(TabbedContent).active == "tab-board"
        assert box.value == "ab", "no command letter typed into the box"
        # The prefix twice from a panel: the prefix key itself goes to the agent.
        await pilot.press(PREFIX, "m", PREFIX, PREFIX)
        await until(pilot, lambda: keys_of(app, "michael") == b"\x1d", "ctrl+] to michael")
        # alt+N from a panel focuses the agent.
        await pilot.press(PREFIX, "m", "alt+2")
        assert app.focused is app.pane("jim")
        await pilot.press(PREFIX, "m", "alt+1")
        assert app.focused is app.pane("michael")
        assert box.value == "ab"
        assert keys_of(app, "michael") == b"\x1d" and keys_of(app, "jim") == b""
        # And q quits from the box too: asked first (the office runs on its own), d detaches.
        await pilot.press(PREFIX, "m", PREFIX, "q")
        await until(pilot, lambda: isinstance(app.screen, QuitScreen), "the question")
        await pilot.press("d")
        await until(pilot, lambda: app.ended, "the app to detach")
        assert box.value == "ab" and app.ended is not None and "detached" in app.ended


# In-process: what it checks is the in-process office's own listeners (LocalLink).
async def test_q_lets_go_of_an_in_process_office_before_stopping_it(short_tmp: Path) -> None:
    app = HiveApp(Office(_home(short_tmp), agents=False, program=hive))
    async with run_app(app, (160, 48)) as pilot:
        await settled(pilot, app)
        await pilot.press(PREFIX, "m", PREFIX, "q")
        link = app.link
        assert isinstance(link, LocalLink)
        assert link._agent_changed not in link.office.listeners.agent


async def test_keys_typed_into_an_in_process_office_make_its_bulk_work_give_way(
    short_tmp: Path,
) -> None:
    # Over the socket link a client's Input does it (tests/effects/test_office_pace.py).
    app = HiveApp(Office(_home(short_tmp), agents=False, program=hive))
    async with run_app(app, (160, 48)) as pilot:
        await settled(pilot, app)
        pace = app.link.office.pace if isinstance(app.link, LocalLink) else None
        assert pace is not None and not pace.typing()
        await pilot.press(PREFIX, "o")  # the map: its keys are the app's own, not typed
        await pilot.press("escape")
        assert not pace.typing()
        assert isinstance(app.focused, TerminalPane)
        await pilot.press("x")
        assert pace.typing()


async def test_an_escalation_is_answered_from_the_keyboard(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    paths = _home(short_tmp)
    write_draft(
        paths.mailbox("jim"),
        Draft(to="human", act="query", subject="Which vendor?", body="A or B?", needs_human=True),
    )
    app = serve_app(paths, agents=False)
    async with run_app(app, (160, 48)) as pilot:
        [question] = await until(pilot, lambda: list(app.escalations.values()), "the question")
        await until(pilot, lambda: app.query_one("#inbox-table", DataTable).row_count, "listed")
        await pilot.press(PREFIX, "i", "enter")
        assert isinstance(app.screen, AnswerScreen)
        await pilot.press(*"Vendor B", "ctrl+s")
        manager = paths.mailbox("michael")
        answer = await until(
            pilot,
            lambda: next((m for m in iter_inbox(manager) if m.sender == HUMAN), None),
            "the answer in the manager's inbox",
        )
        assert (answer.in_reply_to, answer.body) == (question.id, "Vendor B")
        await until(pilot, lambda: not app.escalations, "the question off the list")


async def test_archive_asks_first_and_no_leaves_the_agent(app: HiveApp) -> None:
    async with run_app(app, (160, 48)) as pilot:
        await _ready(pilot, app)
        await until(pilot, lambda: app.link.view("pam").pid, "pam running")
        await pilot.press("alt+3", PREFIX, "a")
        assert isinstance(app.screen, ConfirmScreen)
        assert "Archive pam?" in str(app.screen.query_one("#confirm Static").render())
        await pilot.press("enter")
        assert isinstance(app.screen, ConfirmScreen), "enter is not a yes"
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmScreen)
        assert app.link.view("pam").status != "archived"
        await pilot.press(PREFIX, "a", "y")
        await until(pilot, lambda: app.link.view("pam").status == "archived", "archived")


# --- a real terminal -------------------------------------------------------------------


class Tmux:
    def __init__(self, root: Path) -> None:
        conf = root / "tmux.conf"
        conf.write_text("set -g default-terminal tmux-256color\nset -sg escape-time 10\n")
        self.base = ["tmux", "-S", str(root / "tmux.sock"), "-f", str(conf)]

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            [*self.base, *args], capture_output=True, text=True, check=True
        ).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "office")

    def wait(self, what: str, predicate: Callable[[str], bool], timeout: float = 60) -> str:
        last = [""]

        def shown() -> str:
            last[0] = self.screen()
            return last[0] if predicate(last[0]) else ""

        try:
            return wait_for(shown, what, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; the screen was:\n{last[0]}") from None


@pytest.fixture
def app_in_tmux(short_tmp: Path) -> Iterator[tuple[HivePaths, Tmux]]:
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (scripts/setup installs it)")
    paths = _home(short_tmp)
    tmux = Tmux(paths.home.parent)
    app = Path(sys.executable).parent / "hive-office"
    tmux(
        "new-session", "-d", "-s", "office", "-x", "80", "-y", "24",
        f"{app} --home {paths.home}; sleep 30",
    )  # fmt: skip
    try:
        yield paths, tmux
    finally:
        # The office outlives the app (issue 11): stop it, then end tmux.
        subprocess.run([app, "stop", "--home", str(paths.home)], capture_output=True)
        subprocess.run([*tmux.base, "kill-server"], check=False)


def test_in_tmux_at_80x24_the_key_line_and_the_panels_work(
    app_in_tmux: tuple[HivePaths, Tmux],
) -> None:
    paths, tmux = app_in_tmux
    recorded = paths.home.parent / "michael.keys"

    def last_line(screen: str) -> str:
        return screen.rstrip("\n").split("\n")[-1]

    screen = tmux.wait("READY in michael's pane", lambda s: "READY" in s)
    line = last_line(screen)
    assert "? help" in line and "q quit" in line, line
    tmux("send-keys", "-t", "office", "C-]")
    tmux.wait("the armed prefix", lambda s: last_line(s).startswith(" ctrl+] …"))
    # After prefix m the typed words go to the memory box, not the agent.
    tmux("send-keys", "-t", "office", "m")
    tmux.wait("the memory tab", lambda s: last_line(s).startswith(" ctrl+] then:"))
    tmux("send-keys", "-t", "office", "-l", "hello")
    tmux.wait("the query in the box", lambda s: "hello" in s)
    # alt+1 (ESC 1 through tmux) from the panel: the agent's pane again, no `¡` typed.
    tmux("send-keys", "-t", "office", "M-1")
    tmux("send-keys", "-t", "office", "-l", "ok")
    wait_for(lambda: recorded.exists() and recorded.read_bytes() == b"ok", "michael to get ok", 30)
    screen = tmux.screen()
    assert "hello" in screen and "¡" not in screen, screen
