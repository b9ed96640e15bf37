"""All the keys, on one screen, from the app's two tables (hive_tui/commands.py)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from hive_tui.commands import DIRECT_KEYS, help_rows


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: 100; max-width: 100%; height: auto; max-height: 100%; border: round $accent; background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter", "dismiss", "close")
    ]

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def compose(self) -> ComposeResult:
        # Built as styled text, not markup: `[` is a key (copy mode), and markup would read
        # the padded `[    ` before `[/b]` as the start of a tag (issue 23: `[    [/b]`).
        prefix = self.prefix
        bold = "bold"
        lines: list[str | Text] = [
            Text("Keys", bold),
            "",
            "Every key goes to the focused agent's terminal (esc, ctrl+c, tab, shift+tab, "
            "ctrl+r, ctrl+b ... included), except:",
            "",
            *[
                Text.assemble("  ", (f"{keys:<15}", bold), f" {text}")
                for keys, _, text in DIRECT_KEYS
            ],
            Text.assemble("  ", (prefix, bold), " then one key (AGENT is the focused agent):"),
        ]
        lines += [
            Text.assemble("    ", (f"{key:<5}", bold), f" {text}") for key, text in help_rows()
        ]
        lines += [
            Text.assemble("    ", (prefix, bold), f" send {prefix} itself to the agent"),
            "",
            "In a pane: shift+pageup/pagedown scroll back; typing returns to the live screen.",
            "In a panel or on the map: the keys are theirs; esc goes back to the agent's pane.",
            "",
            Text("esc closes this.", "dim"),
        ]
        with VerticalScroll(id="help"):
            yield Static(Text("\n").join(Text(x) if isinstance(x, str) else x for x in lines))

    def on_mount(self) -> None:
        # Taller than a small terminal: arrows and page keys scroll it.
        self.query_one("#help").focus()
