"""The office floor: pure layout (plan_floor, station_for, path_between) and the OfficeMap widget."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.message import Message

from hive_core.events.policy import decide
from hive_tui.map.floor import (
    Area,
    FloorPlan,
    Spot,
    Station,
    agent_colour,
    path_between,
    plan_floor,
    station_for,
)
from hive_tui.map.widget import OfficeMap
from hive_tui.messages import AgentInfo
from tests.unit.test_hook_decide import MICHAEL, OFFICE, tool

NAMES = [
    "Michael", "Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace",
    "Heidi", "Ivan", "Judy", "Mallory", "Niaj", "Olivia", "Peggy",
]  # fmt: skip
SIZES = [(120, 40), (80, 24), (40, 12)]


def roster(n: int) -> list[AgentInfo]:
    return [AgentInfo(id=f"a{i}", name=NAMES[i], role="eng", manager=i == 0) for i in range(n)]


def cells(spot: Spot) -> set[tuple[int, int]]:
    return {(spot.x + i, spot.y) for i in range(spot.width)}


# -- plan_floor ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("n", [1, 4, 8, 15])
def test_plan_fits_and_nothing_overlaps(n: int, size: tuple[int, int]) -> None:
    width, height = size
    agents = roster(n)
    plan = plan_floor(agents, width, height)

    assert not plan.listing
    assert len(plan.background) == height
    assert all(len(line) == width and cell_len(line) == width for line in plan.background)

    desks = plan.spots[Area.DESK]
    assert set(desks) == {a.id for a in agents}
    assert len({s.point for s in desks.values()}) == n
    assert desks[plan.manager_id or ""] is not None

    taken: dict[tuple[int, int], str] = {}
    for place, by_agent in plan.spots.items():
        assert set(by_agent) == {a.id for a in agents}, place
        for agent_id, spot in by_agent.items():
            assert spot.x >= 0 and spot.x + spot.width <= width and 0 <= spot.y < height
            for cell in cells(spot):
                assert cell not in taken, f"{place} spot of {agent_id} overlaps {taken[cell]}"
                taken[cell] = f"{place} spot of {agent_id}"
    for text in plan.texts:
        for i in range(len(text.text)):
            cell = (text.x + i, text.y)
            assert 0 <= cell[0] < width and 0 <= cell[1] < height
            owner = taken.get(cell)
            # A nameplate lives inside its owner's seat, after the initial and a space.
            assert owner is None or text.kind == "nameplate", f"{text} overlaps {owner}"
            taken.setdefault(cell, f"{text.kind} {text.text!r}")

    # Rooms are empty where avatars stand; a seat shows only its owner's nameplate.
    by_id = {a.id: a for a in agents}
    for place, by_agent in plan.spots.items():
        for agent_id, spot in by_agent.items():
            under = plan.background[spot.y][spot.x : spot.x + spot.width]
            expected = " " * spot.width
            if place is Area.DESK and spot.width > 2:
                expected = ("  " + by_id[agent_id].name)[: spot.width].ljust(spot.width)
            assert under == expected


def test_big_plans_label_avatars_and_small_ones_use_initials() -> None:
    big = plan_floor(roster(8), 120, 40)
    small = plan_floor(roster(15), 40, 12)
    assert min(s.width for s in big.spots[Area.KITCHEN].values()) >= 8
    assert max(s.width for s in small.spots[Area.KITCHEN].values()) <= 2
    for title in ("Manager", "Conference", "Library", "Kitchen"):
        assert title in "".join(big.background)


def test_too_small_falls_back_to_one_line_per_agent() -> None:
    plan = plan_floor(roster(6), 20, 4)
    assert plan.listing
    assert plan.background == (" " * 20,) * 4
    desks = plan.spots[Area.DESK]
    assert len({s.point for s in desks.values()}) == 6  # two columns of lines
    assert all(s.x + s.width <= 20 and s.y < 4 for s in desks.values())
    # Nobody moves in a list, so every place is the agent's own line.
    assert plan.spots[Area.KITCHEN] == desks


@pytest.mark.parametrize(
    ("status", "tool", "station"),
    [
        ("working", "Edit", Station(Area.DESK, "typing")),
        ("working", "Write", Station(Area.DESK, "typing")),
        ("working", "MultiEdit", Station(Area.DESK, "typing")),
        ("working", "NotebookEdit", Station(Area.DESK, "typing")),
        ("working", "Bash", Station(Area.DESK, "running")),
        ("working", "Read", Station(Area.LIBRARY, "reading")),
        ("working", "Grep", Station(Area.LIBRARY, "reading")),
        ("working", "Glob", Station(Area.LIBRARY, "reading")),
        ("working", "LS", Station(Area.LIBRARY, "reading")),
        ("working", "WebFetch", Station(Area.LIBRARY, "browsing")),
        ("working", "WebSearch", Station(Area.LIBRARY, "browsing")),
        ("working", "hive board", Station(Area.BOARD, "board")),
        ("working", "hive task", Station(Area.BOARD, "board")),
        ("working", "TodoWrite", Station(Area.DESK, "thinking")),
        ("working", None, Station(Area.DESK, "thinking")),
        ("idle", "Edit", Station(Area.KITCHEN, "idle")),
        ("offline", None, Station(Area.KITCHEN, "idle")),
        ("running", None, Station(Area.DESK, "running")),
        ("waiting", "Bash", Station(Area.DESK, "waiting")),
        ("exited", "Read", Station(Area.DESK, "exited", greyed=True)),
    ],
)
def test_station_for(status: str, tool: str | None, station: Station) -> None:
    assert station_for(AgentInfo("x", "X", "eng", status=status, last_tool=tool)) == station


@pytest.mark.parametrize(
    ("command", "place"),
    [
        ("hive board edit --file plan.md", Area.BOARD),
        ("  hive   task add 'ship it'", Area.BOARD),
        ("hive send --to jim --act inform --subject x --body y", Area.DESK),
        ("echo hive board", Area.DESK),
    ],
)
def test_a_board_or_ledger_command_walks_to_the_conference_room(command: str, place: Area) -> None:
    """Through the real decision: what the hook records is what the map reads."""
    outcome = decide(tool("Bash", command=command), MICHAEL, [], OFFICE)
    info = AgentInfo("michael", "Michael", "Manager", status="working", last_tool=outcome.last_tool)
    assert station_for(info).place is place


def test_station_for_manager_and_missing_cli() -> None:
    idle_manager = AgentInfo("m", "M", "manager", manager=True, status="idle")
    assert station_for(idle_manager) == Station(Area.DESK, "idle")
    reading_manager = AgentInfo(
        "m", "M", "manager", manager=True, status="working", last_tool="Read"
    )
    assert station_for(reading_manager).place is Area.LIBRARY
    missing = AgentInfo("x", "X", "eng", status="offline", missing="install claude")
    assert station_for(missing) == Station(Area.DESK, "missing", greyed=True)


def test_agent_colours_are_distinct_256_colour_cube_entries() -> None:
    colours = [agent_colour(i) for i in range(15)]
    assert len(set(colours)) == 15
    levels = {"00", "5f", "87", "af", "d7", "ff"}
    for colour in colours:
        assert re.fullmatch(r"#[0-9a-f]{6}", colour)
        assert {colour[1:3], colour[3:5], colour[5:7]} <= levels


def _assert_walk(plan: FloorPlan, path: list[tuple[int, int]]) -> None:
    for (x0, y0), (x1, y1) in pairwise(path):
        assert abs(x0 - x1) + abs(y0 - y1) == 1
    assert all(0 <= x < plan.width and 0 <= y < plan.height for x, y in path)


@pytest.mark.parametrize("size", SIZES)
def test_path_between_desks_and_rooms(size: tuple[int, int]) -> None:
    plan = plan_floor(roster(8), *size)
    desks = plan.spots[Area.DESK]
    path = path_between(plan, "a0", "a5")
    assert path[0] == desks["a0"].point and path[-1] == desks["a5"].point
    _assert_walk(plan, path)

    at = {"a1": plan.spots[Area.LIBRARY]["a1"].point, "a2": plan.spots[Area.KITCHEN]["a2"].point}
    path = path_between(plan, "a1", "a2", at)
    assert path[0] == at["a1"] and path[-1] == at["a2"]
    _assert_walk(plan, path)
    # It leaves and enters the rooms through their doors, not through walls.
    walls = set("─│┌┐└┘├┤┬┴┼")
    assert not [(x, y) for x, y in path if plan.background[y][x] in walls]

    assert path_between(plan, "a1", "nobody") == []


# -- the widget ---------------------------------------------------------------------------


class MapApp(App[None]):
    def __init__(self, agents: list[AgentInfo]) -> None:
        super().__init__()
        self.agents = agents

    def compose(self) -> ComposeResult:
        yield OfficeMap(self.agents)


def screen_text(office: OfficeMap) -> list[str]:
    return [office.render_line(y).text for y in range(office.size.height)]


def cell(office: OfficeMap, x: int, y: int) -> str:
    return office.render_line(y).text[x]


TEAM = [
    AgentInfo("m", "Michael", "manager", manager=True, status="working", last_tool="Read"),
    AgentInfo("a", "Alice", "eng", status="working", last_tool="Edit"),
    AgentInfo("b", "Bob", "eng", status="idle"),
    AgentInfo("c", "Carol", "eng", status="working", last_tool="WebSearch"),
]


async def test_agents_appear_by_name() -> None:
    app = MapApp(TEAM)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = "\n".join(screen_text(app.query_one(OfficeMap)))
        for name in ("Michael", "Alice", "Bob", "Carol", "Conference", "Kitchen", "Library"):
            assert name in text


async def test_update_agent_moves_the_avatar() -> None:
    app = MapApp(TEAM)
    async with app.run_test(size=(80, 24)) as pilot:
        office = app.query_one(OfficeMap)
        await pilot.pause()
        plan = office.plan
        assert plan is not None
        desk = plan.spots[Area.DESK]["b"]
        kitchen = plan.spots[Area.KITCHEN]["b"]
        assert cell(office, kitchen.x, kitchen.y) == "B"
        assert cell(office, desk.x, desk.y) == " "

        office.update_agent(AgentInfo("b", "Bob", "eng", status="working", last_tool="Bash"))
        await pilot.pause()
        assert office.position("b") == desk.point
        assert cell(office, desk.x, desk.y) == "B"
        assert cell(office, desk.x - 1, desk.y) == "$"  # the desk shows a shell at work
        assert cell(office, kitchen.x, kitchen.y) == " "

        office.update_agent(AgentInfo("b", "Bob", "eng", status="idle"))
        await pilot.pause()
        assert office.position("b") == kitchen.point
        assert cell(office, kitchen.x, kitchen.y) == "B"
        assert cell(office, desk.x, desk.y) == " "


async def test_badges_render() -> None:
    agents = [
        AgentInfo("m", "Michael", "manager", manager=True, status="idle", unread=3),
        AgentInfo("a", "Alice", "eng", status="waiting", needs_you=True),
        AgentInfo("b", "Bob", "eng", status="working", last_tool="Edit", paused=True),
        AgentInfo("c", "Carol", "eng", status="offline", missing="install claude"),
    ]
    app = MapApp(agents)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        lines = screen_text(app.query_one(OfficeMap))
        text = "\n".join(lines)
        assert "Michael ✉3" in text
        assert "Alice !" in text
        assert "Bob ‖" in text
        assert "Carol ?" in text


async def test_enter_and_click_post_agent_selected() -> None:
    seen: list[str] = []
    messages: list[Message] = []

    def hook(message: Message) -> None:
        # The hook sees a message at every hop while it bubbles up; count each one once.
        if isinstance(message, OfficeMap.AgentSelected) and all(message is not m for m in messages):
            messages.append(message)
            seen.append(message.agent_id)

    app = MapApp(TEAM)
    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        office = app.query_one(OfficeMap)
        office.focus()
        await pilot.pause()
        await pilot.press("tab")
        assert office.selected == "m"
        await pilot.press("tab", "tab")
        assert office.selected == "b"
        await pilot.press("enter")
        await pilot.pause()
        assert seen == ["b"]

        spot = office.spot_of("c")
        assert spot is not None
        await pilot.click(OfficeMap, offset=(spot.x, spot.y))
        await pilot.pause()
        assert seen == ["b", "c"]
        assert office.selected == "c"

        office.select("a")
        await pilot.press("enter")
        await pilot.pause()
        assert seen == ["b", "c", "a"]


async def test_arrows_move_the_selection_towards_that_side() -> None:
    app = MapApp([AgentInfo(f"w{i}", NAMES[i + 1], "eng", status="working") for i in range(3)])
    async with app.run_test(size=(80, 24)) as pilot:
        office = app.query_one(OfficeMap)
        office.focus()
        office.select("w0")
        await pilot.press("right")
        assert office.selected == "w1"
        await pilot.press("right", "right")
        assert office.selected == "w2"  # nothing further right
        await pilot.press("left")
        assert office.selected == "w1"


async def test_envelope_travels_and_its_timer_stops() -> None:
    app = MapApp(TEAM)
    async with app.run_test(size=(80, 24)) as pilot:
        office = app.query_one(OfficeMap)
        await pilot.pause()
        assert not office.animating  # no timer while nothing moves
        office.send_envelope("a", "b")
        assert office.animating
        await pilot.pause(0.3)
        assert "✉" in "".join(screen_text(office))  # in flight
        await pilot.pause(1.0)
        assert not office.animating
        assert "✉" not in "".join(screen_text(office))


# -- snapshot -----------------------------------------------------------------------------


def test_office_snapshot(snapshots_in_repo: None, snap_compare: Any) -> None:
    agents = [
        AgentInfo(
            "m", "Michael", "manager", manager=True, status="working", last_tool="Read", unread=2
        ),
        AgentInfo("a", "Alice", "eng", status="working", last_tool="Edit"),
        AgentInfo("b", "Bob", "eng", status="working", last_tool="Bash", paused=True),
        AgentInfo("c", "Carol", "eng", status="idle", unread=3),
        AgentInfo("d", "Dave", "eng", status="waiting", needs_you=True),
        AgentInfo("e", "Erin", "eng", status="exited"),
    ]
    assert snap_compare(MapApp(agents), terminal_size=(100, 30))
