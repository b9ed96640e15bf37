"""A yes/no question before an action one key does not undo (the action's `confirm`)."""

from __future__ import annotations

from typing import ClassVar

from rich.markup import escape
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    """Returns True for y, False for n or esc. Enter is neither: a key typed out of habit
    must not archive an agent."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    #confirm { width: 70; max-width: 100%; height: auto; border: round $warning; background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape", "answer(False)", "no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(f"{escape(self.question)}\n\n[b]y[/b] yes    [b]n[/b] / esc no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
