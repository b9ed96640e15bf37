"""All the keys, on one screen, from the app's two tables (hive_tui/commands.py)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from hive_tui.commands import direct_keys, help_rows


def keys_grid(rows: list[tuple[str, str]], *, indent: int) -> Table:
    """Keys in bold, each with what it does; a long text wraps in its own column."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=max(0, indent - 1))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(ratio=1)
    for key, text in rows:
        grid.add_row("", Text(key), Text(text))
    return grid


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: 100; max-width: 100%; height: auto; max-height: 100%; border: round $accent; background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter", "dismiss", "close")
    ]

    def __init__(self, prefix: str, *, alt_digits: bool = True) -> None:
        super().__init__()
        self.prefix = prefix
        self.alt_digits = alt_digits

    def compose(self) -> ComposeResult:
        # Styled text and grids, not markup: `[` is a key (copy mode), and markup read the
        # padded `[    ` before `[/b]` as the start of a tag (issue 23: `[    [/b]`). In a
        # grid, a long line wraps under its own text, not under the key.
        prefix = self.prefix
        shown = Group(
            Text("Keys", "bold"),
            "",
            "Every key goes to the focused agent's terminal (esc, ctrl+c, tab, shift+tab, "
            "ctrl+r, ctrl+b ... included), except:",
            "",
            keys_grid([(keys, text) for keys, _, text in direct_keys(self.alt_digits)], indent=2),
            Text.assemble("  ", (prefix, "bold"), " then one key (AGENT is the focused agent):"),
            keys_grid([*help_rows(), (prefix, f"send {prefix} itself to the agent")], indent=4),
            "",
            "In a pane: shift+pageup/pagedown scroll back; typing returns to the live screen.",
            "In a panel or on the map: the keys are theirs; esc goes back to the agent's pane.",
            "",
            Text("esc closes this.", "dim"),
        )
        with VerticalScroll(id="help"):
            yield Static(shown)

    def on_mount(self) -> None:
        # Taller than a small terminal: arrows and page keys scroll it.
        self.query_one("#help").focus()
