"""The Memory tab: search the office's memory as the person, and open a result's source.

The search itself is hive_core's (`MemoryStore.search`); this widget only asks (on a
thread: SQLite never runs on the app's loop) and shows.
By default the person searches office knowledge (board, tasks, triage, promoted
knowledge, their own mail); the scope switch widens it to everything, every agent's
private memory included, each result labelled with whose it is (seeds 000/001: the
person sees the team's notes; only agents are kept out of each other's). The mode
switch (keyword, semantic, hybrid) is there when the `semantic` extra is installed.

On a picked result `f` forgets the entry (asked first) and `e` edits its text, as the
person: `hive memory forget/edit`, run by the office (hive_tui/verbs.py). Office
knowledge (board, promoted) yes; an agent's private memory, mail, tasks and triage no,
and the refusal is said before anything is asked or opened, nothing changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import ClassVar, cast

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Input, OptionList, Select, Static
from textual.widgets.option_list import Option

from hive_client.aio import VerbResult
from hive_core.memory import (
    SEMANTIC_HINT,
    Hit,
    Mode,
    SearchScope,
    changeable,
    open_store,
    semantic_missing,
)
from hive_core.paths import HivePaths
from hive_core.schema import HUMAN
from hive_core.text import shown as clean
from hive_tui import verbs
from hive_tui.screens.confirm import ConfirmScreen
from hive_tui.screens.memory_edit import REFUSALS, MemoryEditScreen

Search = Callable[[str, SearchScope, Mode], list[Hit]]
SNIPPET_CHARS = 90
SOURCE_MAX_BYTES = 64 * 1024

SCOPES: list[tuple[str, SearchScope]] = [
    ("Office knowledge and your mail", "office"),
    ("Everything, agents' private memory too", "all"),
]
MODES: list[tuple[str, Mode]] = [
    ("Keyword", "keyword"),
    ("Semantic", "semantic"),
    ("Hybrid", "hybrid"),
]
COVERS: dict[SearchScope, str] = {
    "office": "Board, tasks, triage, promoted knowledge and your mail.",
    "all": "Everything: the office and every agent's private memory, labelled by owner.",
    "own": "",
}
KEYS = "↑↓ pick a result · f forget it · e edit it"


def label(hit: Hit) -> str:
    """A result's line: its source and whose it is, then the start of its text (pure)."""
    entry = hit.entry
    snippet = clean(" ".join(entry.text.split()))[:SNIPPET_CHARS]
    return f"[{entry.source} · {escape(entry.whose)}] {escape(snippet)}"


class MemoryPanel(Vertical):
    """Type a query and press enter; pick a result to see its whole source file."""

    DEFAULT_CSS = """
    MemoryPanel { height: 1fr; }
    MemoryPanel Input { margin-bottom: 0; }
    MemoryPanel #memory-options { height: auto; }
    MemoryPanel #memory-options Select { width: 1fr; }
    MemoryPanel OptionList { height: 1fr; min-height: 5; }
    MemoryPanel #memory-source { height: 1fr; border-top: solid $panel; }
    MemoryPanel #memory-status { color: $text-muted; height: auto; }
    MemoryPanel #memory-keys { color: $text-muted; height: auto; }
    MemoryPanel #memory-said { height: auto; }
    MemoryPanel #memory-said.refused { color: $error; }
    """
    # On the results only: in the query box f and e are letters.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "forget", "forget"),
        Binding("e", "edit", "edit"),
    ]

    def __init__(
        self,
        search: Search,
        paths: HivePaths,
        hive: verbs.Run,
        *,
        semantic: bool | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._search = search
        self._paths = paths
        self._hive = hive
        self._hits: list[Hit] = []
        self._query = ""
        # The mode switch only where semantic search can run (the extra is installed).
        self._semantic = not semantic_missing() if semantic is None else semantic

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search memory (enter)", id="memory-query")
        with Horizontal(id="memory-options"):
            yield Select(SCOPES, value="office", allow_blank=False, id="memory-scope")
            if self._semantic:
                yield Select(MODES, value="keyword", allow_blank=False, id="memory-mode")
        yield Static(self._covers("office"), id="memory-status")
        yield OptionList(id="memory-results")
        yield Static(KEYS, id="memory-keys")
        yield Static("", id="memory-said")
        with VerticalScroll(id="memory-source"):
            yield Static("", id="memory-text")

    def _covers(self, scope: SearchScope) -> str:
        hint = "" if self._semantic else f" Semantic search: {escape(SEMANTIC_HINT)}."
        return COVERS[scope] + hint

    def focus_target(self) -> Widget:
        """What takes the keys when the panel is picked: the query box."""
        return self.query_one("#memory-query", Input)

    @property
    def scope(self) -> SearchScope:
        return cast(SearchScope, self.query_one("#memory-scope", Select).value)

    @property
    def mode(self) -> Mode:
        if not self._semantic:
            return "keyword"
        return cast(Mode, self.query_one("#memory-mode", Select).value)

    @on(Input.Submitted, "#memory-query")
    def run_search(self, event: Input.Submitted) -> None:
        self._query = event.value.strip()
        self._start()

    @on(Select.Changed, "#memory-scope")
    @on(Select.Changed, "#memory-mode")
    def options_changed(self, _event: Select.Changed) -> None:
        if self._query:
            self._start()
        else:
            self.query_one("#memory-status", Static).update(self._covers(self.scope))

    def _start(self) -> None:
        self.query_one(OptionList).clear_options()
        if self._query:
            # A newer query cancels the one before; its late answer is then dropped.
            self.run_worker(
                self._search_and_show(self._query, self.scope, self.mode),
                group="memory-search",
                exclusive=True,
            )

    async def _search_and_show(self, query: str, scope: SearchScope, mode: Mode) -> None:
        results = self.query_one(OptionList)
        status = self.query_one("#memory-status", Static)
        try:
            self._hits = await asyncio.to_thread(self._search, query, scope, mode)
        except Exception as exc:  # the index may be rebuilding or unreadable: say so, keep going
            status.update(f"Search failed: {escape(str(exc))}")
            return
        where = "everywhere" if scope == "all" else "in office knowledge"
        status.update(
            f"{len(self._hits)} result(s) for {escape(query)} {where}"
            if self._hits
            else f"Nothing found for {escape(query)} {where}."
        )
        for hit in self._hits:
            results.add_option(Option(label(hit), id=hit.id))
        if self._hits:
            results.highlighted = 0
            results.focus()
        else:
            self.query_one("#memory-text", Static).update("")

    @on(OptionList.OptionHighlighted, "#memory-results")
    @on(OptionList.OptionSelected, "#memory-results")
    def open_source(self, event: OptionList.OptionHighlighted | OptionList.OptionSelected) -> None:
        hit = next((h for h in self._hits if h.id == event.option.id), None)
        if hit is None:
            return
        entry = hit.entry
        path = self._paths.hive / entry.path
        try:
            text = path.read_bytes()[:SOURCE_MAX_BYTES].decode("utf-8", errors="replace")
        except OSError:
            text = entry.text  # the file moved on (read, tidied): the indexed text stands
        head = f"[b]{escape(entry.path)}[/b]  {entry.source}, {escape(entry.whose)}\n\n"
        self.query_one("#memory-text", Static).update(head + escape(clean(text)))

    # --- forget and edit, as the person -----------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("forget", "edit"):
            return self.query_one("#memory-results", OptionList).has_focus
        return True

    def _picked(self) -> Hit | None:
        results = self.query_one("#memory-results", OptionList)
        if results.highlighted is None:
            return None
        picked = results.get_option_at_index(results.highlighted).id
        return next((h for h in self._hits if h.id == picked), None)

    def _say(self, text: str, *, refused: bool = False) -> None:
        said = self.query_one("#memory-said", Static)
        said.update(escape(text))
        said.set_class(refused, "refused")

    def _refusal(self, entry_id: str) -> str | None:
        """Why the person may not change the entry, or None (on a thread: SQLite, and
        office.toml for who the manager is)."""
        try:
            with open_store(self._paths) as store:
                changeable(self._paths, store, entry_id, HUMAN)
        except REFUSALS as exc:
            return str(exc)
        return None

    def action_forget(self) -> None:
        hit = self._picked()
        if hit is not None:
            self.run_worker(self._forget(hit), group="memory-change", exclusive=True)

    def action_edit(self) -> None:
        hit = self._picked()
        if hit is not None:
            self.run_worker(self._edit(hit), group="memory-change", exclusive=True)

    async def _forget(self, hit: Hit) -> None:
        # Asked only when it may be done: a refusal comes before the question.
        if (why := await asyncio.to_thread(self._refusal, hit.id)) is not None:
            self._say(why, refused=True)
            return
        entry = hit.entry
        question = (
            f"Forget {hit.id} ({entry.source}, {entry.whose})? It is taken out of {entry.path}."
        )
        if not await self.app.push_screen_wait(ConfirmScreen(question)):
            return
        forgot = await self._hive(verbs.forget(hit.id), b"")
        if forgot.code != 0:
            self._say(forgot.said, refused=True)
            return
        self._say(verbs.sentence(forgot.out))
        self._start()

    async def _edit(self, hit: Hit) -> None:
        # Checked before the text opens for editing, as `hive memory edit` does.
        if (why := await asyncio.to_thread(self._refusal, hit.id)) is not None:
            self._say(why, refused=True)
            return
        save = partial(self._save, hit.id)
        said = await self.app.push_screen_wait(MemoryEditScreen(hit.entry, save))
        if said is not None:
            self._say(said)
            self._start()

    async def _save(self, entry_id: str, text: str) -> VerbResult:
        argv, stdin = verbs.edit(entry_id, text)
        return await self._hive(argv, stdin)
