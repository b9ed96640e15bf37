"""The Memory tab: search the office's memory as the person, and open a result's source.

The search itself is hive_core's (`MemoryStore.search`); this widget only asks (on a
thread: SQLite never runs on the app's loop) and shows.
By default the person searches office knowledge (board, tasks, triage, promoted
knowledge, their own mail); the scope switch widens it to everything, every agent's
private memory included, each result labelled with whose it is (seeds 000/001: the
person sees the team's notes; only agents are kept out of each other's). The mode
switch (keyword, semantic, hybrid) is there when the `semantic` extra is installed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import cast

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Input, OptionList, Select, Static
from textual.widgets.option_list import Option

from hive_core.cli.render import clean
from hive_core.memory import Hit, embed
from hive_core.memory.store import Mode, SearchScope

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
    """

    def __init__(
        self, search: Search, hive: Path, *, semantic: bool | None = None, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self._search = search
        self._hive = hive
        self._hits: list[Hit] = []
        self._query = ""
        # The mode switch only where semantic search can run (the extra is installed).
        self._semantic = not embed.missing() if semantic is None else semantic

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search memory (enter)", id="memory-query")
        with Horizontal(id="memory-options"):
            yield Select(SCOPES, value="office", allow_blank=False, id="memory-scope")
            if self._semantic:
                yield Select(MODES, value="keyword", allow_blank=False, id="memory-mode")
        yield Static(self._covers("office"), id="memory-status")
        yield OptionList(id="memory-results")
        with VerticalScroll(id="memory-source"):
            yield Static("", id="memory-text")

    def _covers(self, scope: SearchScope) -> str:
        hint = "" if self._semantic else f" Semantic search: {escape(embed.INSTALL_HINT)}."
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

    @on(OptionList.OptionHighlighted, "#memory-results")
    @on(OptionList.OptionSelected, "#memory-results")
    def open_source(self, event: OptionList.OptionHighlighted | OptionList.OptionSelected) -> None:
        hit = next((h for h in self._hits if h.id == event.option.id), None)
        if hit is None:
            return
        entry = hit.entry
        path = self._hive / entry.path
        try:
            text = path.read_bytes()[:SOURCE_MAX_BYTES].decode("utf-8", errors="replace")
        except OSError:
            text = entry.text  # the file moved on (read, tidied): the indexed text stands
        head = f"[b]{escape(entry.path)}[/b]  {entry.source}, {escape(entry.whose)}\n\n"
        self.query_one("#memory-text", Static).update(head + escape(clean(text)))
