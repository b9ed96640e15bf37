"""Issue 16: the person's Memory tab searches office knowledge by default and every
scope when asked, each result labelled with whose it is; its mode switch is there when
the semantic extra is installed. A real index behind it, driven by Pilot."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import OptionList, Select, Static

from hive_client.aio import VerbResult
from hive_core.hive import init_office
from hive_core.memory import Hit, embed, note, open_store
from hive_core.memory.store import Mode, SearchScope
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN
from hive_tui.panels.memory import MemoryPanel
from tests.support import until


@pytest.fixture
def home(short_tmp: Path) -> Iterator[HivePaths]:
    root = short_tmp
    paths = HivePaths(root / "home")
    init_office(paths)
    paths.board.write_text("# Plan\n\nThe flux_capacitor rollout waits for the staging soak.\n")
    with open_store(paths) as store:
        store.reindex()
        note(paths, "jim", "flux_capacitor password is in the vault", store)
    yield paths


def searcher(paths: HivePaths) -> Callable[[str, SearchScope, Mode], list[Hit]]:
    def search(query: str, scope: SearchScope, mode: Mode) -> list[Hit]:
        with open_store(paths) as store:
            return store.search(query, HUMAN, scope, 20, mode)

    return search


async def no_verbs(argv: list[str], stdin: bytes) -> VerbResult:
    raise AssertionError(f"a search ran `hive {' '.join(argv)}`: it changes nothing")


class TabApp(App[None]):
    def __init__(self, panel: MemoryPanel) -> None:
        super().__init__()
        self.panel = panel

    def compose(self) -> ComposeResult:
        yield self.panel


def shown(app: TabApp) -> list[str]:
    results = app.query_one("#memory-results", OptionList)
    return [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]


async def test_scope_all_shows_every_agents_memory_labelled_by_owner(home: HivePaths) -> None:
    app = TabApp(MemoryPanel(searcher(home), home, no_verbs, semantic=False))
    async with app.run_test(size=(120, 40)) as pilot:
        assert not app.query("#memory-mode"), "no mode switch without the extra"
        assert "scripts/setup --semantic" in str(app.query_one("#memory-status", Static).render())
        app.panel.focus_target().focus()
        await pilot.press(*"flux capacitor", "enter")
        await until(pilot, lambda: shown(app), "office results")
        office = shown(app)
        assert any("board · office" in t and "staging soak" in t for t in office), office
        assert not any("vault" in t for t in office), "private memory only when asked"
        app.query_one("#memory-scope", Select).value = "all"
        await until(pilot, lambda: any("vault" in t for t in shown(app)), "every scope")
        everything = shown(app)
        assert any("note · private:jim" in t and "vault" in t for t in everything), everything
        assert any("board · office" in t for t in everything), everything
        status = str(app.query_one("#memory-status", Static).render())
        assert "everywhere" in status
        results = app.query_one("#memory-results", OptionList)
        results.highlighted = next(i for i, t in enumerate(everything) if "vault" in t)
        await until(
            pilot,
            lambda: "private:jim" in str(app.query_one("#memory-text", Static).render()),
            "the source opened with its owner",
        )


async def test_the_mode_switch_reaches_the_search(home: HivePaths) -> None:
    app = TabApp(MemoryPanel(searcher(home), home, no_verbs, semantic=True))
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#memory-mode", Select).value = "semantic"
        app.panel.focus_target().focus()
        await pilot.press(*"where is the password kept", "enter")
        status = app.query_one("#memory-status", Static)
        if embed.missing():
            # Forced on without the extra: the search says how to install it.
            await until(pilot, lambda: "Search failed" in str(status.render()), "a refusal")
            assert "scripts/setup --semantic" in str(status.render())
        else:
            await until(pilot, lambda: shown(app), "semantic results")
