"""HiveApp: the office on screen.

The same Office object that `hive-office serve` runs headless runs here as a worker on
the app's loop; its bulk work (routing, commits, memory, the ledger) runs on threads.
The app listens to it (agents directly; routed mail and hive files through the
`Bridge`, which reads what changed off the loop, once a frame) and feeds the widgets.
Every key goes to the focused agent's terminal except the prefix key (ctrl+] by
default) and alt+1..9; after the prefix, one key is a command.
"""

from __future__ import annotations

import asyncio
import gc
import signal
from typing import ClassVar

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.events import Key
from textual.keys import _character_to_key
from textual.widgets import Static, TabbedContent, TabPane

from hive_core.agents.state import AgentState
from hive_core.health import Problem
from hive_core.kick import kick
from hive_core.mail import write_draft
from hive_core.memory import Hit, open_store
from hive_core.office import Office
from hive_core.schema import HUMAN, Draft, Message
from hive_tui.bridge import Bridge, HiveLoaded, MailRouted
from hive_tui.map.widget import OfficeMap
from hive_tui.messages import AgentInfo
from hive_tui.panels.board import BoardPanel
from hive_tui.panels.inbox import InboxPanel
from hive_tui.panels.log import LogPanel
from hive_tui.panels.memory import MemoryPanel
from hive_tui.panels.tasks import TasksPanel
from hive_tui.screens.answer import AnswerScreen
from hive_tui.screens.help import HelpScreen
from hive_tui.screens.send import SendScreen
from hive_tui.terminal.keys import encode_key
from hive_tui.terminal.pane import PrefixKey, TerminalPane

# Commands after the prefix key; "?" shows them all.
PREFIX_COMMANDS: dict[str, tuple[str, str]] = {
    "1-9": ("focus", "focus agent N (roster order)"),
    "n": ("next", "next agent"),
    "p": ("prev", "previous agent"),
    "z": ("zoom", "zoom the focused pane to the whole screen (again: back)"),
    "g": ("grid", "all panes in a grid (again: back)"),
    "b": ("tab:board", "side panel: board"),
    "t": ("tab:tasks", "side panel: tasks"),
    "l": ("tab:log", "side panel: log"),
    "i": ("tab:inbox", "side panel: your inbox and escalations"),
    "m": ("tab:memory", "side panel: memory search"),
    "o": ("map", "focus the office map (arrows + Enter pick an agent)"),
    "s": ("send", "send a message to an agent"),
    "x": ("pause", "pause / resume the focused agent"),
    "h": ("halt", "halt the focused agent at its next hook (x resumes)"),
    "r": ("spawn", "start the focused agent if it is not running"),
    "a": ("archive", "archive the focused agent (its CLI stops; r brings it back)"),
    "?": ("help", "show all keys"),
    "q": ("quit", "quit (stops the agents, commits, exits)"),
}
MEMORY_RESULTS = 20
# Without the kitty keyboard protocol (tmux, most terminals over SSH) Textual reads
# ESC+digit, which is what alt+digit sends, as the macOS Option character of that digit.
# Both names mean alt+N here; typing those characters into an agent needs a paste.
ALT_DIGIT_KEYS = {
    n: (f"alt+{n}", name)
    for n, name in enumerate(
        [
            "inverted_exclamation_mark",
            "trade_mark_sign",
            "pound_sign",
            "cent_sign",
            "infinity",
            "section_sign",
            "pilcrow_sign",
            "bullet",
            "ª",
        ],
        start=1,
    )
}


class HiveApp(App[None], inherit_bindings=False):
    """The app's own keys never include anything an agent CLI needs: Textual's default
    ctrl+q / ctrl+c / ctrl+p bindings are dropped (inherit_bindings=False, no palette)."""

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
    #keys { height: 1; background: $panel; color: $text-muted; }
    #health { height: 1; background: $error; color: $text; display: none; }
    #demo { height: 1; background: $warning; color: $background; text-style: bold; }
    .zoom #map, .zoom #side { display: none; }
    .grid #map { display: none; }
    .grid #panes { layout: grid; grid-size: 2; }
    """
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        *[
            Binding(",".join(keys), f"focus_agent({n})", f"agent {n}", priority=True, show=False)
            for n, keys in ALT_DIGIT_KEYS.items()
        ],
    ]

    def __init__(self, office: Office, *, demo: bool = False) -> None:
        super().__init__()
        self.office = office
        self.demo = demo
        self.prefix_label = office.config.office.prefix_key
        self.prefix = textual_key(self.prefix_label)
        # Shared with every pane, which arms it when the prefix is typed into it.
        self.prefix_key = PrefixKey(self.prefix)
        self.roster = [a.id for a in office.config.agents if not a.archived]
        self.focused_agent = (
            office.config.office.manager
            if office.config.office.manager in self.roster
            else self.roster[0]
        )
        self.layout_mode = "default"
        self._stop = asyncio.Event()
        # What the office says is wrong with it, by component (hive_core/health.py).
        self._problems: dict[str, str] = {}
        self.bridge = Bridge(
            self, office.paths, manager=office.config.office.manager, roster=self.roster
        )
        self.unread: dict[str, int] = {}
        # What the Inbox tab shows: the person's mail and the manager's needs_human mail.
        self.escalations: dict[str, Message] = {}
        # For when a pane does not have the focus (the map, a panel); a pane arms it itself.
        self.bind(self.prefix, "prefix", description="prefix", show=False)

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
                    for agent_id in self.roster:
                        pane = TerminalPane(agent_id, id=f"pane-{agent_id}")
                        pane.border_title = self._title(agent_id)
                        pane.reserved = self._reserved_keys()
                        pane.prefix = self.prefix_key
                        yield pane
            with TabbedContent(id="side", initial="tab-board"):
                with TabPane("Board", id="tab-board"):
                    yield BoardPanel(id="board")
                with TabPane("Tasks", id="tab-tasks"):
                    yield TasksPanel(id="tasks")
                with TabPane("Log", id="tab-log"):
                    yield LogPanel(id="log")
                with TabPane("Inbox", id="tab-inbox"):
                    yield InboxPanel(id="inbox")
                with TabPane("Memory", id="tab-memory"):
                    yield MemoryPanel(self._memory_search, self.office.paths.hive, id="memory")
        yield Static("", id="health")
        yield Static(self._keys_line(), id="keys")

    def _reserved_keys(self) -> set[str]:
        return {key for keys in ALT_DIGIT_KEYS.values() for key in keys}

    def _keys_line(self) -> str:
        return (
            f" {self.prefix_label} then: 1-9 agent · n/p next/prev · z zoom · g grid · "
            "b/t/l/i/m panels · s send · x pause · h halt · ? help · q quit   alt+1..9 agent"
        )

    async def on_mount(self) -> None:
        office = self.office
        office.listeners.agent.append(self._agent_changed)
        office.listeners.routed.append(self.bridge.routed)
        office.listeners.hive.append(self.bridge.hive_changed)
        office.listeners.health.append(self._health_changed)
        office.supervisor.sinks.append(self._output)
        self._show_layout()
        self._refresh_map()
        self.bridge.everything()
        self._office_worker = self.run_worker(
            office.run(self._stop), name="office", exit_on_error=True
        )
        # SIGTERM (a closing SSH session, `kill`) quits like `q`: agents stopped, last commit.
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGTERM, lambda: self.run_worker(self.action_quit())
        )
        self.call_after_refresh(self.focus_agent, self.focused_agent)
        # What start-up built (modules, widgets, the office: ~80k objects) lives as long as
        # the app: frozen, the cyclic collector leaves it alone. Otherwise each full
        # collection, run by whichever thread allocates (a routing burst's workers), walks
        # all of it holding the GIL: 100-250 ms without a frame (bench/bench_ui_stall.py).
        self.call_after_refresh(gc.freeze)

    def on_unmount(self) -> None:
        """Started and ended with the app, so a process that runs the app again (the
        tests) gets the first one's objects collected."""
        gc.unfreeze()

    def on_resize(self) -> None:
        """Small terminals (80x24 over SSH) keep most of the height for the pane."""
        width, height = self.size
        self.query_one(OfficeMap).styles.height = max(7, min(14, height // 3))
        self.query_one("#side").styles.width = max(26, min(48, width * 3 // 10))

    async def action_quit(self) -> None:
        """Stop the agents, route what is left, make the last commit, then leave."""
        # The screen is going away: the office's shutdown must not call into it.
        listeners = self.office.listeners
        for group in (listeners.agent, listeners.routed, listeners.hive, listeners.health):
            group.clear()
        self.office.supervisor.sinks.clear()
        self._stop.set()
        await self._office_worker.wait()
        self.exit()

    # --- office -> screen -------------------------------------------------------------

    def _health_changed(self, problems: list[Problem]) -> None:
        """What stops the office doing its job (routing, commits, a loop) stays on screen
        until it clears; each new problem also pops up once."""
        now = {p.component: p.detail for p in problems}
        for component, detail in now.items():
            if self._problems.get(component) != detail:
                self.notify(detail, title=f"office: {component}", severity="error", timeout=10)
        for component in self._problems.keys() - now.keys():
            self.notify(f"{component} is working again", title="office", timeout=5)
        self._problems = now
        line = self.query_one("#health", Static)
        line.update(
            " ⚠ "
            + " · ".join(f"{c}: {d}" for c, d in now.items())
            + "  (hive-office doctor; hive log)"
        )
        line.display = bool(now)

    def info(self, state: AgentState) -> AgentInfo:
        return AgentInfo(
            id=state.id,
            name=state.spec.name,
            role=state.spec.role,
            manager=state.manager,
            status=state.status,
            last_tool=state.last_tool,
            unread=self.unread.get(state.id, 0),
            # A permission prompt, or (the manager) escalations waiting for the person.
            needs_you=state.status == "waiting" or (state.manager and bool(self.escalations)),
            paused=state.paused or state.halted,
            missing=state.missing,
        )

    def _agent_changed(self, state: AgentState) -> None:
        if state.id not in self.roster:
            return
        self.query_one(OfficeMap).update_agent(self.info(state))
        pane = self.pane(state.id)
        pane.border_title = self._title(state.id)
        pane.notice = state.missing

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
        if loaded.board is not None:
            self.query_one(BoardPanel).show(loaded.board)
        if loaded.ledger is not None:
            self.query_one(TasksPanel).show(loaded.ledger)
        if loaded.log:
            self.query_one(LogPanel).add_formatted(loaded.log)
        if loaded.inbox is not None:
            self.escalations = {m.id: m for m in loaded.inbox}
            self.query_one(InboxPanel).show(loaded.inbox)
        if loaded.unread:
            self.unread.update(loaded.unread)
        office_map = self.query_one(OfficeMap)
        manager = self.office.config.office.manager
        changed = set(loaded.unread) | ({manager} if loaded.inbox is not None else set())
        for agent_id in sorted(changed & set(self.roster)):
            office_map.update_agent(self.info(self.office.states[agent_id]))
            self.pane(agent_id).border_title = self._title(agent_id)

    def _output(self, agent_id: str, data: bytes) -> None:
        if agent_id in self.roster:
            self.pane(agent_id).feed(data)

    def _refresh_map(self) -> None:
        self.query_one(OfficeMap).set_agents(
            [self.info(self.office.states[a]) for a in self.roster]
        )
        for agent_id in self.roster:
            self.pane(agent_id).border_title = self._title(agent_id)

    def _memory_search(self, query: str) -> list[Hit]:
        """On a thread (the Memory tab's worker): SQLite never runs on the loop."""
        with open_store(self.office.paths) as store:
            return store.search(query, caller=HUMAN, scope="all", limit=MEMORY_RESULTS)

    # --- screen -> office -------------------------------------------------------------

    @on(TerminalPane.Input)
    def _typed(self, message: TerminalPane.Input) -> None:
        if message.by_person:
            # The Stop drain and the wake path stand back while the person types; the
            # terminal's own replies to the agent's queries are not typing.
            self.office.states[message.agent_id].typed()
        self.office.supervisor.write(message.agent_id, message.data)

    @on(TerminalPane.Resized)
    def _resized(self, message: TerminalPane.Resized) -> None:
        self.office.supervisor.resize(message.rows, message.cols, message.agent_id)

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
        try:
            await self.office.answer(message, text)
        except OSError as exc:
            self.notify(f"Your answer could not be written: {exc}", severity="error")
            return
        self.notify("Your answer is on its way to the manager.")

    @on(OfficeMap.AgentSelected)
    def _picked(self, message: OfficeMap.AgentSelected) -> None:
        self.focus_agent(message.agent_id)

    # --- focus and layouts ------------------------------------------------------------

    def pane(self, agent_id: str) -> TerminalPane:
        return self.query_one(f"#pane-{agent_id}", TerminalPane)

    def focus_agent(self, agent_id: str) -> None:
        if agent_id not in self.roster:
            return
        self.focused_agent = agent_id
        self._show_layout()
        self.pane(agent_id).focus()
        self.query_one(OfficeMap).select(agent_id)

    def action_focus_agent(self, n: int) -> None:
        if 1 <= n <= len(self.roster):
            self.focus_agent(self.roster[n - 1])

    def _show_layout(self) -> None:
        self.screen.set_class(self.layout_mode == "zoom", "zoom")
        self.screen.set_class(self.layout_mode == "grid", "grid")
        for agent_id in self.roster:
            self.pane(agent_id).display = (
                self.layout_mode == "grid" or agent_id == self.focused_agent
            )

    def action_prefix(self) -> None:
        if self.prefix_key.armed:
            self.prefix_key.armed = False
            self._send_prefix()
            return
        self.prefix_key.armed = True

    def _send_prefix(self) -> None:
        """The prefix twice sends the prefix key itself to the agent, as in tmux."""
        self.office.supervisor.write(self.focused_agent, encode_key(self.prefix, None) or b"")

    def on_key(self, event: Key) -> None:
        if not self.prefix_key.armed:
            return
        event.stop()
        event.prevent_default()
        self.prefix_key.armed = False
        if event.key == self.prefix:
            self._send_prefix()
        else:
            self.run_prefix_command(event.key, event.character)

    def run_prefix_command(self, key: str, character: str | None) -> None:
        char = character or key
        if char.isdigit() and char != "0":
            self.action_focus_agent(int(char))
            return
        command = next((cmd for k, (cmd, _) in PREFIX_COMMANDS.items() if k == char), None)
        if command is None:
            label = self.prefix_label
            self.notify(
                f"{label} {char}: no such command; {label} ? lists them.", severity="warning"
            )
            return
        step = {"next": 1, "prev": -1}
        if command in step:
            index = self.roster.index(self.focused_agent)
            self.focus_agent(self.roster[(index + step[command]) % len(self.roster)])
        elif command in ("zoom", "grid"):
            self.layout_mode = "default" if self.layout_mode == command else command
            self._show_layout()
            self.pane(self.focused_agent).focus()
        elif command.startswith("tab:"):
            if self.layout_mode == "zoom":
                self.layout_mode = "default"
                self._show_layout()
            self.query_one(TabbedContent).active = f"tab-{command[4:]}"
        elif command == "map":
            self.query_one(OfficeMap).focus()
        elif command == "send":
            self.push_screen(SendScreen(self.roster, self.focused_agent), self._send)
        elif command == "pause":
            state = self.office.states[self.focused_agent]
            self.office.set_paused(state.id, not state.paused)
            self.notify(f"{state.spec.name} is {'paused' if state.paused else 'resumed'}.")
        elif command == "halt":
            self.office.halt(self.focused_agent)
            self.notify(f"{self.focused_agent} stops at its next hook; x resumes it.")
        elif command == "spawn":
            self.run_worker(self.office.spawn(self.focused_agent))
        elif command == "archive":
            self.run_worker(self.office.archive(self.focused_agent))
            self.notify(f"{self.focused_agent} is archived; r brings it back.")
        elif command == "help":
            self.push_screen(HelpScreen(PREFIX_COMMANDS, self.prefix_label))
        elif command == "quit":
            self.run_worker(self.action_quit())

    def _send(self, draft: Draft | None) -> None:
        if draft is None:
            return
        self.run_worker(self._send_draft(draft))

    async def _send_draft(self, draft: Draft) -> None:
        try:
            # An atomic write ends in an fsync: not on the loop.
            await asyncio.to_thread(write_draft, self.office.paths.mailbox(HUMAN), draft)
        except OSError as exc:
            self.notify(f"Your message could not be written: {exc}", severity="error")
            return
        kick(self.office.paths, HUMAN)
        self.notify(f"Sent to {draft.to}.")

    def _title(self, agent_id: str) -> str:
        state = self.office.states[agent_id]
        n = self.roster.index(agent_id) + 1
        bits = [f"{n} {state.spec.name}", state.status]
        if state.paused:
            bits.append("paused")
        unread = self.unread.get(agent_id, 0)
        if state.mail_title:
            bits.append(f"✉ {state.mail_title}")  # a hookless agent: it cannot drain by itself
        elif unread:
            bits.append(f"✉ {unread}")
        return " · ".join(bits)


def textual_key(spec: str) -> str:
    """`ctrl+]` as Textual names it (`ctrl+right_square_bracket`)."""
    *mods, last = spec.strip().lower().split("+") if spec.strip() != "+" else ["+"]
    name = _character_to_key(last) if len(last) == 1 else last
    return "+".join([*mods, name])
