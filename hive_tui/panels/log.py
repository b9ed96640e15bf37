"""The Log tab: the office's activity stream (log.jsonl), newest first, by agent.

A Line-API list over a bounded buffer: thousands of events cost one Strip per visible
row, and each event's row is formatted once (by the CLI's `hive log` formatter, so the
app and the CLI read alike) and cached.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import ClassVar, NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from hive_core.render import clean, log_event
from hive_core.schema import HUMAN, ROUTER, SPECIAL_RECIPIENTS, LogEvent

MAX_EVENTS = 5_000
# The kind column ("route", "agent", "office"): the longer kinds (quarantine) push on.
KIND_WIDTH = 6
# Where a wrapped event's next lines start: under its kind, past the time (hh:mm:ss).
HANG = 9
# Narrower than this, the panel wraps as if it were this wide (the rest is cut).
MIN_WIDTH = 20
# A reason or detail in full up to this (the CLI's one-line form cuts it at 100).
DETAIL_MAX = 2_000
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
    line = clean(log_event(event, DETAIL_MAX))
    # log_event starts with the 19-character time, two spaces, the kind padded to 10.
    time_end = len(event.ts[:19])
    kind_end = time_end + 2 + max(len(event.kind), 10)
    kind_role = "bad" if event.kind in _BAD_KINDS else "kind"
    return [
        (line[:time_end], "time"),
        (line[time_end:kind_end].strip(), kind_role),
        (line[kind_end:].strip(), ""),
    ]


def row_lines(runs: list[Run], width: int, today: str) -> list[list[Run]]:
    """An event's row as the panel shows it in `width` cells: the time (the date only if
    not `today`), the kind, then the text wrapped at spaces; the lines after the first
    hang under the kind, so the times stay a column to read down."""
    (stamp, _), (kind, kind_role), (text, _) = runs
    date, _, clock = stamp.partition(" ")
    when = clock if date == today else f"{date[5:]} {clock[:5]}"
    head: list[Run] = [(when, "time"), (" ", ""), (kind.ljust(KIND_WIDTH), kind_role), (" ", "")]
    room = width - sum(cell_len(t) for t, _ in head)
    # In a narrow panel a hang under the kind leaves too little room: two cells then.
    hang = HANG if width >= 2 * HANG + 20 else 2
    lines: list[list[Run]] = []
    flat = text.replace("\n", " ").replace("\t", " ")
    for chunk in wrap(flat, room, width - hang):
        lines.append([*head, (chunk, "")] if not lines else [(" " * hang, ""), (chunk, "")])
    return lines or [head]


def wrap(text: str, first: int, rest: int) -> list[str]:
    """`text` in lines of at most `first` cells, then `rest`, broken at spaces. A word
    that does not fit the first line's room but fits a whole line starts the next one
    (the first line then has none of the text); a word longer than a line is cut."""
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        room = max(1, rest if lines else first)
        joined = f"{line} {word}" if line else word
        if cell_len(joined) <= room:
            line = joined
            continue
        if line or cell_len(word) <= max(1, rest):
            lines.append(line)
            line = ""
            room = max(1, rest)
        while cell_len(word) > room:
            cut = _fit(word, room)
            lines.append(word[:cut])
            word = word[cut:]
            room = max(1, rest)
        line = word
    if line or not lines:
        lines.append(line)
    return lines


def _fit(word: str, room: int) -> int:
    """How many characters of `word` fit in `room` cells (at least one)."""
    used = 0
    for i, ch in enumerate(word):
        used += cell_len(ch)
        if used > room:
            return max(1, i)
    return len(word)


def next_filter(current: str | None, agents: list[str], step: int) -> str | None:
    """The filter after `current` when cycling through all agents (None) and each agent."""
    choices: list[str | None] = [None, *agents]
    position = choices.index(current) if current in choices else 0
    return choices[(position + step) % len(choices)]


class LogLines(ScrollView, can_focus=True):
    """The event rows, each wrapped to the width; scrolled with up/down, pageup/pagedown,
    home (newest) and end."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"log--time", "log--kind", "log--bad", "log--empty"}

    DEFAULT_CSS = """
    LogLines { scrollbar-gutter: stable; overflow-x: hidden; padding: 0 1; }
    LogLines > .log--time { color: $text-muted; }
    LogLines > .log--kind { color: $accent; }
    LogLines > .log--bad { color: $error; text-style: bold; }
    LogLines > .log--empty { color: $text-muted; text-style: italic; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[LogRow] = []  # newest first
        self.empty_text = EMPTY_LOG
        # Each row's lines at `_wrapped_at` (width, today), by sequence: a new event costs
        # its own wrap, a resize (or midnight) every row's once.
        self._wrapped: dict[int, list[Strip]] = {}
        self._wrapped_at: tuple[int, str] = (0, "")
        # Screen line -> (index in rows, line of that row).
        self._index: list[tuple[int, int]] = []
        self._styles: dict[str, Style] = {}
        # Rows set while the tab is hidden: wrapped and indexed once it shows (`on_show`),
        # not a burst's thousands of events on the loop while nobody reads them; and
        # how many of them came on top, for a reader's place.
        self._unshown = False
        self._added_unshown = 0

    def set_rows(self, rows: list[LogRow], *, added_on_top: int = 0) -> None:
        """Show `rows`; a reader scrolled down stays on the events they were reading.
        Hidden (another tab is picked), they are wrapped when the tab shows again."""
        self.rows = rows
        if not self._displayed():
            self._unshown = True
            self._added_unshown += added_on_top
            return
        self._show_rows(added_on_top)

    def _displayed(self) -> bool:
        return self.is_mounted and all(node.display for node in self.ancestors_with_self)

    def _show_rows(self, added_on_top: int) -> None:
        keep_place = added_on_top and round(self.scroll_y) > 0
        self._unshown, self._added_unshown = False, 0
        self._reindex()
        if keep_place:
            pushed = sum(len(self._lines_of(row)) for row in self.rows[:added_on_top])
            self.scroll_to(y=self.scroll_y + pushed, animate=False, immediate=True)
        self.refresh()

    def on_show(self) -> None:
        if self._unshown:
            self._show_rows(min(self._added_unshown, len(self.rows)))

    def row_at(self, y: int) -> LogEvent | None:
        """The event drawn on line `y` of the view."""
        line = round(self.scroll_y) + y
        return self.rows[self._index[line][0]].event if 0 <= line < len(self._index) else None

    def _reindex(self) -> None:
        width = self.scrollable_content_region.width
        at = (width, datetime.now(UTC).date().isoformat())
        if at != self._wrapped_at:
            self._wrapped.clear()
            self._wrapped_at = at
        keep = {row.sequence for row in self.rows}
        for sequence in self._wrapped.keys() - keep:
            del self._wrapped[sequence]  # evicted from the buffer, or filtered out
        self._index = [
            (i, k) for i, row in enumerate(self.rows) for k in range(len(self._lines_of(row)))
        ]
        self.virtual_size = Size(width, len(self._index))

    def _lines_of(self, row: LogRow) -> list[Strip]:
        strips = self._wrapped.get(row.sequence)
        if strips is None:
            width, today = self._wrapped_at
            strips = [
                Strip(Segment(text, self._style(role)) for text, role in line)
                for line in row_lines(row.runs, max(width, MIN_WIDTH), today)
            ]
            self._wrapped[row.sequence] = strips
        return strips

    def on_resize(self) -> None:
        self._reindex()
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._wrapped.clear()

    def _style(self, role: str) -> Style:
        style = self._styles.get(role)
        if style is None:
            style = self.get_component_rich_style(f"log--{role}") if role else self.rich_style
            self._styles[role] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        line = round(self.scroll_y) + y
        plain = self._style("")
        if not self.rows:
            if y == 0:
                empty = Strip([Segment(self.empty_text, self._style("empty"))])
                return empty.crop_extend(0, width, plain)
            return Strip.blank(width, plain)
        if line >= len(self._index):
            return Strip.blank(width, plain)
        i, k = self._index[line]
        return self._lines_of(self.rows[i])[k].crop_extend(0, width, plain)


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
        lines.set_rows(rows, added_on_top=added_on_top)
        self.query_one("#log-status", Static).update(self._status())

    def on_mount(self) -> None:
        self._refresh()

    def focus_target(self) -> Widget:
        """What takes the keys when the panel is picked: the lines (arrows scroll them)."""
        return self.query_one(LogLines)
