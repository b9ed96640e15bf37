"""HiveApp: the office on screen.

The app reaches its office only through an `OfficeLink` (hive_tui/link.py): a client
of the office's socket (the office runs on its own, and outlives the app), or the
Office itself running in this process as a worker on the app's loop (tests, --demo).
The app listens to it (agents directly; routed mail and hive files through the
`Bridge`, which reads what changed off the loop, once a frame) and feeds the widgets.
Every key goes to the focused widget (an agent's terminal, or a panel the person picked)
except the prefix key (ctrl+] by default) and alt+1..9; after the prefix, one key is a
command: a view command or one of the person's actions (hive_tui/commands.py).
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.containers import Container, Horizontal, Vertical
from textual.css.query import NoMatches
from textual.keys import _character_to_key
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane
from textual.worker import Worker

from hive_core.actions import BY_NAME, PersonAction
from hive_core.clients import notify
from hive_core.clients.protocol import AgentView
from hive_core.cost import label
from hive_core.health import Problem
from hive_core.hint import office_command
from hive_core.memory import Hit, Mode, SearchScope, search
from hive_core.render import status_words, why_text
from hive_core.schema import HUMAN, ControlRequest, Message
from hive_core.status import TITLE_KINDS
from hive_core.worktrees import office_review, read_overlaps
from hive_tui.bridge import Bridge, HiveLoaded, MailRouted
from hive_tui.commands import key_line, person_action, view_action
from hive_tui.link import LocalLink, OfficeLink, Route
from hive_tui.map.widget import OfficeMap
from hive_tui.messages import AgentInfo
from hive_tui.panels.board import BoardPanel
from hive_tui.panels.inbox import InboxPanel
from hive_tui.panels.log import LogPanel
from hive_tui.panels.memory import MemoryPanel
from hive_tui.panels.tasks import TasksPanel
from hive_tui.problems import Shown, shown
from hive_tui.problems import news as problem_news
from hive_tui.screens.answer import AnswerScreen
from hive_tui.screens.confirm import ConfirmScreen
from hive_tui.screens.diff import DiffScreen
from hive_tui.screens.help import HelpScreen
from hive_tui.screens.hire import HireScreen
from hive_tui.screens.quit import QuitScreen
from hive_tui.screens.send import SendScreen
from hive_tui.screens.task import TaskScreen
from hive_tui.terminal.input import KeyDriver
from hive_tui.terminal.keys import encode_key
from hive_tui.terminal.pane import TerminalPane

if TYPE_CHECKING:
    from hive_core.office import Office

# An armed prefix with no key after it disarms by itself, as tmux's does.
PREFIX_TIMEOUT_S = 2.0
MEMORY_RESULTS = 20
# alt+N focuses agent N unless office.toml says `alt_digits = false` (for a tmux that
# binds M-1..M-9); the prefix and then N always does. ESC N, which alt+N sends without
# the kitty protocol, is alt+N (hive_tui/terminal/input.py); a terminal whose Option key
# types ¡ ™ £ ... types those characters, into the agent, as in tmux.
ALT_DIGITS: dict[str, int] = {f"alt+{n}": n for n in range(1, 10)}


@runtime_checkable
class Panel(Protocol):
    """A side panel: it names the widget that takes the keys when the person picks it."""

    def focus_target(self) -> Widget: ...


class KeyLine(Widget):
    """The bottom line: the keys that fit its width; while the prefix is armed it says
    so (`ctrl+] …`) and lists what the next key can be."""

    DEFAULT_CSS = """
    KeyLine { height: 1; background: $panel; color: $text-muted; }
    KeyLine.armed { background: $accent; color: $text; text-style: bold; }
    """
    armed: reactive[bool] = reactive(False)

    def __init__(self, prefix: str, *, alt_digits: bool = True, id: str | None = None) -> None:
        super().__init__(id=id)
        self.prefix = prefix
        self.alt_digits = alt_digits

    def render(self) -> Text:
        line = key_line(self.prefix, self.size.width, armed=self.armed, alt_digits=self.alt_digits)
        return Text(line, no_wrap=True)

    def watch_armed(self, armed: bool) -> None:
        self.set_class(armed, "armed")


class HiveApp(App[None], inherit_bindings=False):
    """The app's own keys never include anything an agent CLI needs: it has no bindings
    of its own (its keys are taken in `on_event`), and Textual's default ctrl+q / ctrl+c /
    ctrl+p bindings are dropped (inherit_bindings=False, no palette)."""

    TITLE = "hive-office"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    #body { height: 1fr; }
    #left { width: 1fr; }
    #map { height: 14; }
    #panes { height: 1fr; }
    TerminalPane { height: 1fr; border: round $panel; }
    TerminalPane:focus { border: round $accent; }
    #side { width: 44; border-left: solid $panel; }
    #health { height: auto; max-height: 4; background: $error; color: $text; display: none; }
    #demo { height: 1; background: $warning; color: $background; text-style: bold; }
    .zoom #map, .zoom #side { display: none; }
    .panel-zoom #left { display: none; }
    .panel-zoom #side { border-left: none; }
    .grid #map { display: none; }
    .grid #panes { layout: grid; grid-size: 2; }
    """

    def __init__(self, link: OfficeLink | Office, *, demo: bool = False) -> None:
        # ANSI colours reach the terminal as palette indices, as tmux passes them, so the
        # person's theme colours the agents' panes (Textual would map them to its own RGB).
        # KeyDriver: keys read as tmux sends them (alt+key as ESC key), see its module.
        super().__init__(ansi_color=True, driver_class=KeyDriver)
        # An Office is one only if its module was loaded (the caller made it): a client
        # never imports the office's modules (git, the watcher) just to ask.
        wiring = sys.modules.get("hive_core.office.wiring")
        in_process = wiring is not None and isinstance(link, wiring.Office)
        self.link: OfficeLink = (
            LocalLink(cast("Office", link)) if in_process else cast("OfficeLink", link)
        )
        config = self.link.config
        self.demo = demo
        self.prefix_label = config.office.prefix_key
        self.prefix = textual_key(self.prefix_label)
        self.alt_digits = config.office.alt_digits
        # The prefix was typed and the next key is a command (whatever has the focus).
        self.prefix_armed = False
        self._disarm_timer: Timer | None = None
        self.roster = list(self.link.roster)
        self.manager = config.office.manager
        self.focused_agent = self.manager if self.manager in self.roster else self.roster[0]
        self.layout_mode = "default"
        self._stop = asyncio.Event()
        # The person chose to leave (quit, detach): the link ending is then no surprise.
        self._leaving = False
        # What run_client says once the screen is gone: how the app ended.
        self.ended: str | None = None
        # What the office says is wrong with it, by component (hive_core/health.py).
        self._problems: list[Shown] = []
        self.bridge = Bridge(self, self.link.paths, manager=self.manager, roster=self.roster)
        self.unread: dict[str, int] = {}
        self.overlapping: set[str] = set()  # agents whose branch touches another's file
        # What the Inbox tab shows: what waits for the person (hive_core/team/escalations.py).
        self.escalations: dict[str, Message] = {}
        # What has rung the person's terminal (hive_core/clients/notify.py): each thing once.
        self._rung = notify.Seen()
        self._in_tmux = bool(os.environ.get("TMUX"))
        # Every agent's pane, made when first asked for; the focused one is composed,
        # the others mounted after the first frame (`_mount_panes`).
        self._panes: dict[str, TerminalPane] = {}
        # What waits for the hidden tabs' panels until they are mounted (`_mount_panels`):
        # the hive's first load, costs, a tab picked in the first instant. None after.
        self._panel_calls: list[Callable[[], object]] | None = []
        self._panels_worker: Worker[None] | None = None

    # --- building ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        if self.demo:
            yield Static(
                " DEMO: scripted agents, no API key, nothing leaves this machine ", id="demo"
            )
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield OfficeMap(id="map")
                with Container(id="panes"):
                    # The others follow the first frame (`_mount_panes`): with 50 agents,
                    # mounting every pane first held the map and the names back.
                    yield self.pane(self.focused_agent)
            with TabbedContent(id="side", initial="tab-board"):
                with TabPane("Board", id="tab-board"):
                    yield BoardPanel(id="board")
                # Their panels follow the first frame (`_mount_panels`): hidden behind
                # the Board, they held it back (~55 ms with their styles and tables).
                for name in self._hidden_panels():
                    yield TabPane(name.title(), id=f"tab-{name}")
        yield Static("", id="health")
        yield KeyLine(self.prefix_label, alt_digits=self.alt_digits, id="keys")

    async def on_mount(self) -> None:
        self.link.listen(self)
        self._show_layout()
        self._refresh_map()
        self.bridge.everything()
        self._office_worker = self.run_worker(self._run_link(), name="office", exit_on_error=True)
        # The office's worktree keeper writes the overlaps each pass; read at its pace.
        self.set_interval(self.link.config.office.worktree_check_s, self._read_overlaps)
        self._read_overlaps()
        # SIGTERM (a closing SSH session, `kill`) ends the app as the person would: an
        # office in this process stops (agents stopped, last commit); a client detaches.
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGTERM, lambda: self.run_worker(self.leave(stop=not self.link.detachable))
        )
        self.call_after_refresh(self.focus_agent, self.focused_agent)
        self.call_after_refresh(self._mount_panes)
        self.call_after_refresh(self._start_panels)
        # What start-up built (modules, widgets, the office: ~80k objects) lives as long as
        # the app: frozen, the cyclic collector leaves it alone. Otherwise each full
        # collection, run by whichever thread allocates (a routing burst's workers), walks
        # all of it holding the GIL: 100-250 ms without a frame (bench/bench_ui_stall.py).
        self.call_after_refresh(gc.freeze)

    def on_unmount(self) -> None:
        """Started and ended with the app, so a process that runs the app again (the
        tests) gets the first one's objects collected."""
        gc.unfreeze()

    def on_resize(self, event: events.Resize) -> None:
        """Small terminals (80x24 over SSH) keep most of the height for the pane. The new
        size is the event's: this handler runs before App's own, which updates `self.size`,
        and the layout set here is the one the same frame uses."""
        width, height = event.size
        self.query_one(OfficeMap).styles.height = max(7, min(14, height // 3))
        self._fit_side(width)
        self.call_after_refresh(self._fit_panes)

    def _start_panels(self) -> None:
        if not self._leaving:
            self._panels_worker = self.run_worker(self._mount_panels(), name="panels")

    def _hidden_panels(self) -> dict[str, Callable[..., Widget]]:
        """The side's tabs behind the Board, by panel id (its tab's title): how each panel
        is made, after the first frame (`_mount_panels`)."""
        return {
            "tasks": TasksPanel,
            "log": LogPanel,
            "inbox": InboxPanel,
            "memory": partial(MemoryPanel, self._memory_search, self.link.paths, self.link.hive),
        }

    async def _mount_panels(self) -> None:
        """The hidden tabs' panels, then what waited for them, in the order it came."""
        await asyncio.gather(
            *(
                self.query_one(f"#tab-{name}", TabPane).mount(make(id=name))
                for name, make in self._hidden_panels().items()
            )
        )
        calls, self._panel_calls = self._panel_calls or [], None
        for call in calls:
            call()

    @property
    def panels_mounted(self) -> bool:
        """The hidden tabs' panels are mounted and have what came for them before."""
        return self._panel_calls is None

    def _on_panels(self, call: Callable[[], object]) -> None:
        """`call` now if the hidden tabs' panels are mounted, else once they are."""
        if self._panel_calls is None:
            call()
        else:
            self._panel_calls.append(call)

    def _fit_panes(self) -> None:
        """Each shown pane's pty at the size drawn (TerminalPane.fit says why)."""
        for pane in self.query(TerminalPane):
            if pane.display and pane.is_mounted:
                pane.fit(pane.size.height, pane.size.width)

    def _fit_side(self, width: int) -> None:
        side = self.query_one("#side")
        side.styles.width = "1fr" if self.layout_mode == "panel" else side_width(width)

    async def _run_link(self) -> None:
        why = await self.link.run(self._stop)
        if why is not None and not self._leaving:  # the office went without being asked
            self.ended = f"hive-office: the office closed this screen: {why}"
            self.exit(return_code=1)

    async def action_quit(self) -> None:
        """An office in this process: stop it and leave. A client asks whether to stop
        the office or only detach from it."""
        if not self.link.detachable:
            await self.leave(stop=True)
            return

        def chosen(choice: str | None) -> None:
            if choice in ("stop", "detach"):
                self.run_worker(self.leave(stop=choice == "stop"))

        self.push_screen(QuitScreen(), chosen)

    async def action_detach(self) -> None:
        if not self.link.detachable:
            label = self.prefix_label
            self.notify(
                f"This office runs inside this screen: nothing to detach from ({label} q stops it).",
                severity="warning",
            )
            return
        await self.leave(stop=False)

    async def leave(self, *, stop: bool) -> None:
        """Stop the office (agents stopped, mail routed, last commit) or detach from it,
        then close the screen."""
        if self._leaving:
            return
        self._leaving = True
        if stop:
            self.notify("Stopping the office: agents, last routing pass, last commit...")
            await self.link.stop_office()
            self.ended = "hive-office: the office stopped."
        else:
            await self.link.detach()
            again = office_command(self.link.paths.home)
            self.ended = (
                f"hive-office: detached; the office keeps running (`{again}` attaches again)."
            )
        self._stop.set()
        await self._office_worker.wait()
        # Panels still mounting as the screen goes would find their children gone.
        if self._panels_worker is not None:
            await self._panels_worker.wait()
        self.exit()

    # --- office -> screen -------------------------------------------------------------

    def health_changed(self, problems: list[Problem]) -> None:
        """What stops the office doing its job (routing, commits, a loop) stays on screen
        until it clears; each new problem also pops up once."""
        now = shown({p.component: p.detail for p in problems})
        # Several desks failing for one cause (no login) pop up once, as one line.
        new, cleared = problem_news(self._problems, now)
        for item in new:
            self.notify(item.text, title="office", severity="error", timeout=10)
        for item in cleared:
            self.notify(f"{item.label} is working again", title="office", timeout=5)
        self._problems = now
        line = self.query_one("#health", Static)
        line.update(
            " ⚠ " + " · ".join(item.text for item in now) + "  (hive-office doctor; hive log)"
        )
        line.display = bool(now)

    def info(self, state: AgentView) -> AgentInfo:
        return AgentInfo(
            id=state.id,
            name=state.name,
            role=state.role,
            manager=state.manager,
            status=state.status,
            last_tool=state.last_tool,
            unread=self.unread.get(state.id, 0),
            # A permission prompt, or (the manager) escalations waiting for the person.
            needs_you=state.status == "waiting" or (state.manager and bool(self.escalations)),
            paused=state.paused or state.halted,
            missing=state.missing,
            overlap=state.id in self.overlapping,
            uncontained=state.explained is not None and state.explained.uncontained is not None,
        )

    def agent_changed(self, state: AgentView) -> None:
        if state.id not in self.roster:
            if state.archived:  # never on the floor of this app
                return
            self._joined(state.id)
        self.query_one(OfficeMap).update_agent(self.info(state))
        pane = self.pane(state.id)
        pane.border_title = self._title(state.id)
        pane.notice = state.missing
        pane.exited = state.status == "exited"
        # Its CLI exited at once: how, what to do and the retry, wrapped in the pane.
        retry = f"{self.prefix_label} r to retry."
        pane.hint = f"{state.start_failed} {retry}" if state.start_failed else None
        self._ring({state.id: notify.agent_alert(state)})

    @on(MailRouted)
    def _mail_routed(self, event: MailRouted) -> None:
        """One envelope per pair of desks a frame: a burst is a flight, not a swarm."""
        office_map = self.query_one(OfficeMap)
        pairs = {
            (sender, recipient)
            for sender, recipients in event.routes
            for recipient in recipients
            if sender in self.roster and recipient in self.roster
        }
        for sender, recipient in sorted(pairs):
            office_map.send_envelope(sender, recipient)

    @on(HiveLoaded)
    def _hive_loaded(self, loaded: HiveLoaded) -> None:
        try:
            office_map = self.query_one(OfficeMap)
        except NoMatches:
            return  # a load that lands while the app closes: its screen is gone
        if loaded.board is not None:
            self.query_one(BoardPanel).show(loaded.board)
        if loaded.ledger is not None:
            ledger = loaded.ledger
            self._on_panels(lambda: self.query_one(TasksPanel).show(ledger))
        if loaded.log:
            log = loaded.log
            self._on_panels(lambda: self.query_one(LogPanel).add_formatted(log))
        if loaded.inbox is not None:
            inbox = loaded.inbox
            self.escalations = {m.id: m for m in inbox}
            self._on_panels(lambda: self.query_one(InboxPanel).show(inbox))
            count = len(self.escalations)
            tab = self.query_one(TabbedContent).get_tab("tab-inbox")
            tab.label = f"Inbox {count}" if count else "Inbox"
            self._ring({}, [(m.id, f"{m.sender}: {m.subject or m.act}") for m in loaded.inbox])
        if loaded.unread:
            self.unread.update(loaded.unread)
        manager = self.manager
        changed = set(loaded.unread) | ({manager} if loaded.inbox is not None else set())
        for agent_id in sorted(changed & set(self.roster)):
            office_map.update_agent(self.info(self.link.view(agent_id)))
            self.pane(agent_id).border_title = self._title(agent_id)

    def cost_changed(self) -> None:
        """After a pass of the office's cost loop that changed a sum."""
        for agent_id in self.roster:
            self.pane(agent_id).border_title = self._title(agent_id)
        _agents, tasks = self.link.costs()
        costs = {t: label(total) for t, total in tasks.items()}
        self._on_panels(lambda: self.query_one(TasksPanel).show_costs(costs))

    def pane_output(self, agent_id: str, data: bytes) -> None:
        if agent_id in self.roster:
            self.pane(agent_id).feed(data)

    def pane_snapshot(self, agent_id: str, data: bytes) -> None:
        if agent_id in self.roster:
            self.pane(agent_id).restore(data)

    def mail_routed(self, routes: list[Route], inboxes: set[str]) -> None:
        self.bridge.routed(routes, inboxes)

    def hive_changed(self, paths: set[Path]) -> None:
        self.bridge.hive_changed(paths)

    def _read_overlaps(self) -> None:
        self.run_worker(self._overlaps(), group="overlaps", exclusive=True)

    async def _overlaps(self) -> None:
        found = await asyncio.to_thread(read_overlaps, self.link.paths)
        now = {agent for o in found for agent in (o.first, o.second)}
        if now != self.overlapping:
            self.overlapping = now
            self._refresh_map()

    def _refresh_map(self) -> None:
        self.query_one(OfficeMap).set_agents([self.info(self.link.view(a)) for a in self.roster])
        for agent_id in self.roster:
            self.pane(agent_id).border_title = self._title(agent_id)
            # What its pane says instead of a terminal (not installed, waiting for a
            # login) is there from the start: a client that attaches later gets no change.
            self.pane(agent_id).notice = self.link.view(agent_id).missing

    def _memory_search(self, query: str, scope: SearchScope, mode: Mode) -> list[Hit]:
        """On a thread (the Memory tab's worker): SQLite never runs on the loop, and a
        semantic or hybrid search is the office's, with the model it keeps loaded."""
        # What it would tell a terminal (it waits for the model) has no place on the
        # screen: the tab says what it found when the answer comes.
        return search(
            self.link.paths, query, HUMAN, scope, MEMORY_RESULTS, mode, tell=lambda _line: None
        )

    # --- screen -> office -------------------------------------------------------------

    @on(TerminalPane.Input)
    def _typed(self, message: TerminalPane.Input) -> None:
        if not message.by_person:
            # The pane's answers to the agent's terminal queries: the office's own screen
            # of the pane answers them (hive_core/clients/grids.py), once for everyone.
            return
        # The Stop drain and the wake path stand back while the person types.
        self.link.typed(message.agent_id)
        self.link.write(message.agent_id, message.data)

    @on(TerminalPane.Resized)
    def _resized(self, message: TerminalPane.Resized) -> None:
        self.link.resize(message.agent_id, message.rows, message.cols)

    def _ring(
        self, agents: dict[str, notify.Alert | None], items: list[tuple[str, str]] | None = None
    ) -> None:
        """Ring the person's terminal for what newly needs them (office.toml `notify`)."""
        self._rung, alerts = notify.news(self._rung, agents, items)
        sequence = notify.ring(alerts, self.link.config.office.notify, tmux=self._in_tmux)
        if sequence:
            self.write_terminal(sequence)

    def write_terminal(self, data: str) -> None:
        """Raw bytes to the person's terminal, between Textual's frames (its driver
        writes whole strings in order from one thread)."""
        if self._driver is not None and not self.is_headless:
            self._driver.write(data)

    @on(TasksPanel.Open)
    def _open_task(self, event: TasksPanel.Open) -> None:
        task = self.query_one(TasksPanel).task_of(event.task_id)
        if task is not None:
            self.push_screen(TaskScreen(task, self.link.paths, self.link.hive))

    @on(InboxPanel.Open)
    def _open_mail(self, event: InboxPanel.Open) -> None:
        message = self.escalations.get(event.message_id)
        if message is None:
            return

        def answered(text: str | None) -> None:
            if text:
                self.run_worker(self._answer(message, text))

        self.push_screen(AnswerScreen(message), answered)

    async def _answer(self, message: Message, text: str) -> None:
        await self._perform(ControlRequest(cmd="answer", message=message.id, text=text))

    async def _perform(self, req: ControlRequest) -> None:
        """One of the person's actions, through the office's one dispatch (as the CLI and
        the control socket do); its sentence, or why not, is said on screen."""
        try:
            reply = await self.link.perform(req)
        except OSError as exc:
            self.notify(f"{req.cmd} failed: {exc}", severity="error")
            return
        if reply.ok and req.cmd == "why":
            self.notify(why_text(req.agent or "", reply.detail), timeout=12)
        elif reply.ok:
            self.notify(reply.detail or f"{req.cmd}: done.")
        else:
            self.notify(reply.error or f"{req.cmd} was refused.", severity="error")

    @on(OfficeMap.AgentSelected)
    def _picked(self, message: OfficeMap.AgentSelected) -> None:
        self.focus_agent(message.agent_id)

    @on(OfficeMap.WhyAsked)
    def _why_asked(self, message: OfficeMap.WhyAsked) -> None:
        self.act(BY_NAME["why"], message.agent_id)

    # --- focus and layouts ------------------------------------------------------------

    def pane(self, agent_id: str) -> TerminalPane:
        """The agent's pane, mounted or not yet (`_mount_panes`): what reaches it before
        (output, a snapshot, its title) is kept and shown once it is."""
        pane = self._panes.get(agent_id)
        if pane is None:
            pane = self._panes[agent_id] = TerminalPane(agent_id, id=f"pane-{agent_id}")
            pane.border_title = self._title(agent_id)
        return pane

    def _mount_panes(self) -> None:
        """Mount every pane not mounted yet, in the roster's order around those that
        are; then each takes the shown pane's size (`_fit_panes`)."""
        container = self.query_one("#panes", Container)
        mounted = set(container.children)
        anchor: TerminalPane | None = None
        waiting: list[TerminalPane] = []
        for agent_id in self.roster:
            pane = self.pane(agent_id)
            if pane not in mounted:
                waiting.append(pane)
                continue
            if waiting:
                container.mount(*waiting, before=pane)
                waiting = []
            anchor = pane
        if waiting and anchor is not None:
            container.mount(*waiting, after=anchor)
        elif waiting:
            container.mount(*waiting)
        self.call_after_refresh(self._fit_panes)

    def focus_agent(self, agent_id: str) -> None:
        if agent_id not in self.roster:
            return
        self.focused_agent = agent_id
        if self.layout_mode == "panel":  # back to the panes, so back from the panel's zoom
            self.layout_mode = "default"
        self._show_layout()
        pane = self.pane(agent_id)
        if not pane.is_mounted:  # asked for before the panes were all mounted
            self._mount_panes()
            self.call_after_refresh(self.screen.set_focus, pane)
        else:
            # At once, not after the queued keys: what is typed next goes to this pane.
            self.screen.set_focus(pane)
        self.query_one(OfficeMap).select(agent_id)

    def _show_layout(self) -> None:
        self.screen.set_class(self.layout_mode == "zoom", "zoom")
        self.screen.set_class(self.layout_mode == "grid", "grid")
        self.screen.set_class(self.layout_mode == "panel", "panel-zoom")
        self._fit_side(self.size.width)
        self.call_after_refresh(self._fit_panes)
        shown = [a for a in self.roster if self.layout_mode == "grid" or a == self.focused_agent]
        for agent_id in self.roster:
            self.pane(agent_id).display = agent_id in shown
        self.link.visible(shown)

    # --- keys ---------------------------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        """Every key from the terminal passes here before the focused widget sees it (as
        priority bindings do), so the prefix, the key after it and esc-back-to-the-pane
        are the app's whatever has the focus, and a key typed in the same read as the
        prefix is already the app's. Forms (send, answer, help) keep all their keys."""
        if (
            isinstance(event, events.Key)
            and not event.is_forwarded
            and self.screen is self.screen_stack[0]
            and await self._main_key(event)
        ):
            return
        await super().on_event(event)

    async def _main_key(self, event: events.Key) -> bool:
        """The app's own handling of a key on the main screen; False: the focused
        widget's (an agent's pane, a panel) as usual."""
        if self.prefix_armed:
            self.disarm()
            if event.key == self.prefix:
                self._send_prefix()
            elif event.key != "escape":  # esc: never mind
                await self.run_prefix_command(event.key, event.character)
            return True
        if event.key == self.prefix:
            self.arm()
            return True
        if self.alt_digits and event.key in ALT_DIGITS:
            # Not a binding: Textual drops a binding an Input could type (`¡`).
            self.action_focus_agent(ALT_DIGITS[event.key])
            return True
        if event.key == "escape" and not isinstance(self.focused, TerminalPane):
            # From a panel or the map back to the agent; in a pane esc is the agent's.
            self.focus_agent(self.focused_agent)
            return True
        return False

    def arm(self) -> None:
        self.prefix_armed = True
        self.query_one(KeyLine).armed = True
        if self._disarm_timer is not None:
            self._disarm_timer.stop()
        self._disarm_timer = self.set_timer(PREFIX_TIMEOUT_S, self.disarm)

    def disarm(self) -> None:
        self.prefix_armed = False
        self.query_one(KeyLine).armed = False
        if self._disarm_timer is not None:
            self._disarm_timer.stop()
            self._disarm_timer = None

    def _send_prefix(self) -> None:
        """The prefix twice sends the prefix key itself to the agent, as in tmux."""
        self.link.write(self.focused_agent, encode_key(self.prefix, None) or b"")

    async def run_prefix_command(self, key: str, character: str | None) -> None:
        char = character or key
        action = view_action(char)
        if action is not None:
            await self.run_action(action)
            return
        state = self.link.view(self.focused_agent)
        person = person_action(char, held=state.paused or state.halted)
        if person is not None:
            self.act(person, self.focused_agent)
            return
        label = self.prefix_label
        self.notify(f"{label} {char}: no such command; {label} ? lists them.", severity="warning")

    def act(self, action: PersonAction, agent_id: str) -> None:
        """One of the person's actions on an agent; asked first if the table says so."""
        req = ControlRequest(cmd=action.name, agent=agent_id)
        if action.confirm is None:
            self.run_worker(self._perform(req))
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._perform(req))

        self.push_screen(ConfirmScreen(action.confirm.format(agent=agent_id)), confirmed)

    # --- view commands (hive_tui/commands.py) -------------------------------------------

    def action_focus_agent(self, n: int) -> None:
        if 1 <= n <= len(self.roster):
            self.focus_agent(self.roster[n - 1])

    def action_cycle(self, step: int) -> None:
        index = self.roster.index(self.focused_agent)
        self.focus_agent(self.roster[(index + step) % len(self.roster)])

    def action_layout(self, mode: str) -> None:
        """zoom, grid or back; zoom with a side panel's keys zooms the panel ("panel")."""
        if mode == "zoom" and self._in_side():
            self.layout_mode = "default" if self.layout_mode == "panel" else "panel"
            self._show_layout()
            return
        self.layout_mode = "default" if self.layout_mode == mode else mode
        self.focus_agent(self.focused_agent)

    def _in_side(self) -> bool:
        focused = self.focused
        return focused is not None and any(n.id == "side" for n in focused.ancestors_with_self)

    def action_panel(self, name: str) -> None:
        """Show a side panel and give it the keys (esc gives them back to the pane); a
        zoomed panel stays zoomed, showing this one."""
        if name != "board" and self._panel_calls is not None:
            self._on_panels(lambda: self.action_panel(name))
            return
        if self.layout_mode == "zoom":
            self.layout_mode = "default"
            self._show_layout()
        self.query_one(TabbedContent).active = f"tab-{name}"
        panel = self.query_one(f"#{name}")
        assert isinstance(panel, Panel), name
        self.screen.set_focus(panel.focus_target())

    def action_map(self) -> None:
        if self.layout_mode in ("zoom", "panel"):
            self.layout_mode = "default"
            self._show_layout()
        self.screen.set_focus(self.query_one(OfficeMap))

    def action_send(self) -> None:
        def sent(said: str | None) -> None:
            if said is not None:
                self.notify(said)

        self.push_screen(SendScreen(self.roster, self.focused_agent, self.link.hive), sent)

    def action_hire(self) -> None:
        def hire(req: ControlRequest | None) -> None:
            if req is not None:
                self.run_worker(self._perform(req))

        self.push_screen(HireScreen(self.roster), hire)

    def _joined(self, agent_id: str) -> None:
        """A hired agent (hive_core/team/hire.py): its pane after the others, so alt+N and the
        map follow the roster's order; the office's listener then fills in the rest."""
        self.roster.append(agent_id)
        self._mount_panes()
        self._show_layout()

    def action_copy_mode(self) -> None:
        """tmux's copy mode in the focused agent's pane (hive_tui/terminal/copy_mode.py)."""
        pane = self.pane(self.focused_agent)
        self.screen.set_focus(pane)
        pane.enter_copy_mode()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.prefix_label, alt_digits=self.alt_digits))

    def action_diff(self) -> None:
        link = self.link
        self.push_screen(DiffScreen(lambda: office_review(link.paths, link.config), link.hive))

    def _title(self, agent_id: str) -> str:
        state = self.link.view(agent_id)
        n = self.roster.index(agent_id) + 1
        shown = status_words(state.status, state.pid, state.exit_status)
        if state.start_failed:  # the pane says how and what to do (TerminalPane.hint)
            shown = f"{shown} at start · {self.prefix_label} r retries"
        bits = [f"{n} {state.name}", shown]
        if state.paused:
            bits.append("paused")
        if state.explained is not None and state.explained.uncontained is not None:
            bits.append("uncontained")  # `why` says why (desks/contain.py)
        explained = state.explained  # what the status word hides (hive_core/status.py)
        if explained and explained.kind in TITLE_KINDS and explained.kind != state.status:
            bits.append(explained.kind.replace("_", " "))
        unread = self.unread.get(agent_id, 0)
        if state.mail_title:
            bits.append(f"✉ {state.mail_title}")  # a hookless agent: it cannot drain by itself
        elif unread:
            bits.append(f"✉ {unread}")
        spent = self.link.costs()[0].get(agent_id)
        if spent is not None:
            bits.append(label(spent))
        return " · ".join(bits)


def side_width(cols: int) -> int:
    """The side panel's width on a `cols`-wide terminal: two fifths, at least 26 and at
    most 72, and never so wide that the pane keeps fewer than 80 columns inside its box
    (what agent CLIs lay out for) while the terminal has them to give."""
    return max(26, min(72, cols * 2 // 5, cols - 82))


def textual_key(spec: str) -> str:
    """`ctrl+]` as Textual names it (`ctrl+right_square_bracket`)."""
    *mods, last = spec.strip().lower().split("+") if spec.strip() != "+" else ["+"]
    name = _character_to_key(last) if len(last) == 1 else last
    return "+".join([*mods, name])
