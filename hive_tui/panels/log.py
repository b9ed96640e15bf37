"""The Log tab: the office's activity stream (log.jsonl), newest first, by agent.

A Line-API list over a bounded buffer: thousands of events cost one Strip per visible
row, and each event's row is formatted once (by the CLI's `hive log` formatter, so the
app and the CLI read alike) and cached.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import ClassVar, NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from hive_core.cli.render import clean, log_event
from hive_core.schema import HUMAN, ROUTER, SPECIAL_RECIPIENTS, LogEvent

MAX_EVENTS = 5_000
EMPTY_LOG = "Nothing has happened yet: routed messages, hooks and tasks show up here."

# Addresses that appear in the log but are not someone the person would filter by.
_NOT_AGENTS = (SPECIAL_RECIPIENTS - {HUMAN}) | {ROUTER}
_BAD_KINDS = frozenset({"bounce", "quarantine", "loop"})

Run = tuple[str, str]


class LogRow(NamedTuple):
    """An event with its formatted line; `sequence` numbers events in arrival order."""

    sequence: int
    event: LogEvent
    runs: list[Run]


def involves(event: LogEvent, agent: str) -> bool:
    """Whether `agent` sent, received or is the subject of `event`."""
    return agent in (event.sender, event.to, event.agent) or agent in event.recipients


def agents_in(events: Iterable[LogEvent]) -> list[str]:
    """Everyone the events involve, sorted: the choices of the agent filter."""
    seen: set[str] = set()
    for event in events:
        seen.update(x for x in (event.sender, event.to, event.agent) if x)
        seen.update(event.recipients)
    return sorted(seen - _NOT_AGENTS)


def log_runs(event: LogEvent) -> list[Run]:
    """`hive log`'s line for `event`, split into time, kind and the rest for styling."""
    line = clean(log_event(event))
    # log_event starts with the 19-character time, two spaces, the kind padded to 10.
    time_end = len(event.ts[:19])
    kind_end = time_end + 2 + max(len(event.kind), 10)
    kind_role = "bad" if event.kind in _BAD_KINDS else "kind"
    return [(line[:time_end], "time"), (line[time_end:kind_end], kind_role), (line[kind_end:], "")]


def next_filter(current: str | None, agents: list[str], step: int) -> str | None:
    """The filter after `current` when cycling through all agents (None) and each agent."""
    choices: list[str | None] = [None, *agents]
    position = choices.index(current) if current in choices else 0
    return choices[(position + step) % len(choices)]


class LogLines(ScrollView, can_focus=True):
    """The event rows; scrolled with up/down, pageup/pagedown, home (newest) and end."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"log--time", "log--kind", "log--bad", "log--empty"}

    DEFAULT_CSS = """
    LogLines { scrollbar-gutter: stable; padding: 0 1; }
    LogLines > .log--time { color: $text-muted; }
    LogLines > .log--kind { color: $accent; }
    LogLines > .log--bad { color: $error; text-style: bold; }
    LogLines > .log--empty { color: $text-muted; text-style: italic; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[LogRow] = []  # newest first
        self.empty_text = EMPTY_LOG
        self._strips: LRUCache[int, Strip] = LRUCache(1024)
        self._styles: dict[str, Style] = {}

    def set_rows(self, rows: list[LogRow], width: int, *, added_on_top: int = 0) -> None:
        """Show `rows` (`width`: the widest, in cells); a reader scrolled down stays on the
        events they were reading."""
        keep_place = added_on_top and round(self.scroll_y) > 0
        self.rows = rows
        self.virtual_size = Size(width, len(rows))
        if keep_place:
            self.scroll_to(y=self.scroll_y + added_on_top, animate=False, immediate=True)
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()

    def _style(self, role: str) -> Style:
        style = self._styles.get(role)
        if style is None:
            style = self.get_component_rich_style(f"log--{role}") if role else self.rich_style
            self._styles[role] = style
        return style

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        row = scroll_y + y
        plain = self._style("")
        if not self.rows:
            if y == 0:
                empty = Strip([Segment(self.empty_text, self._style("empty"))])
                return empty.crop_extend(0, width, plain)
            return Strip.blank(width, plain)
        if row >= len(self.rows):
            return Strip.blank(width, plain)
        sequence, _, runs = self.rows[row]
        strip = self._strips.get(sequence)
        if strip is None:
            strip = Strip(Segment(text, self._style(role)) for text, role in runs)
            self._strips[sequence] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, plain)


class LogPanel(Vertical):
    """The activity stream, newest on top, optionally for one agent.

    Keys: `f` shows the next agent's events, `F` the previous one's; cycling past the
    last agent shows everyone again. The agents are those in the buffered events. The
    first line says what is shown. The app feeds events with `add`; the panel keeps
    the newest MAX_EVENTS.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "cycle_filter(1)", "Next agent"),
        Binding("F", "cycle_filter(-1)", "Previous agent"),
    ]

    DEFAULT_CSS = """
    LogPanel > #log-status { height: 1; color: $text-muted; padding: 0 1; }
    LogPanel > LogLines { height: 1fr; }
    """

    def __init__(self, *, max_events: int = MAX_EVENTS, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: deque[LogRow] = deque(maxlen=max_events)
        self._sequence = 0
        # The widest line seen (cells): the horizontal scroll range. It never shrinks,
        # which costs a little blank scroll room and saves rescanning the buffer.
        self._width = 0
        self._filter: str | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._status(), id="log-status", markup=False)
        yield LogLines(id="log-lines")

    @property
    def filter(self) -> str | None:
        return self._filter

    @property
    def shown(self) -> list[LogEvent]:
        """The events on screen, newest first."""
        return [row.event for row in self.query_one(LogLines).rows]

    def add(self, events: list[LogEvent]) -> None:
        """Append events (oldest first, as in log.jsonl); they show on top."""
        self.add_formatted([(event, log_runs(event)) for event in events])

    def add_formatted(self, formatted: list[tuple[LogEvent, list[Run]]]) -> None:
        """`add`, with each line already made by `log_runs` (off the loop: a routing
        burst is thousands of lines)."""
        if not formatted:
            return
        events = [event for event, _ in formatted]
        for event, runs in formatted:
            self._width = max(self._width, sum(cell_len(text) for text, _ in runs))
            self._rows.append(LogRow(self._sequence, event, runs))
            self._sequence += 1
        if self.is_mounted:
            self._refresh(added_on_top=sum(map(self._matches, events)))

    def set_filter(self, agent_id: str | None) -> None:
        """Show only events involving `agent_id` (None: everyone's)."""
        self._filter = agent_id
        if self.is_mounted:
            self._refresh()

    def action_cycle_filter(self, step: int) -> None:
        agents = agents_in(row.event for row in self._rows)
        self.set_filter(next_filter(self._filter, agents, step))

    def _matches(self, event: LogEvent) -> bool:
        return self._filter is None or involves(event, self._filter)

    def _status(self) -> str:
        who = f"agent {clean(self._filter)}" if self._filter else "all agents"
        return f"Log: {who}, newest first (f/F: change agent)"

    def _refresh(self, *, added_on_top: int = 0) -> None:
        rows = [row for row in reversed(self._rows) if self._matches(row.event)]
        lines = self.query_one(LogLines)
        lines.empty_text = (
            f"No events involving {clean(self._filter)} yet (f/F: another agent)."
            if self._filter
            else EMPTY_LOG
        )
        lines.set_rows(rows, self._width, added_on_top=added_on_top)
        self.query_one("#log-status", Static).update(self._status())

    def on_mount(self) -> None:
        self._refresh()

    def focus_target(self) -> Widget:
        """What takes the keys when the panel is picked: the lines (arrows scroll them)."""
        return self.query_one(LogLines)
