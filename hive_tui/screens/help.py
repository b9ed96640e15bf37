"""All the keys, on one screen."""

from __future__ import annotations

from typing import ClassVar

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: 76; height: auto; border: round $accent; background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,enter", "dismiss", "close")
    ]

    def __init__(self, commands: dict[str, tuple[str, str]], prefix: str) -> None:
        super().__init__()
        self.commands = commands
        self.prefix = prefix

    def compose(self) -> ComposeResult:
        lines = [
            "[b]Keys[/b]",
            "",
            "Every key goes to the focused agent's terminal (esc, ctrl+c, tab, shift+tab,",
            "ctrl+r, ctrl+b ... included), except:",
            "",
            "  [b]alt+1..9[/b]        focus agent N (roster order)",
            f"  [b]{escape(self.prefix)}[/b] then:",
        ]
        lines += [f"    [b]{key:<5}[/b] {text}" for key, (_cmd, text) in self.commands.items()]
        lines += [
            f"    [b]{escape(self.prefix)}[/b] send {escape(self.prefix)} itself to the agent",
            "",
            "In a pane: shift+pageup/pagedown scroll back; typing returns to the live screen.",
            "On the map: arrows or tab move between agents, enter focuses one.",
            "",
            "[dim]esc closes this.[/dim]",
        ]
        with Vertical(id="help"):
            yield Static("\n".join(lines))
