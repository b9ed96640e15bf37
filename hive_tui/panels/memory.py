"""The Memory tab: search the office's memory as the person, and open a result's source.

The search itself is hive_core's (`MemoryStore.search`); this widget only asks (on a
thread: SQLite never runs on the app's loop) and shows.
The person searches office knowledge (board, tasks, triage, promoted knowledge, their
own mail); agents' private memory stays theirs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from rich.markup import escape
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from hive_core.cli.render import clean
from hive_core.memory import Hit

Search = Callable[[str], list[Hit]]
SNIPPET_CHARS = 90
SOURCE_MAX_BYTES = 64 * 1024


class MemoryPanel(Vertical):
    """Type a query and press enter; pick a result to see its whole source file."""

    DEFAULT_CSS = """
    MemoryPanel { height: 1fr; }
    MemoryPanel Input { margin-bottom: 0; }
    MemoryPanel OptionList { height: 1fr; min-height: 5; }
    MemoryPanel #memory-source { height: 1fr; border-top: solid $panel; }
    MemoryPanel #memory-status { color: $text-muted; height: auto; }
    """

    def __init__(self, search: Search, hive: Path, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._search = search
        self._hive = hive
        self._hits: list[Hit] = []

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search memory (enter)", id="memory-query")
        yield Static("Board, tasks, triage, promoted knowledge and your mail.", id="memory-status")
        yield OptionList(id="memory-results")
        with VerticalScroll(id="memory-source"):
            yield Static("", id="memory-text")

    @on(Input.Submitted, "#memory-query")
    def run_search(self, event: Input.Submitted) -> None:
        query = event.value.strip()
        self.query_one(OptionList).clear_options()
        if query:
            # A newer query cancels the one before; its late answer is then dropped.
            self.run_worker(self._search_and_show(query), group="memory-search", exclusive=True)

    async def _search_and_show(self, query: str) -> None:
        results = self.query_one(OptionList)
        try:
            self._hits = await asyncio.to_thread(self._search, query)
        except Exception as exc:  # the index may be rebuilding or unreadable: say so, keep going
            self.query_one("#memory-status", Static).update(f"Search failed: {escape(str(exc))}")
            return
        self.query_one("#memory-status", Static).update(
            f"{len(self._hits)} result(s) for {escape(query)!s}"
            if self._hits
            else f"Nothing found for {escape(query)}."
        )
        for hit in self._hits:
            entry = hit.entry
            snippet = clean(" ".join(entry.text.split()))[:SNIPPET_CHARS]
            results.add_option(
                Option(f"[{entry.source} · {entry.scope}] {escape(snippet)}", id=hit.id)
            )
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
        head = f"[b]{escape(entry.path)}[/b]  {entry.source}, {entry.scope}, owner {escape(entry.owner)}\n\n"
        self.query_one("#memory-text", Static).update(head + escape(clean(text)))
