"""`why` from the app: the prefix then w for the focused agent, w on the map for the
selected one; the same sentence `hive-office why` prints (the office's one dispatch). The
app is attached to a real `hive-office serve` over the SocketLink (tests/app/conftest.py)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from hive_core.hive import init_office
from hive_core.paths import HivePaths
from hive_core.render import why_text
from hive_core.schema import ControlRequest
from hive_tui.app import HiveApp
from hive_tui.map.widget import OfficeMap
from tests.app.conftest import ServeApp, run_app
from tests.support import shell_roster

PREFIX = "ctrl+right_square_bracket"
ROSTER = shell_roster("michael", "jim")


def _home(root: Path) -> HivePaths:
    paths = HivePaths(root / "home")
    paths.home.mkdir(parents=True)
    paths.office_toml.write_text(ROSTER)
    init_office(paths)
    return paths


def _said(app: HiveApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def _until(pilot: Pilot[None], predicate: object, what: str) -> None:
    for _ in range(200):
        if callable(predicate) and predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"never: {what}")


async def test_why_for_the_focused_agent_and_for_the_one_picked_on_the_map(
    short_tmp: Path, serve_app: ServeApp
) -> None:
    app = serve_app(_home(short_tmp), agents=False)
    async with run_app(app, (160, 48)) as pilot:
        for agent in ("michael", "jim"):
            await _until(pilot, lambda a=agent: app.link.view(a).explained, f"{agent} explained")

        async def expected(agent: str) -> str:
            reply = await app.link.perform(ControlRequest(cmd="why", agent=agent))
            return why_text(agent, reply.detail)

        # Without the prefix, w is typed into the agent: no answer appears.
        await pilot.press("w")
        await pilot.pause(0.2)
        assert not any(s.startswith("michael: ") for s in _said(app))

        await pilot.press(PREFIX, "w")
        want = await expected("michael")
        await _until(pilot, lambda: want in _said(app), "michael's why on screen")

        await pilot.press(PREFIX, "o")
        office_map = app.query_one(OfficeMap)
        assert app.focused is office_map
        while office_map.selected != "jim":
            await pilot.press("tab")
        await pilot.press("w")
        want = await expected("jim")
        await _until(pilot, lambda: want in _said(app), "jim's why on screen")
        assert want.startswith("jim: ") and "evidence: " in want
