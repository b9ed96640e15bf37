"""Edit one memory entry's text as the person (the Memory tab's `e`): the entry's text in
a TextArea; ctrl+s saves it into the hive file it came from, esc leaves it as it was.

The save (`hive memory edit`, run by the office) is awaited here, so that a refusal (a
line markdown would read as a heading, the entry changed meanwhile) is said while the
text stays open to fix."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, TextArea

from hive_client.aio import VerbResult
from hive_core.config import ConfigError
from hive_core.memory import Entry, MemoryStoreError
from hive_tui import verbs
from hive_tui.screens.form import FormScreen

# Saves the new text: what the verb did, or why not.
Save = Callable[[str], Awaitable[VerbResult]]
# Why the person may not change an entry, as the memory library says it.
REFUSALS = (ValueError, MemoryStoreError, ConfigError, OSError)


class MemoryEditScreen(FormScreen[str]):
    """Returns what was done (or that nothing changed), or None if the person cancelled."""

    DEFAULT_CSS = """
    MemoryEditScreen { align: center middle; }
    #memory-edit { width: 90; height: auto; max-height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    #memory-edit-text { height: 10; }
    #memory-edit Horizontal { height: auto; }
    #error { color: $error; height: auto; }
    """

    def __init__(self, entry: Entry, save: Save) -> None:
        super().__init__()
        self.entry = entry
        self.save = save
        self._busy = False

    def compose(self) -> ComposeResult:
        entry = self.entry
        with Vertical(id="memory-edit"):
            yield Label(
                f"Edit {entry.id}: {entry.source} in {escape(entry.path)}, "
                f"{escape(entry.whose)} (ctrl+s saves, esc cancels)"
            )
            yield TextArea(entry.text, id="memory-edit-text")
            yield Label("", id="error")
            with Horizontal():
                yield Button("Save", variant="primary", id="send-button")
                yield Button("Cancel", id="cancel-button")

    def on_mount(self) -> None:
        self.query_one("#memory-edit-text", TextArea).focus()

    def action_send(self) -> None:
        text = self.query_one("#memory-edit-text", TextArea).text
        if text.strip() == self.entry.text.strip():
            self.dismiss(f"{self.entry.id} unchanged.")
            return
        if not self._busy:
            self._busy = True
            self.run_worker(self._save(text), exclusive=True)

    async def _save(self, text: str) -> None:
        saved = await self.save(text)
        if saved.code != 0:
            self._busy = False
            self.error(escape(saved.said))
            return
        self.dismiss(verbs.sentence(saved.out))
