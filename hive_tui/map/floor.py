"""The office floor as plain data: where rooms, desks and stations are, and where an agent stands.

Pure functions over `AgentInfo` (no Textual), so the layout is tested cell by cell.

The floor is one box: a band of rooms along the top (the manager's office, the conference
room with the board, the library, the kitchen) above an open-plan area with one desk per
worker. Every agent owns a spot in every shared room, so avatars never collide and nothing
is allocated while the office runs. `plan_floor` tries layouts from roomy (name labels
everywhere) to compact (coloured initials, desks as single cells) and falls back to one
line per agent when even that does not fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from hive_core.events.policy import BOARD_VERBS, WEB_TOOLS
from hive_tui.messages import AgentInfo

Point = tuple[int, int]


class Area(StrEnum):
    DESK = "desk"  # the agent's own desk (the manager's is in the manager's office)
    LIBRARY = "library"
    KITCHEN = "kitchen"
    BOARD = "board"  # the conference room, where the board hangs


Activity = Literal[
    "typing",
    "running",
    "reading",
    "browsing",
    "board",
    "thinking",
    "waiting",
    "idle",
    "exited",
    "missing",
    "disconnected",
]


@dataclass(frozen=True)
class Station:
    """Where an avatar stands and what it is doing there."""

    place: Area
    activity: Activity
    greyed: bool = False  # the agent is not running: draw it faded


@dataclass(frozen=True)
class Spot:
    """Cells reserved for one avatar: its initial at (x, y), then label and badges up to width."""

    x: int
    y: int
    width: int

    @property
    def point(self) -> Point:
        return (self.x, self.y)


@dataclass(frozen=True)
class Room:
    name: str
    x: int  # the room's box, walls included
    y: int
    width: int
    height: int
    door: Point  # a gap in the wall onto the open plan
    outside: Point  # the corridor cell just outside the door

    def contains(self, point: Point) -> bool:
        x, y = point
        return self.x < x < self.x + self.width - 1 and self.y < y < self.y + self.height - 1


TextKind = Literal["title", "nameplate", "prop"]


@dataclass(frozen=True)
class Text:
    """A piece of text in the background, so the widget can style it and tests can find it."""

    x: int
    y: int
    text: str
    kind: TextKind


@dataclass(frozen=True)
class FloorPlan:
    width: int
    height: int
    background: tuple[str, ...]  # exactly `height` strings of exactly `width` cells
    spots: Mapping[Area, Mapping[str, Spot]]  # place -> agent id -> that agent's spot there
    desk_cells: Mapping[str, Point]  # the desk beside each seat: shows what its owner does there
    texts: tuple[Text, ...]
    rooms: tuple[Room, ...]
    corridor_y: int  # the open-plan row messages travel along
    manager_id: str | None
    listing: bool  # one line per agent: nobody moves, so the label has to name the place

    def spot(self, agent_id: str, place: Area) -> Spot | None:
        return self.spots[place].get(agent_id)


EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
SHELL_TOOLS = frozenset({"Bash", "BashOutput", "KillShell"})
READ_TOOLS = frozenset({"Read", "Grep", "Glob", "LS", "NotebookRead"})


def station_for(info: AgentInfo) -> Station:
    """Map status and last tool to a station.

    A `hive board` / `hive task` call is recorded as that verb (events.policy's
    tool_activity), which sends the avatar to the conference room.

    The manager works like everyone else but is never sent to the kitchen: when idle it
    stays in its office, where the person looks for it first.
    """
    if info.missing:
        return Station(Area.DESK, "missing", greyed=True)
    if info.status in ("exited", "archived"):
        return Station(Area.DESK, "exited", greyed=True)
    if info.status == "disconnected":  # a remote desk whose ssh link is down
        return Station(Area.DESK, "disconnected", greyed=True)
    if info.status == "waiting":
        return Station(Area.DESK, "waiting")
    if info.status in ("idle", "offline"):
        return Station(Area.DESK if info.manager else Area.KITCHEN, "idle")
    if info.status == "running":  # a hookless CLI: its process runs, nothing says more
        return Station(Area.DESK, "running")
    tool = info.last_tool or ""
    if tool in EDIT_TOOLS:
        return Station(Area.DESK, "typing")
    if tool in SHELL_TOOLS:
        return Station(Area.DESK, "running")
    if tool in READ_TOOLS:
        return Station(Area.LIBRARY, "reading")
    if tool in WEB_TOOLS:
        return Station(Area.LIBRARY, "browsing")
    if tool in BOARD_VERBS:
        return Station(Area.BOARD, "board")
    return Station(Area.DESK, "thinking")


# Colours of the xterm 256-colour cube, so tmux's 256-colour mode shows exactly what a
# truecolor terminal shows; all light enough for black initials and readable on black.
PALETTE = (
    "#5fafff",
    "#ff875f",
    "#87d75f",
    "#d787ff",
    "#ffd75f",
    "#5fd7d7",
    "#ff87af",
    "#afaf5f",
    "#8787ff",
    "#ffaf00",
    "#00d787",
    "#d7af87",
    "#ff5f5f",
    "#afd7ff",
    "#d75fd7",
    "#87af87",
)


def agent_colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def initial(info: AgentInfo) -> str:
    for ch in info.name or info.id:
        if ch.isalnum():
            return ch.upper()
    return "?"


@dataclass(frozen=True)
class _Tier:
    name_w: int  # nameplate characters at a desk (0: the desk is a single cell)
    spot_w: int  # cells per avatar in a shared room (1: the initial alone)
    gap: int  # cells between neighbours
    pad: int  # cells between a wall and what stands inside
    props: bool  # draw the board, the shelves and the counter


# Most generous first; the first that fits wins.
_TIERS = (
    _Tier(name_w=10, spot_w=12, gap=2, pad=1, props=True),
    _Tier(name_w=8, spot_w=8, gap=1, pad=1, props=True),
    _Tier(name_w=8, spot_w=2, gap=1, pad=1, props=True),
    _Tier(name_w=6, spot_w=2, gap=1, pad=1, props=True),
    _Tier(name_w=4, spot_w=2, gap=0, pad=1, props=False),
    _Tier(name_w=4, spot_w=1, gap=0, pad=0, props=False),
    _Tier(name_w=0, spot_w=1, gap=0, pad=0, props=False),
)

# Shared rooms left to right; each title with shorter forms for narrow rooms.
_ROOMS: tuple[tuple[Area, tuple[str, ...], str], ...] = (
    (Area.BOARD, ("Conference", "Board", "B"), "▒"),
    (Area.LIBRARY, ("Library", "Lib", "L"), "≡"),
    (Area.KITCHEN, ("Kitchen", "Kit", "K"), "▬"),
)
_MANAGER_TITLES = ("Manager", "Mgr", "M")
DESK_GLYPH = "▐"


def plan_floor(agents: Sequence[AgentInfo], width: int, height: int) -> FloorPlan:
    # A second band of rooms below the desks uses tall terminals; one band suits wide ones.
    for tier in _TIERS:
        for two_bands in (True, False):
            plan = _floor(agents, width, height, tier, two_bands)
            if plan is not None:
                return plan
    return _listing(agents, width, height)


def _manager(agents: Sequence[AgentInfo]) -> AgentInfo | None:
    return next((a for a in agents if a.manager), None)


# A room kind: its place (None: the manager's office), titles, prop.
_Kind = tuple[Area | None, tuple[str, ...], str]
_OFFICE: _Kind = (None, _MANAGER_TITLES, "")


def _floor(
    agents: Sequence[AgentInfo], width: int, height: int, tier: _Tier, two_bands: bool
) -> FloorPlan | None:
    manager = _manager(agents)
    workers = [a for a in agents if a is not manager]
    n = len(agents)
    seat_w = 1 if tier.name_w == 0 else 2 + tier.name_w
    desk_w = 1 + seat_w
    prop_w = 2 if tier.props else 0

    def per_row(interior: int) -> int:
        usable = interior - 2 * tier.pad - prop_w
        return max(0, (usable + tier.gap) // (tier.spot_w + tier.gap))

    def walls_x(count: int, office: bool) -> list[int] | None:
        """x of every wall in a band of `count` rooms, the manager's office first if `office`."""
        need = 2 * tier.pad + desk_w
        for first in (max(need, len(_MANAGER_TITLES[0]) + 2), need) if office else (None,):
            shared = count - 1 if office else count
            left = 1 + first if first is not None else 0
            base, extra = divmod(width - left - 1 - shared, shared)
            widths = [base + (1 if i < extra else 0) for i in range(shared)]
            if min(widths) >= 3 and all(per_row(w) >= 1 for w in widths):
                xs = [0, left] if first is not None else [0]
                for w in widths:
                    xs.append(xs[-1] + w + 1)
                return xs
        return None

    top: list[_Kind] = [_OFFICE, *_ROOMS[:1]] if two_bands else [_OFFICE, *_ROOMS]
    bottom: list[_Kind] = list(_ROOMS[1:]) if two_bands else []
    top_xs = walls_x(len(top), office=True)
    bottom_xs = walls_x(len(bottom), office=False) if bottom else []
    if top_xs is None or bottom_xs is None:
        return None

    def rows_needed(xs: list[int], kinds: list[_Kind]) -> int:
        return max(
            [1]
            + [
                math.ceil(n / per_row(xs[i + 1] - xs[i] - 1))
                for i, kind in enumerate(kinds)
                if kind[0] is not None
            ]
        )

    top_rows = rows_needed(top_xs, top)
    bottom_rows = rows_needed(bottom_xs, bottom) if bottom else 0

    desk_pitch = desk_w + (2 if tier.name_w else 1)
    open_w = width - 2 - 2 * tier.pad
    cols = max(0, (open_w + desk_pitch - desk_w) // desk_pitch)
    if workers and cols == 0:
        return None
    desk_rows = math.ceil(len(workers) / cols) if workers else 0
    spare = height - (4 if bottom else 3) - top_rows - bottom_rows - desk_rows
    if spare < 0:
        return None
    # Spare rows go to corridors and aisles first, then rooms grow towards a fair share of the
    # height, and what is left spreads the desks out.
    lead = min(spare, 1)
    trail = min(spare - lead, 1) if bottom else 0
    spare -= lead + trail
    gaps = max(desk_rows - 1, 0)
    spacing = 2 if gaps and spare >= gaps else 1
    spare -= gaps * (spacing - 1)
    share = height // (4 if bottom else 3)
    grow = min(spare // (2 if bottom else 1), max(0, share - top_rows))
    top_rows += grow
    spare -= grow
    if bottom:
        grow = min(spare, max(0, share - bottom_rows))
        bottom_rows += grow
        spare -= grow
    if gaps and spacing == 2 and spare >= gaps:
        spacing = 3
        spare -= gaps

    mid_y = 1 + top_rows
    bottom_y = height - 2 - bottom_rows  # the wall above the bottom band
    canvas = _Canvas(width, height)
    canvas.box(0, 0, width, height)
    canvas.hline(0, mid_y, width)
    if bottom:
        canvas.hline(0, bottom_y, width)
    texts: list[Text] = []
    rooms: list[Room] = []
    spots: dict[Area, dict[str, Spot]] = {place: {} for place in Area}
    desk_cells: dict[str, Point] = {}

    def band(xs: list[int], kinds: list[_Kind], y0: int, y1: int, door_y: int) -> None:
        """Rooms between horizontal walls y0 and y1, with their doors in wall door_y."""
        for x in xs[1:-1]:
            canvas.vline(x, y0, y1 - y0 + 1)
        for i, (place, titles, prop) in enumerate(kinds):
            x0, x1 = xs[i], xs[i + 1]
            interior = x1 - x0 - 1
            title = next((t for t in titles if len(t) + 2 <= interior), titles[-1][:interior])
            label = f" {title} " if len(title) + 2 <= interior else title
            texts.append(Text(x0 + 1, y0, label, "title"))
            door_w = 2 if interior >= 6 else 1
            # A door in the titled wall goes past the title.
            after = len(label) if door_y == y0 and interior - len(label) >= door_w + 1 else 0
            door_x = x0 + 1 + after + (interior - after - door_w) // 2
            canvas.door(door_x, door_y, door_w)
            outside = door_y - 1 if door_y == y0 else door_y + 1
            rooms.append(
                Room(
                    titles[0], x0, y0, x1 - x0 + 1, y1 - y0 + 1, (door_x, door_y), (door_x, outside)
                )
            )
            if place is None:
                if manager is not None:
                    y = y0 + 1 + (y1 - y0 - 2) // 2
                    _seat(
                        manager, x0 + 1 + tier.pad, y, seat_w, tier.name_w, spots, desk_cells, texts
                    )
                continue
            left = x0 + 1 + tier.pad
            if tier.props:
                texts.extend(Text(left, y, prop, "prop") for y in range(y0 + 1, y1))
                left += prop_w
            across = per_row(interior)
            for j, agent in enumerate(agents):
                row, col = divmod(j, across)
                spots[place][agent.id] = Spot(
                    left + col * (tier.spot_w + tier.gap), y0 + 1 + row, tier.spot_w
                )

    band(top_xs, top, 0, mid_y, mid_y)
    if bottom:
        band(bottom_xs, bottom, bottom_y, height - 1, bottom_y)

    if workers:
        used = min(cols, len(workers))
        pitch = max(desk_pitch, min(open_w // used, desk_pitch + 8))
        x_start = 1 + tier.pad + max(0, (open_w - (pitch * (used - 1) + desk_w)) // 2)
        y_start = mid_y + 1 + lead + spare // 2
        for j, agent in enumerate(workers):
            row, col = divmod(j, cols)
            x, y = x_start + col * pitch, y_start + row * spacing
            _seat(agent, x, y, seat_w, tier.name_w, spots, desk_cells, texts)

    return FloorPlan(
        width=width,
        height=height,
        background=tuple(canvas.render(texts)),
        spots=spots,
        desk_cells=desk_cells,
        texts=tuple(texts),
        rooms=tuple(rooms),
        corridor_y=mid_y + 1,
        manager_id=manager.id if manager else None,
        listing=False,
    )


def _seat(
    agent: AgentInfo,
    x: int,
    y: int,
    seat_w: int,
    name_w: int,
    spots: dict[Area, dict[str, Spot]],
    desk_cells: dict[str, Point],
    texts: list[Text],
) -> None:
    desk_cells[agent.id] = (x, y)
    texts.append(Text(x, y, DESK_GLYPH, "prop"))
    spots[Area.DESK][agent.id] = Spot(x + 1, y, seat_w)
    if name_w:
        texts.append(Text(x + 3, y, agent.name[:name_w], "nameplate"))


def _listing(agents: Sequence[AgentInfo], width: int, height: int) -> FloorPlan:
    """One line per agent, in columns when there are more agents than lines."""
    spots: dict[Area, dict[str, Spot]] = {place: {} for place in Area}
    if width > 0 and height > 0 and agents:
        columns = math.ceil(len(agents) / height)
        col_w = width // columns
        for j, agent in enumerate(agents):
            col, row = divmod(j, height)
            if col_w < 1:
                break
            spot = Spot(col * col_w, row, col_w - 1 if col_w > 2 else col_w)
            for place in Area:
                spots[place][agent.id] = spot
    manager = _manager(agents)
    return FloorPlan(
        width=max(width, 0),
        height=max(height, 0),
        background=tuple(" " * max(width, 0) for _ in range(max(height, 0))),
        spots=spots,
        desk_cells={},
        texts=(),
        rooms=(),
        corridor_y=0,
        manager_id=manager.id if manager else None,
        listing=True,
    )


# Box characters by which neighbours are walls: (up, down, left, right).
_BOX = {
    (False, False, True, True): "─",
    (True, True, False, False): "│",
    (False, True, False, True): "┌",
    (False, True, True, False): "┐",
    (True, False, False, True): "└",
    (True, False, True, False): "┘",
    (True, True, False, True): "├",
    (True, True, True, False): "┤",
    (False, True, True, True): "┬",
    (True, False, True, True): "┴",
    (True, True, True, True): "┼",
    (False, False, True, False): "╴",
    (False, False, False, True): "╶",
    (True, False, False, False): "╵",
    (False, True, False, False): "╷",
    (False, False, False, False): "·",
}


class _Canvas:
    """Walls as a bitmap, turned into box characters at the end so junctions come out right."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.walls = [[False] * width for _ in range(height)]

    def hline(self, x: int, y: int, length: int) -> None:
        for i in range(x, x + length):
            self.walls[y][i] = True

    def vline(self, x: int, y: int, length: int) -> None:
        for j in range(y, y + length):
            self.walls[j][x] = True

    def box(self, x: int, y: int, width: int, height: int) -> None:
        self.hline(x, y, width)
        self.hline(x, y + height - 1, width)
        self.vline(x, y, height)
        self.vline(x + width - 1, y, height)

    def door(self, x: int, y: int, width: int) -> None:
        for i in range(x, x + width):
            self.walls[y][i] = False

    def _wall(self, x: int, y: int) -> bool:
        return 0 <= y < self.height and 0 <= x < self.width and self.walls[y][x]

    def render(self, texts: Sequence[Text]) -> list[str]:
        rows = [
            [
                _BOX[
                    (
                        self._wall(x, y - 1),
                        self._wall(x, y + 1),
                        self._wall(x - 1, y),
                        self._wall(x + 1, y),
                    )
                ]
                if self.walls[y][x]
                else " "
                for x in range(self.width)
            ]
            for y in range(self.height)
        ]
        for t in texts:
            rows[t.y][t.x : t.x + len(t.text)] = t.text
        return ["".join(row) for row in rows]


def path_between(
    plan: FloorPlan, from_id: str, to_id: str, at: Mapping[str, Point] | None = None
) -> list[Point]:
    """Cells from one agent to another, through room doors and along the corridor.

    `at` gives where the agents stand now (default: their desks). Empty if either has no
    place on the plan.
    """
    where = at if at is not None else {i: s.point for i, s in plan.spots[Area.DESK].items()}
    start, end = where.get(from_id), where.get(to_id)
    if start is None or end is None:
        return []
    if plan.listing:
        return _walk([start, (start[0], end[1]), end])
    waypoints = [start]
    for point, leaving in ((start, True), (end, False)):
        room = next((r for r in plan.rooms if r.contains(point)), None)
        if room is None:  # a desk: step into the corridor above the desks
            legs = [(point[0], plan.corridor_y)]
        else:
            legs = [(room.door[0], point[1]), room.outside]
        waypoints.extend(legs if leaving else reversed(legs))
    waypoints.append(end)
    return _walk(waypoints)


def _walk(waypoints: Sequence[Point]) -> list[Point]:
    """Every cell along straight legs between waypoints (horizontal, then vertical)."""
    cells = [waypoints[0]]
    for tx, ty in waypoints[1:]:
        x, y = cells[-1]
        while x != tx:
            x += 1 if tx > x else -1
            cells.append((x, y))
        while y != ty:
            y += 1 if ty > y else -1
            cells.append((x, y))
    return cells
