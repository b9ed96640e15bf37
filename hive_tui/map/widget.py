"""OfficeMap: the floor plan with an avatar per agent, drawn with the Line API.

Each line is built once and cached; a change repaints only the lines it touches, and the
only timer runs while an envelope is in flight, so an idle office costs no CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from hive_tui.map.floor import (
    DESK_GLYPH,
    Area,
    FloorPlan,
    Point,
    Spot,
    Station,
    agent_colour,
    initial,
    path_between,
    plan_floor,
    station_for,
)
from hive_tui.messages import AgentInfo

FPS = 18
FLIGHT_SECONDS = 1.0
ENVELOPE = "✉"

WALL = Style(color="#6c6c6c")
TITLE = Style(color="#d0d0d0", bold=True)
PROP = Style(color="#8a8a8a")
GREY = "#585858"
ENVELOPE_STYLE = Style(color="#ffff5f", bold=True)
NEEDS_YOU = Style(color="#ffffff", bgcolor="#d70000", bold=True)

# What the desk shows while its owner sits there.
DESK_PROPS = {"typing": "✎", "running": "$", "disconnected": "⌁"}

_Paint = Callable[[int, str, Style], None]  # write text at x on the line being built


def badges(info: AgentInfo) -> str:
    """Needs-you first: it is the one the person must not miss when space runs out."""
    marks = []
    if info.needs_you:
        marks.append("!")
    if info.missing:
        marks.append("?")
    if info.paused:
        marks.append("‖")
    if info.overlap:  # its branch and another's touch one file: a merge may conflict
        marks.append("⚠")
    if info.uncontained:  # its processes may reach other desks' files (`why` says why)
        marks.append("○")
    if info.unread:
        marks.append(f"✉{info.unread}")
    return "".join(marks)


def fit(name: str, room: int) -> str:
    """`name` in `room` cells; a cut name ends in `…`, so it never reads as a shorter one."""
    if len(name) <= room:
        return name
    return name[: room - 1] + "…" if room > 1 else ""


@dataclass
class _Flight:
    path: list[Point]
    started: float
    cell: Point

    def cell_at(self, now: float) -> Point:
        progress = min(1.0, (now - self.started) / FLIGHT_SECONDS)
        return self.path[round(progress * (len(self.path) - 1))]


class OfficeMap(Widget, can_focus=True):
    """The office floor. Feed it with `set_agents` / `update_agent`; it posts `AgentSelected`."""

    DEFAULT_CSS = """
    OfficeMap { width: 1fr; height: 1fr; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(-1, 0)", "Left", show=False),
        Binding("right", "move(1, 0)", "Right", show=False),
        Binding("up", "move(0, -1)", "Up", show=False),
        Binding("down", "move(0, 1)", "Down", show=False),
        Binding("tab", "cycle(1)", "Next agent", show=False),
        Binding("shift+tab", "cycle(-1)", "Previous agent", show=False),
        Binding("enter", "choose", "Open agent", show=False),
        Binding("w", "why", "Why is it so", show=False),
    ]

    class AgentSelected(Message):
        """The person picked an avatar (Enter or a click)."""

        def __init__(self, agent_id: str) -> None:
            super().__init__()
            self.agent_id = agent_id

    class WhyAsked(Message):
        """The person asked why the selected agent is shown as it is (w)."""

        def __init__(self, agent_id: str) -> None:
            super().__init__()
            self.agent_id = agent_id

    def __init__(
        self,
        agents: Iterable[AgentInfo] = (),
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._agents: dict[str, AgentInfo] = {a.id: a for a in agents}
        self._plan: FloorPlan | None = None
        self._planned_size: Size | None = None  # the widget's size `_plan` was made for
        self._lines: dict[int, Strip] = {}
        self._selected: str | None = None
        self._flights: list[_Flight] = []
        self._timer: Timer | None = None

    # -- feeding -------------------------------------------------------------------------

    @property
    def plan(self) -> FloorPlan | None:
        return self._plan

    @property
    def selected(self) -> str | None:
        return self._selected

    @property
    def animating(self) -> bool:
        return self._timer is not None

    def set_agents(self, agents: Iterable[AgentInfo]) -> None:
        """The whole roster; archived agents leave the floor. Re-plans only if the roster changed."""
        fresh = {a.id: a for a in agents if a.status != "archived"}
        roster = [(a.id, a.name, a.manager) for a in fresh.values()]
        changed = roster != [(a.id, a.name, a.manager) for a in self._agents.values()]
        self._agents = fresh
        if self._selected not in fresh:
            self._selected = None
        if changed:
            self._replan()
        else:
            self._invalidate_all()

    def update_agent(self, info: AgentInfo) -> None:
        old = self._agents.get(info.id)
        if old is None or (old.name, old.manager) != (info.name, info.manager):
            self.set_agents([*(a for a in self._agents.values() if a.id != info.id), info])
            return
        if info.status == "archived":
            self.set_agents(a for a in self._agents.values() if a.id != info.id)
            return
        rows = self._rows_of(old)
        self._agents[info.id] = info
        self._invalidate(rows | self._rows_of(info))

    def select(self, agent_id: str | None) -> None:
        if agent_id is not None and agent_id not in self._agents:
            return
        before, self._selected = self._selected, agent_id
        rows: set[int] = set()
        for aid in (before, agent_id):
            if aid is not None:
                rows |= self._rows_of(self._agents[aid])
        self._invalidate(rows)

    def send_envelope(self, from_id: str, to_id: str) -> None:
        """Animate a message from the sender's avatar to the recipient's."""
        if self._plan is None:
            return
        at = {aid: pos for aid in self._agents if (pos := self.position(aid)) is not None}
        path = path_between(self._plan, from_id, to_id, at)
        if not path:
            return
        self._flights.append(_Flight(path, time.monotonic(), path[0]))
        self._invalidate({path[0][1]})
        if self._timer is None:
            self._timer = self.set_interval(1 / FPS, self._tick)

    # -- geometry ------------------------------------------------------------------------

    def station(self, agent_id: str) -> Station:
        return station_for(self._agents[agent_id])

    def spot_of(self, agent_id: str) -> Spot | None:
        """Where the avatar stands now."""
        if self._plan is None or agent_id not in self._agents:
            return None
        return self._plan.spot(agent_id, self.station(agent_id).place)

    def position(self, agent_id: str) -> Point | None:
        spot = self.spot_of(agent_id)
        return spot.point if spot else None

    def _rows_of(self, info: AgentInfo) -> set[int]:
        """Lines that show this agent: where it stands and its desk."""
        if self._plan is None:
            return set()
        spots = (
            self._plan.spot(info.id, station_for(info).place),
            self._plan.spot(info.id, Area.DESK),
        )
        return {s.y for s in spots if s is not None}

    def _replan(self) -> None:
        self._plan_floor()
        self.refresh()

    def _plan_floor(self) -> None:
        width, height = self._planned_size = self.size
        self._plan = plan_floor(list(self._agents.values()), width, height)
        # Flights were routed on the old floor.
        self._flights.clear()
        self._stop_timer()
        self._lines.clear()

    def on_resize(self, event: events.Resize) -> None:
        if self.size != self._planned_size:  # not already planned by the frame drawn
            self._replan()

    def on_unmount(self) -> None:
        self._stop_timer()

    # -- animation -----------------------------------------------------------------------

    def _tick(self) -> None:
        now = time.monotonic()
        rows: set[int] = set()
        flying = []
        for flight in self._flights:
            cell = flight.cell_at(now)
            if cell != flight.cell:
                rows |= {flight.cell[1], cell[1]}
                flight.cell = cell
            if now - flight.started < FLIGHT_SECONDS:
                flying.append(flight)
            else:
                rows.add(cell[1])
        self._flights = flying
        if not flying:
            self._stop_timer()
        self._invalidate(rows)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    # -- painting ------------------------------------------------------------------------

    def _invalidate_all(self) -> None:
        self._lines.clear()
        self.refresh()

    def _invalidate(self, rows: Iterable[int]) -> None:
        width = self.size.width
        for y in rows:
            self._lines.pop(y, None)
            self.refresh(Region(0, y, width, 1))

    def render_line(self, y: int) -> Strip:
        # The first frame draws this widget before it hears its size (its Resize comes
        # after): planned here, the floor and its names are in that frame, not the next.
        if self.size != self._planned_size:
            self._plan_floor()
        strip = self._lines.get(y)
        if strip is None:
            strip = self._lines[y] = self._build_line(y)
        return strip

    def _build_line(self, y: int) -> Strip:
        base = self.rich_style
        plan = self._plan
        width = self.size.width
        if plan is None or y >= plan.height:
            return Strip.blank(width, base)
        chars = list(plan.background[y])
        styles = [WALL if ch != " " else Style() for ch in chars]
        for text in plan.texts:
            if text.y == y:
                style = TITLE if text.kind == "title" else PROP
                styles[text.x : text.x + len(text.text)] = [style] * len(text.text)

        def paint(x: int, text: str, style: Style) -> None:
            for i, ch in enumerate(text[: max(0, plan.width - x)]):
                chars[x + i] = ch
                styles[x + i] = style

        for index, info in enumerate(self._agents.values()):
            self._paint_agent(index, info, y, paint)
        for flight in self._flights:
            if flight.cell[1] == y:
                paint(flight.cell[0], ENVELOPE, ENVELOPE_STYLE)

        segments = []
        start = 0
        for x in range(1, len(chars) + 1):
            if x == len(chars) or styles[x] is not styles[start]:
                segments.append(Segment("".join(chars[start:x]), base + styles[start]))
                start = x
        return Strip(segments, plan.width).adjust_cell_length(width, base)

    def _paint_agent(self, index: int, info: AgentInfo, y: int, paint: _Paint) -> None:
        plan = self._plan
        assert plan is not None
        station = station_for(info)
        colour = GREY if station.greyed else agent_colour(index)
        here = plan.spot(info.id, station.place)
        desk = plan.spot(info.id, Area.DESK)
        seated = here is not None and here == desk and not plan.listing

        desk_cell = plan.desk_cells.get(info.id)
        if desk_cell is not None and desk_cell[1] == y:
            glyph = DESK_PROPS.get(station.activity, DESK_GLYPH) if seated else DESK_GLYPH
            paint(desk_cell[0], glyph, Style(color=colour, dim=not seated))
        if desk is not None and desk.y == y and not seated and desk.width > 2:
            paint(desk.x + 2, info.name[: desk.width - 2], Style(color=colour, dim=True))
        if here is None or here.y != y:
            return

        selected = info.id == self._selected
        face = Style(color="#000000", bgcolor=colour, bold=True, underline=selected)
        if info.needs_you and here.width < 3:
            face = NEEDS_YOU + Style(underline=selected)
        paint(here.x, initial(info), face)
        marks = badges(info)
        if here.width == 2:
            paint(
                here.x + 1, marks[:1] or " ", NEEDS_YOU if info.needs_you else Style(color=colour)
            )
        elif here.width >= 3:
            room = here.width - 2
            word = f" {station.activity}" if plan.listing else ""
            name = fit(info.name + word, room - len(marks) - (1 if marks else 0))
            label_style = Style(color=colour, reverse=selected, dim=station.greyed)
            # The desk's nameplate lies under a seated avatar's label: cleared first, so a
            # shortened name does not show the plate's tail against the marks.
            paint(here.x + 2, " " * room, Style())
            paint(here.x + 2, name, label_style)
            if marks:
                at = here.x + 2 + len(name) + (1 if name else 0)
                paint(
                    at,
                    marks[: room - (at - here.x - 2)],
                    NEEDS_YOU if info.needs_you else label_style,
                )

    # -- selection -----------------------------------------------------------------------

    def _ordered(self) -> list[str]:
        return [aid for aid in self._agents if self.position(aid) is not None]

    def action_cycle(self, step: int) -> None:
        ids = self._ordered()
        if not ids:
            return
        at = ids.index(self._selected) if self._selected in ids else (-1 if step > 0 else 0)
        self.select(ids[(at + step) % len(ids)])

    def action_move(self, dx: int, dy: int) -> None:
        """Select the nearest avatar in that direction (the first one when none is selected)."""
        here = self.position(self._selected) if self._selected else None
        if here is None:
            self.action_cycle(1 if dx + dy > 0 else -1)
            return
        best: tuple[int, str] | None = None
        for aid in self._ordered():
            pos = self.position(aid)
            if aid == self._selected or pos is None:
                continue
            ahead = (pos[0] - here[0]) * dx + (pos[1] - here[1]) * dy
            aside = abs((pos[0] - here[0]) * dy) + abs((pos[1] - here[1]) * dx)
            # Rows are about twice as far apart on screen as columns.
            ahead *= 2 if dy else 1
            aside *= 2 if dx else 1
            if ahead > 0 and (best is None or ahead + 2 * aside < best[0]):
                best = (ahead + 2 * aside, aid)
        if best is not None:
            self.select(best[1])

    def action_choose(self) -> None:
        if self._selected is not None:
            self.post_message(self.AgentSelected(self._selected))

    def action_why(self) -> None:
        if self._selected is not None:
            self.post_message(self.WhyAsked(self._selected))

    def agent_at(self, x: int, y: int) -> str | None:
        """The agent whose avatar (or, failing that, desk) covers this cell."""
        if self._plan is None:
            return None
        plan = self._plan
        for where in (self.spot_of, lambda aid: plan.spot(aid, Area.DESK)):
            for aid in self._agents:
                spot = where(aid)
                if spot is not None and spot.y == y and spot.x <= x < spot.x + spot.width:
                    return aid
        return None

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        aid = self.agent_at(offset.x, offset.y)
        if aid is not None:
            self.select(aid)
            self.post_message(self.AgentSelected(aid))
