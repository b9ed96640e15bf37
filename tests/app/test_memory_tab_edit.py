"""Issue 16 in the app: the person forgets (`f`, asked first) and edits (`e`) memory from
the Memory tab, with `hive memory forget/edit` run by a real office (`hive-office serve`,
issue 25: the app changes nothing itself): office knowledge yes, an agent's private
memory no (said, nothing changed). A real index and real hive files behind it, driven
by Pilot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Select, Static, TextArea

from hive_client.aio import VerbResult, call
from hive_core.hive import init_office
from hive_core.memory import forget, note, open_store
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN
from hive_tui.panels.memory import MemoryPanel
from hive_tui.screens.confirm import ConfirmScreen
from hive_tui.screens.memory_edit import MemoryEditScreen
from tests.app.test_memory_tab import TabApp, searcher, shown
from tests.serve_support import ServedOffice
from tests.support import until

SOAK = "The flux_capacitor rollout waits for the staging soak."


@pytest.fixture
def home(short_tmp: Path) -> Iterator[HivePaths]:
    root = short_tmp
    paths = HivePaths(root / "home")
    init_office(paths)
    paths.board.write_text(f"# Plan\n\n{SOAK}\n\n- Release notes are due on the 3rd.\n")
    with open_store(paths) as store:
        store.reindex()
        note(paths, "jim", "flux_capacitor password is in the vault", store)
    office = ServedOffice(paths.home, agents=False).start()
    try:
        yield paths
    finally:
        assert office.stop() == 0


def panel(paths: HivePaths) -> MemoryPanel:
    socket = str(paths.control_socket)

    async def hive(argv: list[str], stdin: bytes) -> VerbResult:
        return await call(socket, argv, stdin=stdin)

    return MemoryPanel(searcher(paths), paths, hive, semantic=False)


def said(app: TabApp) -> str:
    return str(app.query_one("#memory-said", Static).render())


def found(paths: HivePaths, query: str) -> list[str]:
    with open_store(paths) as store:
        return [h.entry.text for h in store.search(query, HUMAN, "all", 20)]


async def search(app: TabApp, pilot: Pilot[None], query: str) -> None:
    box = app.query_one("#memory-query", Input)
    box.focus()
    box.value = ""
    await pilot.press(*query, "enter")


def pick(app: TabApp, words: str) -> None:
    results = app.query_one("#memory-results", OptionList)
    results.highlighted = next(i for i, t in enumerate(shown(app)) if words in t)
    results.focus()


async def test_forget_an_office_entry_asks_first_then_takes_it_out(home: HivePaths) -> None:
    app = TabApp(panel(home))
    async with app.run_test(size=(120, 40)) as pilot:
        # f and e are letters in the query box.
        await search(app, pilot, "flux staging soak")
        await until(pilot, lambda: shown(app), "the board entry")
        assert "f forget" in str(app.query_one("#memory-keys", Static).render())
        pick(app, "staging soak")
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked first")
        await pilot.press("n")
        assert SOAK in home.board.read_text() and any("staging" in t for t in shown(app))
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked again")
        await pilot.press("y")
        await until(pilot, lambda: "Forgot" in said(app), "said it was forgotten")
        await until(pilot, lambda: "Nothing found" in str(app.query_one("#memory-status", Static).render()), "the search re-run")  # fmt: skip
        assert not any("staging" in t for t in shown(app))
        board = home.board.read_text()
        assert "staging soak" not in board, board
        assert board.startswith("# Plan") and "Release notes are due" in board, "the rest kept"
        assert not any("staging" in t for t in found(home, "staging soak"))


async def test_an_agents_private_entry_is_refused_and_left_as_it_was(home: HivePaths) -> None:
    notes = home.mailbox("jim").notes
    before = notes.read_bytes()
    app = TabApp(panel(home))
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#memory-scope", Select).value = "all"
        await search(app, pilot, "flux vault")
        await until(pilot, lambda: any("vault" in t for t in shown(app)), "jim's note")
        [hit] = [h for h in app.panel._hits if "vault" in h.entry.text]
        for key in ("f", "e"):
            pick(app, "vault")
            app.query_one("#memory-said", Static).update("")
            await pilot.press(key)
            await until(pilot, lambda: "not in your memory" in said(app), f"{key} refused")
            assert app.screen is app.screen_stack[0], "neither asked nor opened"
            assert app.query_one("#memory-said", Static).has_class("refused")
        assert notes.read_bytes() == before
        assert any("vault" in t for t in found(home, "vault"))
        # The same tab forgets what the person may (office knowledge) ...
        app.query_one("#memory-scope", Select).value = "office"
        await search(app, pilot, "staging soak")
        await until(pilot, lambda: any("staging" in t for t in shown(app)), "the board entry")
        pick(app, "staging")
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        await pilot.press("y")
        await until(pilot, lambda: "Forgot" in said(app), "the board entry forgotten")
    # ... and jim forgets his own note through the same function.
    forget(home, hit.id, "jim")
    assert "vault" not in notes.read_text()
    assert not any("vault" in t for t in found(home, "vault"))


async def test_edit_an_office_entry(home: HivePaths) -> None:
    app = TabApp(panel(home))
    async with app.run_test(size=(120, 40)) as pilot:
        await search(app, pilot, "staging soak")
        await until(pilot, lambda: shown(app), "the board entry")
        pick(app, "staging soak")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, MemoryEditScreen), "the edit form")
        form = app.screen
        area = form.query_one("#memory-edit-text", TextArea)
        assert area.text.strip() == SOAK
        # A line markdown reads as a heading is refused; the form stays with the text.
        area.load_text("# Friday")
        await pilot.press("ctrl+s")
        error = form.query_one("#error")
        await until(pilot, lambda: "heading" in str(error.render()), "the refusal said")
        assert app.screen is form and SOAK in home.board.read_text()
        area.load_text("The flux_capacitor rollout ships on Friday after the soak.")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: "Edited" in said(app), "said it was edited")
        assert app.screen is app.screen_stack[0]
        board = home.board.read_text()
        assert "ships on Friday" in board and "waits for the staging" not in board, board
        assert any("ships on Friday" in t for t in found(home, "friday"))
        await search(app, pilot, "friday")
        await until(pilot, lambda: any("ships on Friday" in t for t in shown(app)), "found")
